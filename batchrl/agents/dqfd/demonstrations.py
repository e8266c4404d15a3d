"""Demonstration sources of ``DQFDConfig.demonstrations``: a path to an ``.npz`` file with
the arrays ``states``, ``actions``, ``rewards``, ``terminals`` (0 continue, 1 terminated, 2
truncated) and optionally ``next_states``; or the name of a built-in source:

=======================  ==================================================================
``cartpole_controller``  CartPole-v1 driven by a fixed controller that pushes toward the
                         pole's lean, ``action = int(theta + 0.5 * theta_dot > 0)``: it
                         holds the pole for the full 500 steps from every start tried
=======================  ==================================================================
"""
from __future__ import annotations

import functools

import numpy as np

from batchrl.configclass import ConfigError


def cartpole_action(state: np.ndarray) -> np.ndarray:
  """The demonstrator: push toward the pole's lean, ``int(theta + 0.5 theta_dot > 0)``.

  ``state[..., 4]`` (x, x_dot, theta, theta_dot) -> ``int[...]``."""
  state = np.asarray(state)
  return (state[..., 2] + 0.5 * state[..., 3] > 0).astype(np.int64)


@functools.lru_cache(maxsize=4)
def cartpole_controller(count: int, seed: int = 0) -> dict:
  """``count`` transitions of ``cartpole_action`` on gymnasium CartPole-v1 (500-step limit),
  as TensorForce arrays: ``states [M, 4]``, ``actions``, ``rewards``, ``terminals`` (2 at the
  time limit) and ``next_states``."""
  import gymnasium as gym
  env = gym.make("CartPole-v1")
  states, actions, rewards, terminals, next_states = [], [], [], [], []
  state, _ = env.reset(seed=seed)
  episode = 0
  while len(states) < count:
    action = int(cartpole_action(state))
    following, reward, terminated, truncated, _ = env.step(action)
    states.append(state)
    actions.append(action)
    rewards.append(reward)
    terminals.append(1 if terminated else (2 if truncated else 0))
    next_states.append(following)
    state = following
    if terminated or truncated:
      episode += 1
      state, _ = env.reset(seed=seed + episode)
  env.close()
  return {"states": np.asarray(states, np.float32), "actions": np.asarray(actions, np.int64),
          "rewards": np.asarray(rewards, np.float32), "terminals": np.asarray(terminals),
          "next_states": np.asarray(next_states, np.float32)}


DEMONSTRATION_SOURCES = {"cartpole_controller": cartpole_controller}


def load_demonstrations(source: str, count: int) -> dict:
  """The demonstrations ``DQFDConfig.demonstrations`` names, as a dict of arrays (the
  plural TensorForce names ``batchrl.memories.transitions_from_observations`` takes)."""
  if source in DEMONSTRATION_SOURCES:
    return dict(DEMONSTRATION_SOURCES[source](count))
  try:
    with np.load(source, allow_pickle=False) as data:
      arrays = {name: np.asarray(data[name]) for name in data.files}
  except (OSError, ValueError) as e:
    raise ConfigError(f"dqfd.demonstrations: cannot read {source!r}: {e}") from None
  required = ("states", "actions", "rewards", "terminals")
  missing = [k for k in required if k not in arrays]
  if missing:
    raise ConfigError(f"dqfd.demonstrations {source!r} lacks the arrays {missing}; it needs "
                      f"{', '.join(required)} (next_states optional), has {sorted(arrays)}.")
  return arrays
