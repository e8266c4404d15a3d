"""DQFD's own loss pieces (Hester et al. 2018); the TD parts are DQN's
(``batchrl.agents.replay.losses``).

Shapes: ``K`` samples, an action component of shape ``S`` with ``A`` values has Q-values
``[K, *S, A]`` and actions ``[K, *S]``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def large_margin(q: jax.Array, expert_action: jax.Array, margin: float,
                 mask: jax.Array | None = None) -> jax.Array:
  """The supervised large-margin loss ``max_a [Q(s, a) + l(a_E, a)] - Q(s, a_E)``.

  ``l(a_E, a)`` is ``margin`` for ``a != a_E`` and 0 for the demonstrated action, so the loss
  is 0 exactly when ``Q(s, a_E)`` beats every other allowed action by at least ``margin``,
  and never negative. Disallowed actions (``mask`` False) do not count.

  Args:
    q: ``[K, *S, A]`` Q-values.
    expert_action: ``[K, *S]`` the demonstrated action indices.
    margin: the margin ``l`` of the other actions.
    mask: optional ``bool[K, *S, A]``, True = allowed.
  Returns:
    ``[K, *S]``.
  """
  expert_action = expert_action.astype(jnp.int32)
  others = 1.0 - jax.nn.one_hot(expert_action, q.shape[-1], dtype=q.dtype)
  augmented = q + margin * others
  if mask is not None:
    augmented = jnp.where(mask, augmented, -jnp.inf)
  expert_q = jnp.take_along_axis(q, expert_action[..., None], axis=-1)[..., 0]
  best = jnp.max(augmented, axis=-1)
  return jnp.maximum(best, expert_q) - expert_q


def l2_penalty(params) -> jax.Array:
  """``sum W^2`` over the weight matrices (leaves named ``kernel``; biases are not penalized)."""
  total = jnp.zeros((), jnp.float32)
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    name = getattr(path[-1], "key", getattr(path[-1], "name", None))
    if name == "kernel":
      total = total + jnp.sum(jnp.square(leaf.astype(jnp.float32)))
  return total


def masked_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
  """``sum(w x) / max(sum(w), 1e-8)`` (0 when every weight is 0)."""
  return jnp.sum(weights * values) / jnp.maximum(jnp.sum(weights), 1e-8)
