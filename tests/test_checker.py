"""check_env passes good environments and lists every problem of broken ones."""
import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from batchrl.envs import EnvCheckError, Environment, GymEnvironment, check_env


class GoodEnv(gym.Env):
  """A seeded random walk: the reference a broken env deviates from."""

  observation_space = spaces.Box(-10.0, 10.0, (2,), np.float32)
  action_space = spaces.Discrete(2)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.position = self.np_random.uniform(-1, 1, 2).astype(np.float32)
    self.t = 0
    return self.position.copy(), {}

  def step(self, action):
    self.t += 1
    noise = self.np_random.normal(0, 0.1, 2).astype(np.float32)
    self.position = np.clip(self.position + (1 if action else -1) * 0.1 + noise, -10, 10)
    return self.position.copy(), float(self.position[0]), False, self.t >= 5, {}


class WrongDtype(GoodEnv):
  def step(self, action):
    observation, *rest = super().step(action)
    return observation.astype(np.float64), *rest


class OldApi(GoodEnv):
  def step(self, action):
    observation, reward, terminated, truncated, info = super().step(action)
    return observation, reward, terminated or truncated, info


class NotSeeded(GoodEnv):
  def reset(self, *, seed=None, options=None):
    observation, info = super().reset(seed=seed)
    return observation + np.random.uniform(0, 1e-3, 2).astype(np.float32), info


class SeveralProblems(GoodEnv):
  def step(self, action):
    observation, _, _, truncated, info = super().step(action)
    return observation.astype(np.float64), np.nan, 0, truncated, info


class NoSeedKeyword(GoodEnv):
  def reset(self):
    return super().reset()


class Crashes(GoodEnv):
  def step(self, action):
    raise KeyError("boom")


class NoSpaces(gym.Env):
  def reset(self, *, seed=None, options=None):
    return 0, {}

  def step(self, action):
    return 0, 0.0, True, False, {}


@pytest.mark.parametrize("env", [GoodEnv(), gym.make("CartPole-v1"), gym.make("Pendulum-v1"),
                                 GymEnvironment("CartPole-v1")], ids=str)
def test_good_envs_pass(env):
  assert check_env(env) == []


@pytest.mark.parametrize("env_class,fragments", [
  (WrongDtype, ["step() observation has dtype float64", "expects float32",
                "np.asarray(x, dtype=np.float32)"]),
  (OldApi, ["step() returned a tuple of 4 values", "needs 5 values", "truncated"]),
  (NotSeeded, ["not deterministic", "differ after reset", "self.np_random"]),
  (NoSeedKeyword, ["reset() has no 'seed' or 'options' keyword", "def reset(self, *, seed=None"]),
  (Crashes, ["raised KeyError: 'boom'"]),
  (NoSpaces, ["observation_space is None", "action_space is None"]),
])
def test_broken_envs_are_explained(env_class, fragments):
  with pytest.raises(EnvCheckError) as info:
    check_env(env_class())
  for fragment in fragments:
    assert fragment in str(info.value)


def test_every_problem_is_listed():
  with pytest.raises(EnvCheckError) as info:
    check_env(SeveralProblems())
  problems = info.value.problems
  assert any("dtype float64" in p for p in problems)
  assert any("step() reward is not finite" in p for p in problems)
  assert any("step() terminated is 0 of type int; return a bool" in p for p in problems)
  assert f"found {len(problems)} problem(s) with SeveralProblems" in str(info.value)


def test_warn_mode_returns_problems():
  with pytest.warns(UserWarning, match="dtype float64"):
    problems = check_env(WrongDtype(), warn=True)
  assert problems and all(isinstance(p, str) for p in problems)


def test_unsupported_space_and_non_env():
  env = GoodEnv()
  env.observation_space = spaces.Text(4)
  with pytest.raises(EnvCheckError, match="observation_space: .*supported spaces"):
    check_env(env)
  with pytest.raises(EnvCheckError, match="neither a gymnasium.Env"):
    check_env(object())


class Walk(Environment):
  def __init__(self, arity=3, seeded=True):
    super().__init__(states=dict(type="float", shape=(1,)), actions=dict(type="int", num_values=2))
    self.arity, self.seeded = arity, seeded

  def reset(self, seed=None):
    self.rng = np.random.default_rng(seed if self.seeded else None)
    self.t = 0
    return self.rng.normal(size=1).astype(np.float32)

  def execute(self, actions):
    self.t += 1
    result = (self.rng.normal(size=1).astype(np.float32), self.t >= 4, 1.0)
    return result[:self.arity]


def test_tensorforce_environments():
  assert check_env(Walk()) == []
  with pytest.raises(EnvCheckError, match="must return \\(state, terminal, reward\\)"):
    check_env(Walk(arity=2))
  with pytest.raises(EnvCheckError, match="not deterministic"):
    check_env(Walk(seeded=False))


def test_tensorforce_environment_without_seed_is_checked_with_a_warning():
  class Legacy(Walk):
    def reset(self):
      return super().reset()

  with pytest.warns(UserWarning, match="takes no seed, so determinism was not checked"):
    assert check_env(Legacy(seeded=False)) == []


def test_the_report_is_a_list_that_prints_readably():
  report = check_env(gym.make("CartPole-v1"))
  assert report == [] and not report and len(report) == 0 and isinstance(report, list)
  assert str(report) == repr(report) == "check_env: no problems found with CartPole-v1"
  assert str(check_env(GoodEnv())) == "check_env: no problems found with GoodEnv"
  with pytest.warns(UserWarning):
    report = check_env(SeveralProblems(), warn=True)
  assert report and isinstance(report, list) and all(isinstance(p, str) for p in report)
  lines = repr(report).splitlines()
  assert lines[0] == f"check_env found {len(report)} problem(s) with SeveralProblems:"
  assert lines[1:] == [f"  {i}. {problem}" for i, problem in enumerate(report, 1)]
  assert list(report) == report and report + [] == list(report)  # list operations as before


def test_the_error_lists_what_the_report_prints():
  with pytest.raises(EnvCheckError) as info:
    check_env(SeveralProblems())
  assert str(info.value) == str(info.value.problems)
  assert str(info.value).startswith("check_env found")
