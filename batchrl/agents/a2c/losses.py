"""A2C / AC as pure functions: n-step returns and the joint actor-critic loss (no networks
here).

Shapes: per-sample inputs are ``[T, B]`` (time-major, ``B`` streams); scalars out. A
transition ``t`` goes from ``obs[t]`` to ``next_obs[t]``; ``next_values[t] =
V(next_obs[t])`` (the final observation where an episode ended).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from batchrl.agents.policy_gradient.model import masked_mean


def n_step_returns(rewards: jax.Array, terminated: jax.Array, truncated: jax.Array,
                   next_values: jax.Array, discount: float, n: int) -> jax.Array:
  """``G[t] = r[t] + ... + d^(m-1) r[t+m-1] + d^m (1 - terminated) V(next_obs[t+m-1])``
  with ``m = min(n, steps to the episode's end, steps to the rollout's end)``.

  Built by ``n`` sweeps of ``G_k[t] = r[t] + d * alive[t] * (V(next_obs[t]) if cut[t] or
  k == 1 else G_(k-1)[t+1])``, ``cut`` = truncated or the last row: no return crosses an
  episode end, truncations bootstrap from their final observation, terminations from
  nothing. ``n >= T`` gives ``batchrl.ops.returns.discounted_returns``.

  Args:
    rewards, next_values: ``[T, B]`` float.
    terminated, truncated: ``[T, B]`` bool.
    discount: scalar; n: Python int >= 1.

  Returns:
    ``[T, B]`` float32 returns.
  """
  rewards = rewards.astype(jnp.float32)
  alive = 1.0 - jnp.asarray(terminated, jnp.float32)
  cut = jnp.asarray(truncated, jnp.bool_).at[-1].set(True)
  one_step = rewards + discount * alive * next_values

  def sweep(_, shorter):
    following = jnp.concatenate([shorter[1:], jnp.zeros_like(shorter[:1])], axis=0)
    return rewards + discount * alive * jnp.where(cut, next_values, following)

  return jax.lax.fori_loop(1, min(n, rewards.shape[0]), sweep, one_step)


def a2c_loss(log_prob: jax.Array, entropy: jax.Array, weights: jax.Array,
             values: jax.Array, targets: jax.Array, entropy_coef: float,
             critic_coef: float, mask: jax.Array | None = None):
  """``-mean(log pi(a|s) * w) - entropy_coef * mean(H) + critic_coef * 0.5 * mean((G -
  V)^2)`` and its parts.

  Args:
    log_prob, entropy: ``[T, B]`` of the policy at the actions taken.
    weights: ``[T, B]`` advantages (A2C) or return estimates (AC); no gradient flows
      through them.
    values: ``[T, B]`` the critic's ``V(s)`` (with gradient), or None when the critic
      learns on its own (then ``critic_coef`` is unused).
    targets: ``[T, B]`` the returns the critic regresses to (no gradient).
    mask: ``[T, B]`` bool steps to learn from, or None for all.

  Returns:
    ``(loss, metrics)`` with ``policy_loss``, ``entropy`` and (with ``values``)
    ``baseline_loss``.
  """
  policy = -masked_mean(log_prob * jax.lax.stop_gradient(weights), mask)
  mean_entropy = masked_mean(entropy, mask)
  loss = policy - entropy_coef * mean_entropy
  metrics = {"policy_loss": policy, "entropy": mean_entropy}
  if values is not None:
    critic = 0.5 * masked_mean(jnp.square(jax.lax.stop_gradient(targets) - values), mask)
    loss = loss + critic_coef * critic
    metrics["baseline_loss"] = critic
  return loss, metrics
