"""Measured settings the Q-learning agents share: DQN's CartPole recipe and DQFD's, which is
DQN's agent plus demonstrations (``batchrl.agents.dqn.recipes``, ``batchrl.agents.dqfd.recipes``;
the figures are in ``batchrl.configs.dqn`` and ``batchrl.configs.dqfd``)."""
from __future__ import annotations

import json


def cartpole_values() -> dict:
  """CartPole-v1 ``DQNConfig`` fields, after the rl-zoo DQN settings (lr 2.3e-3, batch 64,
  256x256, epsilon to 0.04 over 16% of 50k steps, one target sync per update phase), with
  updates every ``update_frequency`` stores of 128 gradient steps."""
  return dict(
      hidden_layers=(256, 256), learning_rate=2.3e-3, batch_size=64, memory_capacity=100_000,
      first_update=1000, update_frequency=32, repeat_update=128, target_update_frequency=256,
      discount=0.99, clip_loss=1.0, max_grad_norm=10.0,
      exploration=json.dumps({"type": "epsilon_anneal", "initial_epsilon": 1.0,
                              "final_epsilon": 0.04, "timesteps": 8000}))
