"""A fast random order for minibatch shuffling (the epochs of PPO's update).

``jax.random.permutation`` sorts key/value pairs twice; on a CPU XLA sorts a pair through a
comparator call per comparison, while one array of unsigned ints takes its fast path. So
each round here sorts ONE ``uint32`` array whose high bits are random and whose low bits
hold the position: measured on 2 CPU cores for 4096 rows, 0.48 ms against 1.9 ms, which
was a tenth of a fused CartPole PPO iteration (four shuffles per update).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

MAX_ROWS = 1 << 16  # beyond this fewer than 16 random bits would be left per round


def permutation(key: jax.Array, n: int) -> jax.Array:
  """A uniformly random order of ``range(n)``: ``[n]`` int32.

  Two rounds, as ``jax.random.permutation`` does: each sorts positions by ``32 - log2(n)``
  random bits, ties keeping the order of the round before (itself random), so two rows
  keep a fixed order only if they tie in both rounds (probability ``2 ** -(2 * (32 -
  log2 n))``, below ``1e-9`` for 4096 rows). Falls back to ``jax.random.permutation``
  above ``MAX_ROWS`` rows.
  """
  if not isinstance(n, int) or n < 1:
    raise ValueError(f"n must be a positive int, got {n!r}.")
  if n > MAX_ROWS:
    return jax.random.permutation(key, n)
  mask = jnp.uint32((1 << max(1, (n - 1).bit_length())) - 1)
  index = jnp.arange(n, dtype=jnp.uint32)
  order = index
  for round_key in jax.random.split(key, 2):
    packed = (jax.random.bits(round_key, (n,), jnp.uint32) & ~mask) | index
    order = order[jnp.sort(packed) & mask]
  return order.astype(jnp.int32)
