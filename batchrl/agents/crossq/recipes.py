"""CrossQ recipes: measured ``CrossQConfig`` values that the named configs in
``batchrl.configs.crossq`` build on."""
from __future__ import annotations

from batchrl.agents.crossq.config import CrossQConfig


def pendulum_crossq(**changes) -> CrossQConfig:
  """CrossQ for Pendulum-v1: the paper's optimizer (Adam 1e-3, beta1 0.5, policy delay 3)
  with 2x256 critics (Pendulum needs no wider), batch 256, learning from step 1000 on."""
  values = dict(critic_layers=(256, 256), first_update=1000)
  values.update(changes)
  return CrossQConfig(**values)


def mujoco_crossq(**changes) -> CrossQConfig:
  """CrossQ for MuJoCo with the paper's and sbx's values: a 2x256 actor and 2 critics of
  1024x1024 with Batch Renormalization (momentum 0.99, 100k warmup steps), Adam 1e-3 with
  beta1 0.5 for actor, critics and (beta1 0.9) temperature, the actor stepped on every 3rd
  critic step, batch 256, gamma 0.99, a 1M memory, one gradient step per environment step
  from step 5000 on, the temperature learned from 1.0 toward -|A|."""
  values = dict(batch_size=256, discount=0.99, memory_capacity=1_000_000, first_update=5_000,
                update_frequency=1, repeat_update=1, initial_alpha=1.0,
                actor_layers=(256, 256), critic_layers=(1024, 1024), num_critics=2,
                policy_delay=3)
  values.update(changes)
  return CrossQConfig(**values)
