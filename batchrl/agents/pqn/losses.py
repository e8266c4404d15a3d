"""PQN's pure pieces: Q(lambda) targets over a rollout, the Q-loss, the greedy choice among
allowed actions and epsilon-greedy exploration. Shapes: ``T`` rollout steps, ``B`` envs,
``S`` an action component's shape, ``K`` its number of values, ``M`` minibatch rows."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def lambda_targets(rewards: jax.Array, terminated: jax.Array, truncated: jax.Array,
                   next_values: jax.Array, discount: float, td_lambda: float) -> jax.Array:
  """Q(lambda) targets of a rollout, computed backwards (Peng's Q(lambda) with the greedy
  value, as the paper and its reference code).

  ``target[t] = r[t] + discount * (1 - terminated[t]) * (next_values[t] if cut[t] else
  (1 - td_lambda) * next_values[t] + td_lambda * target[t+1])``, with ``cut[t]`` when the
  episode ended at ``t`` (its final observation's value bootstraps a truncation; a
  termination bootstraps nothing) or ``t`` is the rollout's last step.

  Args:
    rewards, terminated, truncated: ``[T, B]``.
    next_values: ``[T, B, ...]``: ``max_a Q(next_obs[t], a)`` over allowed actions (one per
      action element: ``[T, B, *S]``).
  Returns:
    ``[T, B, ...]`` targets, shaped as ``next_values``.
  """
  expand = lambda x: x.reshape(x.shape + (1,) * (next_values.ndim - x.ndim))  # noqa: E731
  rewards = expand(rewards.astype(jnp.float32))
  alive = expand(1.0 - terminated.astype(jnp.float32))
  cut = expand(jnp.logical_or(terminated, truncated))

  def step(later, t):
    reward, live, ended, value = t
    blended = jnp.where(ended, value, (1.0 - td_lambda) * value + td_lambda * later)
    target = reward + discount * live * blended
    return target, target

  # The last step's carry is its own next value: the blend is then the value itself.
  _, targets = jax.lax.scan(step, next_values[-1], (rewards, alive, cut, next_values),
                            reverse=True)
  return targets


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
