"""Small environments for the process and batch tests.

They live in an importable module so tests can name them; workers receive constructors
by value (cloudpickle), so envs defined elsewhere work too (see tests/test_constructors.py).
"""
from __future__ import annotations

import os
import signal
import time

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class DurationEnv(gym.Env):
  """Episodes of exactly ``duration`` steps.

  Observation: [steps taken in this episode, duration]. Reward: the duration, so results
  can be traced back to their env. Info: {"t": steps taken} on every step.
  """

  def __init__(self, duration: int = 3):
    self.duration = duration
    self.observation_space = gym.spaces.Box(0.0, 1e6, (2,), np.float32)
    self.action_space = gym.spaces.Discrete(2)
    self.t = 0
    self.steps_total = 0  # over all episodes, for `call`/attribute tests

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.t = 0
    return self._obs(), {}

  def step(self, action):
    self.t += 1
    self.steps_total += 1
    return self._obs(), float(self.duration), self.t >= self.duration, False, {"t": self.t}

  def _obs(self):
    return np.array([self.t, self.duration], np.float32)

  def add(self, x, y=0):
    return self.steps_total + x + y


class FlakyEnv(DurationEnv):
  """Raises RuntimeError on the ``fail_at``-th step of each instance (counted over episodes)."""

  def __init__(self, duration: int = 100, fail_at: int = 5):
    super().__init__(duration)
    self.fail_at = fail_at

  def step(self, action):
    if self.steps_total + 1 == self.fail_at:
      raise RuntimeError(f"flaky env fails on step {self.fail_at}")
    return super().step(action)


class ExitEnv(DurationEnv):
  """Ends its whole process with ``os._exit(code)`` on step ``at`` (a hard crash)."""

  def __init__(self, at: int = 2, code: int = 3):
    super().__init__(100)
    self.at, self.code = at, code

  def step(self, action):
    if self.steps_total + 1 == self.at:
      os._exit(self.code)
    return super().step(action)


class SegfaultEnv(DurationEnv):
  """Kills its process with SIGSEGV on step ``at``."""

  def __init__(self, at: int = 1):
    super().__init__(100)
    self.at = at

  def step(self, action):
    if self.steps_total + 1 == self.at:
      os.kill(os.getpid(), signal.SIGSEGV)
    return super().step(action)


class HangEnv(DurationEnv):
  """Sleeps ``seconds`` on step ``at`` (a hang, as far as a short timeout can tell)."""

  def __init__(self, at: int = 1, seconds: float = 1000.0):
    super().__init__(100)
    self.at, self.seconds = at, seconds

  def step(self, action):
    if self.steps_total + 1 == self.at:
      time.sleep(self.seconds)
    return super().step(action)


class DictObsEnv(gym.Env):
  """A Dict observation space (not in shared memory: travels pickled), random walk."""

  def __init__(self, duration: int = 4):
    self.duration = duration
    self.observation_space = gym.spaces.Dict({
        "pos": gym.spaces.Box(-100.0, 100.0, (2,), np.float64),
        "t": gym.spaces.Discrete(100)})
    self.action_space = gym.spaces.Discrete(2)
    self.t, self.pos = 0, np.zeros(2)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.t, self.pos = 0, self.np_random.normal(size=2)
    return self._obs(), {}

  def step(self, action):
    self.t += 1
    self.pos = self.pos + self.np_random.normal(size=2) + action
    return self._obs(), float(self.pos[0]), self.t >= self.duration, False, {}

  def _obs(self):
    return {"pos": self.pos.copy(), "t": self.t}


class MaskedChoiceEnv(gym.Env):
  """Pick one of 4 arms; arm 3 pays most but is allowed only on odd steps (``action_mask``).

  Taking a masked arm raises, so any masked action reaching the env fails the test. The best
  policy takes arm 3 when allowed and arm 2 otherwise: return 0.5 * duration * (3 + 2) / 3.
  """

  def __init__(self, duration: int = 10):
    self.duration = duration
    self.observation_space = gym.spaces.Dict({
        "obs": gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
        "action_mask": gym.spaces.MultiBinary(4)})
    self.action_space = gym.spaces.Discrete(4)
    self.t = 0

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.t = 0
    return self._obs(), {}

  def step(self, action):
    if not self._mask()[int(action)]:
      raise AssertionError(f"masked action {action} taken at step {self.t}")
    self.t += 1
    return self._obs(), float(action) / 3.0, self.t >= self.duration, False, {}

  def _mask(self):
    return np.array([True, True, True, self.t % 2 == 1])

  def _obs(self):
    return {"obs": np.array([self.t % 2], np.float32), "action_mask": self._mask()}


gym.register("MaskedChoice-v0", entry_point=MaskedChoiceEnv)


def failing_constructor():
  raise ValueError("bad constructor: this env cannot be built")


def alive(pid: int) -> bool:
  """Whether process ``pid`` still runs (a zombie answers kill(0) but has ended)."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().split(")")[-1].split()[0] != "Z"
  except FileNotFoundError:
    return False


# Env-runner faults for the Ray tests (each runner is a process; they read these names from
# the environment Ray was started with).
HANG_FLAG = "BATCHRL_TEST_HANG_FLAG"  # a file: the step that finds it removes it and hangs
RAISE_FLAG = "BATCHRL_TEST_RAISE_FLAG"  # a file: the step that finds it removes it and raises
_process_steps = [0]


class FaultyPendulum(PendulumEnv):
  """Pendulum-v1 that hangs once when ``HANG_FLAG``'s file exists, raises once when
  ``RAISE_FLAG``'s does, and kills its whole process after ``crash_after`` steps of that
  process (if given)."""

  def __init__(self, crash_after: int | None = None, **kwargs):
    super().__init__(**kwargs)
    self.crash_after = crash_after

  def step(self, action):
    _process_steps[0] += 1
    if self.crash_after is not None and _process_steps[0] > self.crash_after:
      os._exit(3)
    if _take_flag(RAISE_FLAG):
      raise RuntimeError("FaultyPendulum: planted failure")
    if _take_flag(HANG_FLAG):
      time.sleep(3600)
    return super().step(action)


def _take_flag(name: str) -> bool:
  """Whether the file named by environment variable ``name`` existed (it is removed)."""
  path = os.environ.get(name)
  try:
    os.remove(path) if path else None
  except FileNotFoundError:
    return False
  return bool(path)


gym.register("FaultyPendulum-v0", entry_point=FaultyPendulum, max_episode_steps=200)
gym.register("CrashingPendulum-v0", entry_point=FaultyPendulum, max_episode_steps=200,
             kwargs={"crash_after": 3000})
