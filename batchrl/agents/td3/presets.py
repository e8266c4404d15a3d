"""Measured TD3 presets (the named experiments in ``batchrl.configs.actor_critic``)."""
from __future__ import annotations

from batchrl.agents.td3.config import TD3Config


def pendulum_td3(**changes) -> TD3Config:
  """TD3 for Pendulum-v1: DDPG's Pendulum settings plus twin critics, target noise 0.2
  clipped at 0.5 and an actor step every 2 gradient steps."""
  values = dict(learning_rate=1e-3, critic_learning_rate=1e-3, first_update=1000)
  values.update(changes)
  return TD3Config(**values)
