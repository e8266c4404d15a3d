"""VPG losses as pure functions of distributions, values and targets (no networks here).

Shapes: per-sample inputs are ``[T, B]`` (any matching leading shape); scalars out. A
``mask`` ``[T, B]`` (batches of whole episodes) restricts every mean to its steps; None
means all steps.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from batchrl.agents.policy_gradient.model import masked_mean


def reinforce_loss(log_prob: jax.Array, advantages: jax.Array,
                   mask: jax.Array | None = None) -> jax.Array:
  """``-mean(log pi(a|s) * A)``: its gradient is minus the REINFORCE estimate
  ``mean(grad log pi(a|s) * A)`` (``advantages`` carry no gradient)."""
  return -masked_mean(log_prob * jax.lax.stop_gradient(advantages), mask)


def value_loss(values: jax.Array, targets: jax.Array,
               mask: jax.Array | None = None) -> jax.Array:
  """``0.5 * mean((target - V)^2)``."""
  return 0.5 * masked_mean(jnp.square(jax.lax.stop_gradient(targets) - values), mask)


def vpg_loss(dist, raw_action, advantages, values, targets, entropy_coef: float,
             baseline_coef: float, mask: jax.Array | None = None):
  """``policy - entropy_coef * H (+ baseline_coef * value)`` and its parts.

  Args:
    dist: the policy, batch ``[T, B]``.
    raw_action: the actions taken, ``[T, B, ...]``.
    advantages, targets: ``[T, B]``.
    values: ``[T, B]`` of a value head sharing the policy's network, or None.
    mask: ``[T, B]`` bool steps to learn from, or None for all.

  Returns:
    ``(loss, metrics)`` with ``policy_loss``, ``entropy`` and (with ``values``)
    ``baseline_loss``.
  """
  policy = reinforce_loss(dist.log_prob(raw_action), advantages, mask)
  entropy = masked_mean(dist.entropy(), mask)
  loss = policy - entropy_coef * entropy
  metrics = {"policy_loss": policy, "entropy": entropy}
  if values is not None:
    baseline = value_loss(values, targets, mask)
    loss = loss + baseline_coef * baseline
    metrics["baseline_loss"] = baseline
  return loss, metrics
