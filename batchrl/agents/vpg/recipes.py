"""VPG recipes: measured ``VPGConfig`` values that the named configs in ``batchrl.configs.vpg``
build on."""
from __future__ import annotations

from batchrl.agents.vpg.config import VPGConfig


def cartpole_fused(total_updates: int | None = None) -> VPGConfig:
  """Fused gymnax CartPole-v1 with **16 envs**: 64 steps x 16 envs = 1024 per update.

  Measured: see ``batchrl.configs.vpg.vpg_cartpole_fused``.
  """
  return VPGConfig(
      policy_layers=(64, 64), baseline_layers=(64, 64), rollout_length=64,
      learning_rate=3e-3, total_updates=total_updates, discount=0.99, gae_lambda=0.95,
      value_target="lambda_return", baseline_learning_rate=3e-3, baseline_steps=4,
      baseline_minibatches=4)
