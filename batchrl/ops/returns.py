"""Discounted returns and generalized advantage estimation over fixed-length rollouts.

All inputs are time-major ``[T, B]`` (``T`` steps of ``B`` environments). Transition ``t``
goes from ``obs[t]`` to ``next_obs[t]`` with reward ``rewards[t]``; when an episode ended at
``t``, ``next_obs[t]`` is its final observation and ``next_values[t] = V(next_obs[t])``.

  * ``terminated[t]``: a true end; nothing follows, the value after it is 0.
  * ``truncated[t]``: the episode was cut (time limit); bootstrap from ``next_values[t]``.
  * the last step of the rollout is cut as well: bootstrap from ``next_values[T-1]``.

Both functions are a reverse ``lax.scan``; they are pure and jit/vmap-able.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def discounted_returns(rewards: jax.Array, terminated: jax.Array, truncated: jax.Array,
                       next_values: jax.Array, discount: float) -> jax.Array:
  """Monte-Carlo returns, bootstrapped where the rollout or the episode was cut.

  ``G[t] = r[t] + discount * (1 - terminated[t]) * (V(next_obs[t]) if cut[t] else G[t+1])``
  with ``cut[t] = truncated[t] or t == T - 1``.

  Args:
    rewards, next_values: ``[T, B]`` float.
    terminated, truncated: ``[T, B]`` bool.
    discount: scalar.

  Returns:
    ``[T, B]`` float32 returns.
  """
  cut = jnp.asarray(truncated, jnp.bool_).at[-1].set(True)
  alive = 1.0 - jnp.asarray(terminated, jnp.float32)

  def backward(following, inputs):
    reward, alive_t, cut_t, next_value = inputs
    ret = reward + discount * alive_t * jnp.where(cut_t, next_value, following)
    return ret, ret

  last = jnp.zeros_like(rewards[0], jnp.float32)
  _, returns = jax.lax.scan(
      backward, last, (rewards.astype(jnp.float32), alive, cut, next_values), reverse=True)
  return returns


def generalized_advantages(rewards: jax.Array, values: jax.Array, next_values: jax.Array,
                           terminated: jax.Array, truncated: jax.Array, discount: float,
                           lambda_: float) -> jax.Array:
  """GAE(lambda) advantages (Schulman et al. 2016) with terminated/truncated handled apart.

  ``delta[t] = r[t] + discount * (1 - terminated[t]) * next_values[t] - values[t]`` and
  ``A[t] = delta[t] + discount * lambda_ * (1 - done[t]) * A[t+1]`` with ``A[T] = 0``: the
  TD error bootstraps from the final observation on truncation, and no advantage flows
  across an episode boundary. ``A + values`` are the lambda-returns; with ``lambda_ = 1``
  they equal ``discounted_returns``.

  Args:
    rewards, values, next_values: ``[T, B]`` float (``values[t] = V(obs[t])``).
    terminated, truncated: ``[T, B]`` bool.
    discount, lambda_: scalars.

  Returns:
    ``[T, B]`` float32 advantages.
  """
  alive = 1.0 - jnp.asarray(terminated, jnp.float32)
  done = jnp.logical_or(terminated, truncated)
  deltas = rewards + discount * alive * next_values - values
  carry_on = discount * lambda_ * (1.0 - done.astype(jnp.float32))

  def backward(following, inputs):
    delta, carry_on_t = inputs
    advantage = delta + carry_on_t * following
    return advantage, advantage

  last = jnp.zeros_like(rewards[0], jnp.float32)
  _, advantages = jax.lax.scan(
      backward, last, (deltas.astype(jnp.float32), carry_on), reverse=True)
  return advantages
