"""PPO losses as pure functions of distributions, values and targets (no networks here).

Shapes: every per-sample input is ``[N]`` (or any matching leading shape ``[...]``), e.g.
the ``[L, M]`` steps of a minibatch of ``M`` sequences of length ``L``. Scalars out.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from batchrl.agents.ppo.config import PPOConfig


def normalize(x: jax.Array, epsilon: float = 1e-8) -> jax.Array:
  """Standardizes ``x`` over all its elements."""
  return (x - jnp.mean(x)) / (jnp.std(x) + epsilon)


def kl_penalty_policy_loss(log_ratio, advantages, kl, penalty, config: PPOConfig):
  """The original BatchPPO objective: ``-mean(ratio*A) + beta*KL`` plus a KL cutoff.

  Args:
    log_ratio: ``[...]`` ``log pi(a|s) - log pi_old(a|s)``.
    advantages: ``[...]``.
    kl: ``[...]`` ``KL(pi_old || pi)`` per sample.
    penalty: ``[]`` the adaptive ``beta``.

  Returns:
    Scalar loss. When the mean KL exceeds ``kl_target * kl_cutoff_factor`` a steep
    ``kl_cutoff_coef * (KL - threshold)^2`` is added, so one update cannot run away.
  """
  surrogate = -jnp.mean(jnp.exp(log_ratio) * advantages)
  mean_kl = jnp.mean(kl)
  threshold = config.kl_target * config.kl_cutoff_factor
  cutoff = jnp.where(mean_kl > threshold,
                     config.kl_cutoff_coef * jnp.square(mean_kl - threshold), 0.0)
  return surrogate + penalty * mean_kl + cutoff


def clipped_policy_loss(log_ratio, advantages, clip_range: float):
  """The clipped surrogate: ``-mean(min(ratio*A, clip(ratio, 1±eps)*A))``."""
  ratio = jnp.exp(log_ratio)
  clipped = jnp.clip(ratio, 1.0 - clip_range, 1.0 + clip_range)
  return -jnp.mean(jnp.minimum(ratio * advantages, clipped * advantages))


def value_loss(values, returns, old_values, clip_range: float | None):
  """``0.5 * mean((return - V)^2)``; with ``clip_range`` the pessimum of the plain and the
  clipped (``V_old ± clip_range``) prediction errors."""
  error = jnp.square(returns - values)
  if clip_range is not None:
    clipped = old_values + jnp.clip(values - old_values, -clip_range, clip_range)
    error = jnp.maximum(error, jnp.square(returns - clipped))
  return 0.5 * jnp.mean(error)


def adapt_penalty(penalty: jax.Array, kl: jax.Array, kl_target: float) -> jax.Array:
  """After an update: ``beta * 1.5`` when KL > 1.3 target, ``beta / 1.5`` when KL < 0.7 target."""
  penalty = jnp.where(kl > 1.3 * kl_target, penalty * 1.5, penalty)
  return jnp.where(kl < 0.7 * kl_target, penalty / 1.5, penalty)


def ppo_loss(new_dist, old_dist, raw_action, advantages, values, returns, old_values,
             penalty, config: PPOConfig):
  """Total loss ``policy + value_coef * value - entropy_coef * entropy`` and its parts.

  Args:
    new_dist, old_dist: distributions of batch shape ``[...]``.
    raw_action: ``[..., A]`` (Gaussian) or ``[...]`` (categorical) sampled actions.
    advantages, values, returns, old_values: ``[...]``.
    penalty: ``[]`` the KL penalty ``beta`` (unused by the clip objective).

  Returns:
    ``(loss, metrics)`` with ``policy_loss``, ``value_loss``, ``entropy``, ``kl`` (exact
    ``KL(old || new)``), ``approx_kl`` (``mean((r - 1) - log r)``) and ``clipfrac``.
  """
  log_ratio = new_dist.log_prob(raw_action) - old_dist.log_prob(raw_action)
  kl = old_dist.kl(new_dist)
  if config.policy_objective == "kl_penalty":
    policy = kl_penalty_policy_loss(log_ratio, advantages, kl, penalty, config)
  else:
    policy = clipped_policy_loss(log_ratio, advantages, config.clip_range)
  value_clip = config.clip_range if config.clip_value else None
  value = value_loss(values, returns, old_values, value_clip)
  entropy = jnp.mean(new_dist.entropy())
  loss = policy + config.value_coef * value - config.entropy_coef * entropy
  ratio = jnp.exp(log_ratio)
  metrics = {
      "policy_loss": policy,
      "value_loss": value,
      "entropy": entropy,
      "kl": jnp.mean(kl),
      "approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
      "clipfrac": jnp.mean((jnp.abs(ratio - 1.0) > config.clip_range).astype(jnp.float32)),
  }
  return loss, metrics
