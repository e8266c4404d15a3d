"""The TensorForce Environment interface, its Gymnasium adapter, make(), and light imports."""
import pathlib
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import batchrl.envs as envs
from batchrl.envs import Environment, GymEnvironment, make, make_gym
from batchrl.specs import SpecError


def test_cartpole_adapter_specs_and_episode():
  env = make("CartPole-v1", seed=0)
  assert env.actions == dict(type="int", shape=(), num_values=2)
  assert env.states["type"] == "float" and env.states["shape"] == (4,)
  state = env.reset()
  assert env.observation_space.contains(state)
  terminal, steps = False, 0
  while not terminal:
    state, terminal, reward = env.execute(1)  # always pushing right falls over quickly
    steps += 1
    assert isinstance(terminal, bool) and isinstance(reward, float)
  assert steps < 100
  assert env.last_terminated and not env.last_truncated
  assert isinstance(env.last_info, dict)
  env.close()


def test_pendulum_truncation_is_kept_apart_from_termination():
  env = GymEnvironment("Pendulum-v1", seed=1, max_episode_steps=3)
  assert env.actions == dict(type="float", shape=(1,), min_value=-2.0, max_value=2.0)
  env.reset()
  outcomes = [env.execute(np.array([0.5], np.float32))[1] for _ in range(3)]
  assert outcomes == [False, False, True]
  assert env.last_truncated and not env.last_terminated


def test_seed_makes_first_reset_reproducible():
  first = [GymEnvironment("CartPole-v1", seed=7).reset() for _ in range(2)]
  np.testing.assert_array_equal(first[0], first[1])
  env = GymEnvironment("CartPole-v1")
  np.testing.assert_array_equal(env.reset(seed=7), first[0])


def test_execute_before_reset_after_end_and_after_close_raise():
  env = make("CartPole-v1")
  with pytest.raises(RuntimeError, match="before the first reset"):
    env.execute(0)
  env.reset(seed=0)
  terminal = False
  while not terminal:
    _, terminal, _ = env.execute(0)
  with pytest.raises(RuntimeError, match="after the episode ended; call reset"):
    env.execute(0)
  env.close()
  env.close()  # closing twice is harmless
  with pytest.raises(RuntimeError, match="after close"):
    env.execute(0)
  with pytest.raises(RuntimeError, match="after close"):
    env.reset()


def test_make_unknown_id_suggests_closest():
  with pytest.raises(ValueError, match="'CartPole-v1'") as info:
    make("CartPol-v1")
  assert "unknown environment id 'CartPol-v1'" in str(info.value)
  with pytest.raises(ValueError, match="closest registered ids"):
    make_gym("Pendulum-v9")
  with pytest.raises(ValueError, match="no registered id is close"):
    make_gym("zzzzzzzzzzzzzzzz")


def test_make_wraps_instances_and_rejects_bad_arguments():
  raw = make_gym("CartPole-v1")
  assert isinstance(raw, gym.Env)
  assert make(raw).env is raw
  with pytest.raises(TypeError, match="only apply when building from an id"):
    make(raw, max_episode_steps=3)
  with pytest.raises(TypeError, match="gymnasium.Env or a registered id"):
    GymEnvironment(42)


class Corridor(Environment):
  """Walk right to the end; a minimal custom environment as the docs describe."""

  def __init__(self, length=3):
    super().__init__(states=dict(type="float", shape=(1,)), actions=dict(type="int", num_values=2))
    self.length = length

  def reset(self, seed=None):
    self.position = 0
    return np.zeros(1, np.float32)

  def execute(self, actions):
    self.position += 1 if actions == 1 else 0
    terminal = self.position >= self.length
    return np.full(1, self.position, np.float32), terminal, float(terminal)


def test_custom_environment():
  with Corridor() as env:
    assert env.observation_space == spaces.Box(-np.inf, np.inf, (1,), np.float32)
    assert env.action_space == spaces.Discrete(2)
    env.reset()
    results = [env.execute(1) for _ in range(3)]
  assert [terminal for _, terminal, _ in results] == [False, False, True]


def test_environment_spec_errors():
  class NoSpecs(Environment):
    def reset(self, seed=None):
      return 0

    def execute(self, actions):
      return 0, True, 0.0

  with pytest.raises(AttributeError, match="has no states spec: pass states="):
    NoSpecs().states
  with pytest.raises(SpecError, match="did you mean 'num_values'"):
    NoSpecs(actions=dict(type="int", num_value=2))
  env = NoSpecs()
  env.actions = dict(type="bool")  # assigning later is validated the same way
  assert env.action_space.shape == ()

  class Incomplete(Environment):
    def reset(self, seed=None):
      return 0

  with pytest.raises(TypeError, match="execute"):
    Incomplete()


def test_importing_envs_does_not_import_jax():
  code = "import sys, batchrl.envs; assert 'jax' not in sys.modules, 'jax imported'"
  root = pathlib.Path(__file__).resolve().parents[1]
  subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


def test_lazy_attributes(monkeypatch):
  assert {"BatchEnv", "ExternalProcess", "InGraphBatchEnv"} <= set(dir(envs))
  monkeypatch.setitem(envs._LAZY, "JSONDecoder", "json")
  import json
  assert envs.JSONDecoder is json.JSONDecoder
  monkeypatch.delitem(vars(envs), "JSONDecoder")
  with pytest.raises(AttributeError, match="did you mean 'check_env'"):
    envs.check_envs
