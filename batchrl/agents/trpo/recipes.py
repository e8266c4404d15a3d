"""TRPO recipes: measured ``TRPOConfig`` values that the named configs in
``batchrl.configs.trpo`` build on."""
from __future__ import annotations

from batchrl.agents.trpo.config import TRPOConfig


def cartpole_fused() -> TRPOConfig:
  """Fused gymnax CartPole-v1 with **8 envs**: 128 steps x 8 envs = 1024 per update.

  Measured: see ``batchrl.configs.trpo.trpo_cartpole_fused``.
  """
  return TRPOConfig(
      policy_layers=(64, 64), baseline_layers=(64, 64), rollout_length=128,
      discount=0.99, gae_lambda=0.98, value_target="lambda_return", max_kl_divergence=0.01,
      baseline_learning_rate=1e-3, baseline_steps=10, baseline_minibatches=8)


def pendulum_fused() -> TRPOConfig:
  """Fused gymnax Pendulum-v1 (torque bounds +-2) with **8 envs**: 256 x 8 = 2048 steps per
  update; the tanh mean is rescaled to the bounds.

  Measured: see ``batchrl.configs.trpo.trpo_pendulum_fused``.
  """
  return TRPOConfig(
      policy_layers=(64, 64), baseline_layers=(64, 64), rollout_length=256,
      discount=0.95, gae_lambda=0.95, value_target="lambda_return", max_kl_divergence=0.02,
      init_std=0.5, bounded_mean="tanh", rescale_actions=True, normalize_observations=True,
      baseline_learning_rate=1e-3, baseline_steps=10, baseline_minibatches=16)
