"""TD3 recipes: measured ``TD3Config`` values that the named configs in ``batchrl.configs.td3``
build on."""
from __future__ import annotations

from batchrl.agents.td3.config import TD3Config


def pendulum_td3(**changes) -> TD3Config:
  """TD3 for Pendulum-v1: DDPG's Pendulum settings plus twin critics, target noise 0.2
  clipped at 0.5 and an actor step every 2 gradient steps."""
  values = dict(learning_rate=1e-3, critic_learning_rate=1e-3, first_update=1000)
  values.update(changes)
  return TD3Config(**values)


def mujoco_td3(**changes) -> TD3Config:
  """TD3 for MuJoCo with the values the published implementations share (Fujimoto et al.
  2018 and the authors' repository, CleanRL's td3_continuous_action, SB3 rl-zoo): 2x256 ReLU
  MLPs, Adam 3e-4, batch 256, gamma 0.99, tau 0.005, a memory of 1M transitions, uniform
  random actions for the first 25000 steps and from then on one gradient step per
  environment step and the actor's actions with Gaussian exploration noise 0.1, target noise
  0.2 clipped at 0.5 and an actor (and target) step every 2 gradient steps (noise in units
  of the action range's half width, as theirs)."""
  values = dict(learning_rate=3e-4, critic_learning_rate=3e-4, batch_size=256,
                discount=0.99, update_target_weight=0.005, memory_capacity=1_000_000,
                first_update=25_000, start_steps=25_000, update_frequency=1,
                repeat_update=1, target_update_frequency=1,
                exploration='{"type": "gaussian", "sigma": 0.1}', target_noise=0.2,
                target_noise_clip=0.5, policy_delay=2, actor_layers=(256, 256),
                critic_layers=(256, 256))
  values.update(changes)
  return TD3Config(**values)
