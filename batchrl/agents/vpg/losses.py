"""VPG losses as pure functions of distributions, values and targets (no networks here).

Shapes: per-sample inputs are ``[T, B]`` (any matching leading shape); scalars out.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def reinforce_loss(log_prob: jax.Array, advantages: jax.Array) -> jax.Array:
  """``-mean(log pi(a|s) * A)``: its gradient is minus the REINFORCE estimate
  ``mean(grad log pi(a|s) * A)`` (``advantages`` carry no gradient)."""
  return -jnp.mean(log_prob * jax.lax.stop_gradient(advantages))


def value_loss(values: jax.Array, targets: jax.Array) -> jax.Array:
  """``0.5 * mean((target - V)^2)``."""
  return 0.5 * jnp.mean(jnp.square(jax.lax.stop_gradient(targets) - values))


def vpg_loss(dist, raw_action, advantages, values, targets, entropy_coef: float,
             baseline_coef: float):
  """``policy - entropy_coef * H (+ baseline_coef * value)`` and its parts.

  Args:
    dist: the policy, batch ``[T, B]``.
    raw_action: the actions taken, ``[T, B, ...]``.
    advantages, targets: ``[T, B]``.
    values: ``[T, B]`` of a value head sharing the policy's network, or None.

  Returns:
    ``(loss, metrics)`` with ``policy_loss``, ``entropy`` and (with ``values``)
    ``baseline_loss``.
  """
  policy = reinforce_loss(dist.log_prob(raw_action), advantages)
  entropy = jnp.mean(dist.entropy())
  loss = policy - entropy_coef * entropy
  metrics = {"policy_loss": policy, "entropy": entropy}
  if values is not None:
    baseline = value_loss(values, targets)
    loss = loss + baseline_coef * baseline
    metrics["baseline_loss"] = baseline
  return loss, metrics
