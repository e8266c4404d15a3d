"""TQC recipes: measured ``TQCConfig`` values that the named configs in ``batchrl.configs.tqc``
build on."""
from __future__ import annotations

from batchrl.agents.actor_critic.recipes import SIMBA
from batchrl.agents.tqc.config import TQCConfig


def pendulum_tqc(**changes) -> TQCConfig:
  """TQC for Pendulum-v1: SAC's Pendulum settings (2x256 MLPs, batch 256, Adam 1e-3 for
  actor, critics and alpha, learning from step 1000 on, tau 0.005) with 2 critics of 25
  quantiles, 2 dropped per critic."""
  values = dict(learning_rate=1e-3, critic_learning_rate=1e-3, alpha_learning_rate=1e-3,
                first_update=1000)
  values.update(changes)
  return TQCConfig(**values)


def mujoco_tqc(**changes) -> TQCConfig:
  """TQC for MuJoCo with sb3-contrib's and sbx's values (the paper's, but for the dropped
  quantiles, which the paper tunes per task): SAC's MuJoCo values (``mujoco_sac``: 2x256
  ReLU MLPs, Adam 3e-4 for actor, critics and temperature, batch 256, gamma 0.99, tau 0.005,
  a 1M memory, one gradient step per environment step from step 5000 on) with 2 critics of
  25 quantiles, the 2 largest of each dropped from the target (46 atoms kept)."""
  values = dict(learning_rate=3e-4, critic_learning_rate=3e-4, alpha_learning_rate=3e-4,
                batch_size=256, discount=0.99, update_target_weight=0.005,
                memory_capacity=1_000_000, first_update=5_000, update_frequency=1,
                repeat_update=1, target_update_frequency=1, initial_alpha=1.0,
                actor_layers=(256, 256), critic_layers=(256, 256), num_critics=2,
                num_quantiles=25, drop_quantiles=2)
  values.update(changes)
  return TQCConfig(**values)


def mujoco_tqc_simba(**changes) -> TQCConfig:
  """TQC with SimBa networks (Lee et al. 2025) for MuJoCo, as sbx's SimBa recipe (its
  README's "Note about SimBa", whose example trains TQC; sbx 0.28): ``mujoco_tqc``'s values
  (2 critics of 25 quantiles, 2 dropped per critic, Adam's rates 3e-4, batch 256, a 1M
  memory, one gradient step per environment step) with SimBa's networks, AdamW, running
  observation normalization and uniform actions for the first 10k steps
  (``batchrl.agents.actor_critic.recipes.SIMBA``)."""
  return mujoco_tqc(**{**SIMBA, **changes})
