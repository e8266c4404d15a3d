"""PQN recipes: ``PQNConfig`` values of the reference code (purejaxql at commit 47af6d7,
``purejaxql/config/alg/pqn_<env>.yaml``); ``batchrl.configs.pqn`` builds the named
experiments on them and holds the measured figures."""
from __future__ import annotations

import json

from batchrl.agents.pqn.config import PQNConfig

# conv 16 x 3x3 'valid' (10x10 -> 8x8), dense 128: purejaxql's MinAtar CNN (LayerNorm after
# each layer comes from PQN's builder), the MinAtar paper's DQN network.
MINATAR_NETWORK = [
    {"type": "conv2d", "size": 16, "window": 3, "stride": 1, "padding": "valid",
     "activation": "relu"},
    {"type": "flatten"},
    {"type": "dense", "size": 128, "activation": "relu"},
]


def cartpole(**changes) -> PQNConfig:
  """``pqn_cartpole.yaml``: 64 steps per env (32 envs), 4 epochs of 16 minibatches, RAdam
  1e-4 annealed to 0, two 256-unit LayerNorm layers, rewards x 0.1, lambda 0.95, epsilon
  1.0 -> 0.2 over the first 20% of the updates."""
  values = dict(hidden_layers=(256, 256), rollout_length=64, update_epochs=4,
                num_minibatches=16, learning_rate=1e-4, anneal_learning_rate=True,
                reward_scale=0.1, td_lambda=0.95, epsilon_start=1.0, epsilon_end=0.2,
                epsilon_decay=0.2, max_grad_norm=10.0)
  values.update(changes)
  return PQNConfig(**values)


def minatar(**changes) -> PQNConfig:
  """``pqn_minatar.yaml``: 32 steps per env (128 envs), 2 epochs of 32 minibatches, RAdam
  5e-4 annealed to 0, ``MINATAR_NETWORK``, lambda 0.65, epsilon 1.0 -> 0.05 over the first
  10% of the updates."""
  values = dict(network=json.dumps(MINATAR_NETWORK), rollout_length=32, update_epochs=2,
                num_minibatches=32, learning_rate=5e-4, anneal_learning_rate=True,
                td_lambda=0.65, epsilon_start=1.0, epsilon_end=0.05, epsilon_decay=0.1,
                max_grad_norm=10.0)
  values.update(changes)
  return PQNConfig(**values)


def atari(network: list, **changes) -> PQNConfig:
  """``pqn_atari.yaml`` (the ``PQNConfig`` defaults): 32 steps per env (128 envs), 2 epochs
  of 32 minibatches, RAdam 2.5e-4 constant, lambda 0.65, epsilon 1.0 -> 0.001 over the first
  10% of the updates; ``network`` (the Nature CNN) as a layer list."""
  return PQNConfig(network=json.dumps(network), **changes)
