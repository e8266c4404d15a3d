"""The replay agents' pure TD pieces: the Huber / squared TD loss (DQN, DQFD, NAF and the
actor-critic agents), and Q-learning's greedy choice, (double) targets and n-step returns over
windows (DQN, DQFD). Here, not in one agent's folder, so a change to one agent's losses
cannot change another's. Shapes: ``K`` samples, ``L`` window steps, ``A`` Q-values."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def huber(x: jax.Array, delta: float) -> jax.Array:
  """``0.5 x^2`` for ``|x| <= delta``, else ``delta (|x| - 0.5 delta)`` (elementwise)."""
  absolute = jnp.abs(x)
  quadratic = jnp.minimum(absolute, delta)
  return 0.5 * quadratic ** 2 + delta * (absolute - quadratic)


def td_loss(errors: jax.Array, clip_loss: float) -> jax.Array:
  """Elementwise loss of TD errors: Huber with bound ``clip_loss`` when > 0, else ``0.5 x^2``."""
  if clip_loss > 0:
    return huber(errors, clip_loss)
  return 0.5 * jnp.square(errors)


def select(q: jax.Array, action: jax.Array) -> jax.Array:
  """``q[..., A]`` at ``action[...]`` -> ``[...]``."""
  return jnp.take_along_axis(q, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def greedy(q: jax.Array, mask: jax.Array | None = None) -> jax.Array:
  """``argmax`` over allowed values (``mask`` True = allowed), ``int32[...]``."""
  if mask is not None:
    q = jnp.where(mask, q, -jnp.inf)
  return jnp.argmax(q, axis=-1).astype(jnp.int32)


def next_values(q_target: jax.Array, q_online: jax.Array | None,
                mask: jax.Array | None) -> jax.Array:
  """Value of the next state: ``max_a Q_target(s', a)`` (DQN) or, given the online network's
  ``q_online``, ``Q_target(s', argmax_a Q_online(s', a))`` (double DQN); allowed actions only."""
  chooser = q_target if q_online is None else q_online
  return select(q_target, greedy(chooser, mask))


def nstep_returns(rewards: jax.Array, terminated: jax.Array, alive: jax.Array,
                  discount: float):
  """Discounted sums over windows and how to bootstrap after them.

  Args:
    rewards, terminated: ``[K, L]`` of the window's steps.
    alive: ``bool[K, L]`` steps that belong to the window (a prefix: step 0 always; the
      window stops after an episode end, a discontinuity or the newest stored step).
  Returns:
    ``(returns[K], last[K], bootstrap_discount[K])``: ``sum_l alive_l discount^l r_l``, the
    index of the last step used, and ``discount^m (1 - terminated[last])`` with ``m`` steps
    used: the factor of ``V(next_obs[last])`` (0 after a true end; a truncated or cut window
    bootstraps from the final observation).
  """
  alive = alive.astype(jnp.float32)
  length = rewards.shape[1]
  powers = discount ** jnp.arange(length, dtype=jnp.float32)
  returns = jnp.sum(alive * powers * rewards.astype(jnp.float32), axis=1)
  used = jnp.sum(alive, axis=1).astype(jnp.int32)
  last = jnp.maximum(used - 1, 0)
  ended = jnp.take_along_axis(terminated, last[:, None], axis=1)[:, 0]
  bootstrap = jnp.power(jnp.float32(discount), used.astype(jnp.float32)) * (
      1.0 - ended.astype(jnp.float32))
  return returns, last, bootstrap


def expand(x: jax.Array, like: jax.Array) -> jax.Array:
  """``x[K]`` broadcast against ``like[K, ...]``."""
  return x.reshape(x.shape + (1,) * (like.ndim - x.ndim))
