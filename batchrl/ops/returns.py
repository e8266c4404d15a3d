"""Discounted returns, generalized advantage estimation and lambda-returns over
fixed-length rollouts.

All inputs are time-major ``[T, B]`` (``T`` steps of ``B`` environments). Transition ``t``
goes from ``obs[t]`` to ``next_obs[t]`` with reward ``rewards[t]``; when an episode ended at
``t``, ``next_obs[t]`` is its final observation and ``next_values[t] = V(next_obs[t])``.

  * ``terminated[t]``: a true end; nothing follows, the value after it is 0.
  * ``truncated[t]``: the episode was cut (time limit); bootstrap from ``next_values[t]``.
  * the last step of the rollout is cut as well: bootstrap from ``next_values[T-1]``.

Each function is a reverse ``lax.scan``; they are pure and jit/vmap-able.
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


def lambda_returns(rewards: jax.Array, terminated: jax.Array, truncated: jax.Array,
                   next_values: jax.Array, discount: float, lambda_: float) -> jax.Array:
  """lambda-returns bootstrapped from a value of every next observation, computed
  backwards: PQN's Q(lambda) targets (Peng's Q(lambda) with ``next_values[t] = max_a
  Q(next_obs[t], a)``, as the paper and its reference code), or TD(lambda) returns of
  state values.

  ``G[t] = r[t] + discount * (1 - terminated[t]) * (next_values[t] if cut[t] else
  (1 - lambda_) * next_values[t] + lambda_ * G[t+1])`` with ``cut[t] = terminated[t] or
  truncated[t] or t == T - 1``: a truncation bootstraps from its final observation's
  value, a termination from nothing. ``lambda_ = 0`` gives one-step targets, ``lambda_ =
  1`` ``discounted_returns``.

  Args:
    rewards: ``[T, B]`` float.
    terminated, truncated: ``[T, B]`` bool.
    next_values: ``[T, B, ...]`` float (e.g. one value per action element ``[T, B, *S]``;
      rewards and ends broadcast over the extra axes).
    discount, lambda_: scalars (may be traced).

  Returns:
    ``[T, B, ...]`` float32 returns, shaped as ``next_values``.
  """
  expand = lambda x: x.reshape(x.shape + (1,) * (next_values.ndim - x.ndim))
  rewards = expand(jnp.asarray(rewards, jnp.float32))
  alive = expand(1.0 - jnp.asarray(terminated, jnp.float32))
  cut = expand(jnp.logical_or(terminated, truncated))
  next_values = jnp.asarray(next_values, jnp.float32)

  def backward(following, inputs):
    reward, alive_t, cut_t, value = inputs
    blended = jnp.where(cut_t, value, (1.0 - lambda_) * value + lambda_ * following)
    ret = reward + discount * alive_t * blended
    return ret, ret

  # The last step's carry is its own next value: the blend is then the value itself.
  _, returns = jax.lax.scan(backward, next_values[-1], (rewards, alive, cut, next_values),
                            reverse=True)
  return returns
