"""Proportional prioritized sampling: a sum tree (O(log N) per draw) and the naive O(N) variant.

The sum tree is a heap of ``2P`` float32 nodes over ``P >= N`` leaves (a power of two; node 1
is the root, the leaves are nodes ``P .. 2P - 1``, unused leaves hold 0). Every internal node
is *recomputed* from its two children whenever a leaf below it changes, never adjusted by a
difference, so ``node == fl(left + right)`` holds exactly at all times and rounding cannot
drift.

**Zero priority is never drawn.** A float32 sum tree that descends with "go left iff
``value < left``" can end on a leaf of priority 0: ``u * total`` may round to ``total`` (or
above the left sum by less than an ulp) and walk into an empty right subtree. The descent here
goes into a child only if that child's sum is positive (it goes left when the right sum is 0,
right when the left sum is 0). Since a float32 sum of non-negative numbers is 0 only when both
are 0, every node on the path has a positive sum, and so has the leaf it ends on, whatever
the rounding. (An empty tree, root 0, returns leaf 0: callers sample only non-empty memories.)

A second heap keeps the minimum of the positive leaves (``inf`` for empty ones): the importance
weights ``w_i = (N P(i))^-beta / max_j w_j`` simplify to ``(p_i / p_min)^-beta``, where
``p_min`` is the smallest stored priority (PER, Schaul et al. 2016).

Updates of ``K`` leaves at once are level-wise scatters (``K log P`` work); duplicate indices
are fine: each parent is recomputed from what its children finally hold.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class SumTree(NamedTuple):
  """Sum and min heaps over ``P`` leaves; ``sums[1]`` is the total. Shapes ``[2P]``."""

  sums: jax.Array
  mins: jax.Array

  @property
  def num_leaves(self) -> int:
    return self.sums.shape[-1] // 2

  @property
  def total(self) -> jax.Array:
    return self.sums[1]

  @property
  def min(self) -> jax.Array:
    """Smallest positive leaf (``inf`` when every leaf is 0)."""
    return self.mins[1]

  def leaves(self) -> jax.Array:
    """``[P]`` leaf priorities."""
    return self.sums[self.num_leaves:]


def tree_size(num_items: int) -> int:
  """Number of leaves ``P``: the smallest power of two ``>= num_items``."""
  return 1 << max(0, int(num_items) - 1).bit_length()


def tree_init(num_items: int) -> SumTree:
  """An all-zero tree for ``num_items`` leaves."""
  p = tree_size(num_items)
  return SumTree(jnp.zeros((2 * p,), jnp.float32), jnp.full((2 * p,), jnp.inf, jnp.float32))


def tree_update(tree: SumTree, index: jax.Array, values: jax.Array) -> SumTree:
  """Sets leaves ``index[K]`` to ``values[K]`` (>= 0) and recomputes their ancestors."""
  p = tree.num_leaves
  depth = p.bit_length() - 1
  pos = jnp.asarray(index, jnp.int32) + p
  values = jnp.asarray(values, jnp.float32)
  sums = tree.sums.at[pos].set(values)
  mins = tree.mins.at[pos].set(jnp.where(values > 0, values, jnp.inf))

  def level(_, carry):  # a loop, not unrolled: deep trees compile as fast as small ones
    pos, sums, mins = carry
    pos = pos // 2
    sums = sums.at[pos].set(sums[2 * pos] + sums[2 * pos + 1])
    mins = mins.at[pos].set(jnp.minimum(mins[2 * pos], mins[2 * pos + 1]))
    return pos, sums, mins

  _, sums, mins = jax.lax.fori_loop(0, depth, level, (pos, sums, mins))
  return SumTree(sums, mins)


def tree_find(tree: SumTree, uniform: jax.Array) -> jax.Array:
  """Leaf indices ``[K]`` for ``uniform[K]`` in ``[0, 1)``: leaf ``i`` with probability
  ``p_i / total``. Never a leaf of priority 0 while the total is positive (module docstring)."""
  p = tree.num_leaves
  depth = p.bit_length() - 1
  value = jnp.asarray(uniform, jnp.float32) * tree.sums[1]

  def level(_, carry):
    pos, value = carry
    left, right = tree.sums[2 * pos], tree.sums[2 * pos + 1]
    go_right = ((value >= left) & (right > 0)) | (left <= 0)
    return 2 * pos + go_right.astype(jnp.int32), jnp.where(go_right, value - left, value)

  pos, _ = jax.lax.fori_loop(0, depth, level, (jnp.ones(value.shape, jnp.int32), value))
  return pos - p


def tree_sample(tree: SumTree, key: jax.Array, batch_size: int) -> jax.Array:
  """``batch_size`` independent proportional draws, ``int32[batch_size]`` leaf indices."""
  return tree_find(tree, jax.random.uniform(key, (batch_size,)))


def importance_weights(priorities: jax.Array, min_priority: jax.Array,
                       beta: jax.Array) -> jax.Array:
  """``(p_i / p_min)^-beta`` = ``(N P(i))^-beta / max_j (N P(j))^-beta``, in ``(0, 1]``.

  ``priorities`` are the (already ``alpha``-powered) priorities of the drawn items.
  """
  safe = jnp.maximum(priorities, jnp.finfo(jnp.float32).tiny)
  ratio = jnp.where(jnp.isfinite(min_priority), safe / min_priority, 1.0)
  return jnp.power(jnp.maximum(ratio, 1.0), -beta).astype(jnp.float32)


def naive_sample(priorities: jax.Array, key: jax.Array, batch_size: int) -> jax.Array:
  """Proportional draws over a flat ``[N]`` priority array in O(N) per draw (Gumbel-max):
  ``argmax(log p + Gumbel)``; ``log 0 = -inf``, so zero priorities are never drawn."""
  logits = jnp.where(priorities > 0, jnp.log(jnp.maximum(priorities, 1e-38)), -jnp.inf)
  return jax.random.categorical(key, logits, shape=(batch_size,)).astype(jnp.int32)


def naive_min(priorities: jax.Array) -> jax.Array:
  """Smallest positive entry of ``priorities`` (``inf`` when none)."""
  return jnp.min(jnp.where(priorities > 0, priorities, jnp.inf))
