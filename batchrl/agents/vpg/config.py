"""VPGConfig (defined in ``batchrl.configs.pg``, see why there) and measured presets.

The shared fields (networks, rollout, returns, baselines, normalizers, actions) are those of
``PGConfig``; VPG adds its policy optimizer (one Adam step on the whole batch per update: the
batch is the gradient estimate) and the weight of the value head's loss when the baseline
shares the policy's network.
"""
from __future__ import annotations

from batchrl.configs.pg import PGConfig, VPGConfig

__all__ = ["PGConfig", "VPGConfig", "cartpole_fused"]


def cartpole_fused(total_updates: int | None = None) -> VPGConfig:
  """Fused gymnax CartPole-v1 with **16 envs**: 64 steps x 16 envs = 1024 per update.

  Measured: see ``batchrl.configs.pg.vpg_cartpole_fused``.
  """
  return VPGConfig(
      policy_layers=(64, 64), baseline_layers=(64, 64), rollout_length=64,
      learning_rate=3e-3, total_updates=total_updates, discount=0.99, gae_lambda=0.95,
      value_target="lambda_return", baseline_learning_rate=3e-3, baseline_steps=4,
      baseline_minibatches=4)
