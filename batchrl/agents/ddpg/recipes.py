"""DDPG recipes: measured ``DDPGConfig`` values that the named configs in
``batchrl.configs.ddpg`` build on."""
from __future__ import annotations

from batchrl.agents.ddpg.config import DDPGConfig


def pendulum_ddpg(**changes) -> DDPGConfig:
  """DDPG for Pendulum-v1: 2x256 MLPs, batch 256, Adam 1e-3 (actor and critic), one
  gradient step per environment step from step 1000 on, tau 0.005, Gaussian noise 0.1."""
  values = dict(learning_rate=1e-3, critic_learning_rate=1e-3, first_update=1000)
  values.update(changes)
  return DDPGConfig(**values)
