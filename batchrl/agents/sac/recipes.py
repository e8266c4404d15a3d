"""SAC recipes: measured ``SACConfig`` values that the named configs in ``batchrl.configs.sac``
build on."""
from __future__ import annotations

from batchrl.agents.actor_critic.recipes import DROQ, SIMBA
from batchrl.agents.sac.config import SACConfig


def pendulum_sac(**changes) -> SACConfig:
  """SAC for Pendulum-v1: 2x256 MLPs, batch 256, Adam 1e-3 for actor, critics and alpha,
  one gradient step per environment step from step 1000 on, tau 0.005."""
  values = dict(learning_rate=1e-3, critic_learning_rate=1e-3, alpha_learning_rate=1e-3,
                first_update=1000)
  values.update(changes)
  return SACConfig(**values)


def mujoco_sac(**changes) -> SACConfig:
  """SAC for MuJoCo with the values the published implementations share (Haarnoja et al.
  2018, CleanRL's sac_continuous_action, SB3 rl-zoo): 2x256 ReLU MLPs, Adam 3e-4 for actor,
  critics and temperature, batch 256, gamma 0.99, tau 0.005 after every gradient step, a
  memory of 1M transitions, one gradient step per environment step from step 5000 on, the
  temperature learned from 1.0 toward -|A|.

  CleanRL steps its critics with 1e-3 (3e-4 elsewhere) and its actor on every second
  gradient step, twice then: as many actor steps per environment step as here, where the
  actor steps on every one (the paper, SB3)."""
  values = dict(learning_rate=3e-4, critic_learning_rate=3e-4, alpha_learning_rate=3e-4,
                batch_size=256, discount=0.99, update_target_weight=0.005,
                memory_capacity=1_000_000, first_update=5_000, update_frequency=1,
                repeat_update=1, target_update_frequency=1, initial_alpha=1.0,
                actor_layers=(256, 256), critic_layers=(256, 256))
  values.update(changes)
  return SACConfig(**values)


def cartpole_sac(**changes) -> SACConfig:
  """Discrete SAC for CartPole-v1 (one Discrete action of 2): 2x64 MLPs, batch 128, Adam 1e-3
  for actor, critics and alpha, a memory of 50k transitions, learning from step 1000 on, the
  default target entropy (0.7 log 2)."""
  values = dict(actor_layers=(64, 64), critic_layers=(64, 64), batch_size=128,
                learning_rate=1e-3, critic_learning_rate=1e-3, alpha_learning_rate=1e-3,
                memory_capacity=50_000, first_update=1000)
  values.update(changes)
  return SACConfig(**values)


def mujoco_sac_simba(**changes) -> SACConfig:
  """SAC with SimBa networks (Lee et al. 2025) for MuJoCo, as sbx's SimBa recipe (its
  README's "Note about SimBa", sbx 0.28): ``mujoco_sac``'s values (Adam's rates 3e-4, batch
  256, gamma 0.99, tau 0.005, a 1M memory, one gradient step per environment step) with a
  SimBa actor of one residual block of width 128, two critics of two blocks of width 256,
  AdamW with weight decay 1e-4 (optax.adamw's default, which sbx's SimBa policies use),
  running observation normalization (sbx: VecNormalize, observations only), and uniform
  random actions for the first 10k steps, learning from then on (sbx's learning_starts)."""
  return mujoco_sac(**{**SIMBA, **changes})


def mujoco_droq(**changes) -> SACConfig:
  """DroQ (Hiraoka et al. 2022) for MuJoCo, the values of sbx's README ("Note about DroQ",
  the paper's): ``mujoco_sac``'s (2x256 ReLU MLPs, Adam 3e-4, batch 256, gamma 0.99, tau
  0.005 after every gradient step, a 1M memory) with dropout 0.01 and LayerNorm after each
  hidden layer of the critics, 20 gradient steps per environment step (the update-to-data
  ratio), the actor and temperature stepped on every 20th, and uniform random actions for
  the first 10k steps, learning from then on (sbx's learning_starts)."""
  return mujoco_sac(**{**DROQ, **changes})


def pendulum_sac_simba(**changes) -> SACConfig:
  """SAC with SimBa networks for Pendulum-v1: ``pendulum_sac``'s values (Adam 1e-3 for
  actor, critics and alpha, learning from step 1000 on) with a SimBa actor of one block of
  width 32 and critics of two blocks of 32 (a block is a 4x wider bottleneck: 32 costs about
  what a 2x64 MLP does), AdamW with weight decay 1e-4 and running observation
  normalization."""
  values = dict(architecture="simba", actor_layers=(32,), critic_layers=(32, 32),
                weight_decay=1e-4, normalize_observations=True)
  return pendulum_sac(**{**values, **changes})


def pendulum_droq(**changes) -> SACConfig:
  """DroQ for Pendulum-v1: ``pendulum_sac``'s values with 2x64 MLPs, dropout 0.01 and
  LayerNorm in the critics and the actor and temperature stepped on every 5th gradient step,
  learning from step 1000 on. With 5 gradient steps per environment step
  (``droq_pendulum``: ``repeat_update=20`` per store of 4 envs) that is one actor step per
  environment step, as DroQ's 20 and 20."""
  values = dict(actor_layers=(64, 64), critic_layers=(64, 64), critic_dropout=0.01,
                critic_layer_norm=True, policy_delay=5)
  return pendulum_sac(**{**values, **changes})
