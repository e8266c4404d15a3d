# examples/corridor.py: an env of one's own, registered on import (docs/your-own-env.md)
import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
  """Walk right to the end of a corridor of ``length`` cells; every step costs a little."""

  observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
  action_space = gym.spaces.Discrete(2)  # 0: left, 1: right

  def __init__(self, length: int = 8):
    self.length = length

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.cell = 0
    return np.array([0.0], np.float32), {}

  def step(self, action):
    self.cell = max(0, self.cell + (1 if action == 1 else -1))
    done = self.cell == self.length - 1
    observation = np.array([self.cell / (self.length - 1)], np.float32)
    return observation, 1.0 if done else -0.01, done, False, {}


# the episode limit that configs such as ppo_discrete take as theirs
gym.register("Corridor-v0", entry_point=Corridor, max_episode_steps=100)
