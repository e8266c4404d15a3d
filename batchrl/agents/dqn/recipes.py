"""DQN recipes: measured ``DQNConfig`` values that the named configs in ``batchrl.configs.dqn``
build on (the figures are in that module's docstring)."""
from __future__ import annotations

import json

from batchrl.agents.replay.q_config import DQNConfig
from batchrl.agents.replay.recipes import cartpole_values


def cartpole(**changes) -> DQNConfig:
  """CartPole-v1: ``batchrl.agents.replay.recipes.cartpole_values`` (after the rl-zoo DQN
  settings; DQFD's recipe starts from them too). See ``batchrl.configs.dqn``."""
  values = cartpole_values()
  values.update(changes)
  return DQNConfig(**values)


# conv 16 x 3x3 (valid: 10x10 -> 8x8), dense 128: the MinAtar paper's DQN network
MINATAR_NETWORK = [
    {"type": "conv2d", "size": 16, "window": 3, "stride": 1, "padding": "valid",
     "activation": "relu"},
    {"type": "flatten"},
    {"type": "dense", "size": 128, "activation": "relu"},
]


def minatar(**changes) -> DQNConfig:
  """MinAtar (10x10xC observations, a few actions) for short runs: ``MINATAR_NETWORK``,
  Double DQN, Adam 5e-4, batch 32, a 50k-transition memory, learning from step 5000 with
  one gradient step per 4 env steps (2 per store of 8 envs), a hard target sync every 1000
  steps, epsilon 1.0 -> 0.05 over 50k steps. A memory item holds two 400-float
  observations, so 50k items take 160 MB."""
  values = dict(
      network=json.dumps(MINATAR_NETWORK), memory_capacity=50_000, batch_size=32,
      first_update=5_000, update_frequency=1, repeat_update=2, target_update_frequency=1_000,
      learning_rate=5e-4, clip_loss=1.0, double_dqn=True, max_grad_norm=10.0,
      exploration=json.dumps({"type": "epsilon_anneal", "initial_epsilon": 1.0,
                              "final_epsilon": 0.05, "timesteps": 50_000}))
  values.update(changes)
  return DQNConfig(**values)
