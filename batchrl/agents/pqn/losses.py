"""PQN's pure pieces: the Q-loss, the greedy choice among allowed actions and
epsilon-greedy exploration (its Q(lambda) targets are ``batchrl.ops.returns.lambda_returns``).
Shapes: ``S`` an action component's shape, ``K`` its number of values."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def select(q: jax.Array, index: jax.Array) -> jax.Array:
  """``q[..., K]`` at ``index[...]`` -> ``[...]``."""
  return jnp.take_along_axis(q, index[..., None].astype(jnp.int32), axis=-1)[..., 0]


def greedy(q: jax.Array, mask: jax.Array) -> jax.Array:
  """``argmax`` over allowed values (``mask`` True = allowed): ``int32[...]``."""
  return jnp.argmax(jnp.where(mask, q, -jnp.inf), axis=-1).astype(jnp.int32)


def max_allowed(q: jax.Array, mask: jax.Array) -> jax.Array:
  """``max`` over allowed values: ``[...]``."""
  return jnp.max(jnp.where(mask, q, -jnp.inf), axis=-1)


def epsilon_greedy(key: jax.Array, q: jax.Array, mask: jax.Array, epsilon) -> jax.Array:
  """Per element: with probability ``epsilon`` a uniform allowed value, else the greedy
  one. ``q, mask: [..., K]`` -> ``int32[...]``."""
  explore_key, pick_key = jax.random.split(key)
  uniform = jax.random.categorical(pick_key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)
  explore = jax.random.uniform(explore_key, q.shape[:-1]) < epsilon
  return jnp.where(explore, uniform, greedy(q, mask))


def q_loss(q_taken: jax.Array, targets: jax.Array) -> jax.Array:
  """``mean(0.5 * (Q(s, a) - target)^2)`` over every row and action element."""
  return jnp.mean(0.5 * jnp.square(q_taken - targets))


def linear_epsilon(start, end, span, updates) -> jax.Array:
  """``start`` -> ``end`` linearly over ``span`` updates, then ``end`` (``span`` 0: ``end``).
  Arithmetic only, so the values may be traced (``batchrl tune`` runs trials side by side)."""
  span = jnp.asarray(span, jnp.float32)
  fraction = jnp.where(span > 0, jnp.clip(jnp.asarray(updates, jnp.float32)
                                          / jnp.maximum(span, 1e-9), 0.0, 1.0), 1.0)
  start, end = jnp.asarray(start, jnp.float32), jnp.asarray(end, jnp.float32)
  return start + (end - start) * fraction
