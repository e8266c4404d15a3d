"""Measured SAC presets (the named experiments in ``batchrl.configs.actor_critic``)."""
from __future__ import annotations

from batchrl.agents.sac.config import SACConfig


def pendulum_sac(**changes) -> SACConfig:
  """SAC for Pendulum-v1: 2x256 MLPs, batch 256, Adam 1e-3 for actor, critics and alpha,
  one gradient step per environment step from step 1000 on, tau 0.005."""
  values = dict(learning_rate=1e-3, critic_learning_rate=1e-3, alpha_learning_rate=1e-3,
                first_update=1000)
  values.update(changes)
  return SACConfig(**values)
