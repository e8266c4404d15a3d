"""Wrapper semantics on hand-written mock envs with fixed episode durations."""
import copy
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from batchrl.envs.wrappers import (
  ActionRepeat,
  AutoReset,
  CacheSpaces,
  ClipAction,
  ConvertTo32Bit,
  FrameDelta,
  FrameHistory,
  Guard,
  GuardError,
  GuardWarning,
  LimitDuration,
  RandomStart,
  RangeNormalize,
  batch_ppo_stack,
)

DURATIONS = (1, 2, 3, 4)


class CounterEnv(gym.Env):
  """Observation = steps taken this episode; reward 1 per step; terminates after ``duration``.

  Records every action and counts resets, so tests can see what reached the env.
  """

  def __init__(self, duration=3, obs_shape=(2,), action_space=None, obs_space=None,
               dtype=np.float32):
    self.duration = duration
    self.dtype = dtype
    self.observation_space = obs_space or spaces.Box(-np.inf, np.inf, obs_shape, dtype)
    self.action_space = action_space or spaces.Box(-1.0, 1.0, (1,), np.float32)
    self.actions, self.resets, self.t = [], 0, None
    self.custom_attribute = "forwarded"

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.t, self.resets = 0, self.resets + 1
    return self._obs(), {"reset": True}

  def step(self, action):
    self.actions.append(copy.deepcopy(action))
    self.t += 1
    return self._obs(), 1.0, self.t >= self.duration, False, {"t": self.t}

  def _obs(self):
    return np.full(self.observation_space.shape, self.t, self.dtype)


def run(env, steps, action=None):
  action = np.zeros(1, np.float32) if action is None else action
  return [env.step(action) for _ in range(steps)]


def test_unknown_attributes_are_forwarded_through_every_wrapper():
  env = batch_ppo_stack(AutoReset(CounterEnv()), max_length=5)
  assert env.custom_attribute == "forwarded"
  assert env.duration == 3
  with pytest.raises(AttributeError, match="no attribute 'missing'"):
    env.missing
  copy.deepcopy(env)  # dunder probes must not recurse through the forwarding


@pytest.mark.parametrize("duration", DURATIONS)
def test_auto_reset_done_pattern(duration):
  inner = CounterEnv(duration)
  env = AutoReset(inner)
  env.reset(seed=0)
  results = run(env, 3 * (duration + 1))
  dones = [terminated or truncated for _, _, terminated, truncated, _ in results]
  expected = ([False] * (duration - 1) + [True] + [False]) * 3
  assert dones == expected
  for index in range(duration, len(results), duration + 1):  # the step after each done
    observation, reward, terminated, truncated, info = results[index]
    assert np.all(observation == 0) and reward == 0.0 and info == {}
    assert terminated is False and truncated is False
  assert inner.resets == 4
  assert len(inner.actions) == 3 * duration  # reset steps ignore their action


def test_auto_reset_step_before_reset_resets():
  inner = CounterEnv(2)
  observation, reward, terminated, truncated, info = AutoReset(inner).step(np.zeros(1))
  assert inner.resets == 1 and reward == 0.0 and info == {} and not inner.actions


@pytest.mark.parametrize("duration", DURATIONS)
def test_action_repeat_sums_rewards_and_stops_at_done(duration):
  inner = CounterEnv(duration)
  env = ActionRepeat(inner, 3)
  env.reset()
  observation, reward, terminated, _, info = env.step(np.zeros(1))
  assert reward == min(3, duration) and len(inner.actions) == min(3, duration)
  assert terminated == (duration <= 3) and info == {"t": min(3, duration)}
  with pytest.raises(ValueError, match="amount must be an int >= 1"):
    ActionRepeat(inner, 0)


def test_random_start_is_seeded_and_bounded():
  starts, actions = [], []
  for _ in range(2):
    inner = CounterEnv(duration=100)
    env = RandomStart(inner, max_steps=10)
    starts.append([int(env.reset(seed=s)[0][0]) for s in range(6)])
    actions.append(inner.actions)
  assert starts[0] == starts[1] and all(0 <= n <= 10 for n in starts[0])
  assert len(set(starts[0])) > 1
  np.testing.assert_array_equal(np.array(actions[0]), np.array(actions[1]))
  with pytest.raises(ValueError, match="max_steps must be an int >= 0"):
    RandomStart(inner, -1)


@pytest.mark.parametrize("duration", DURATIONS)
def test_random_start_resets_again_when_the_episode_ends(duration):
  inner = CounterEnv(duration)
  env = RandomStart(inner, max_steps=20)
  for seed in range(5):
    observation, _ = env.reset(seed=seed)
    assert observation[0] < duration  # never hands out a finished episode
    assert inner.t == observation[0]


def test_frame_history_offsets_and_flatten():
  env = FrameHistory(CounterEnv(duration=10, obs_shape=(2,)), past_indices=[0, 1, 3])
  assert env.observation_space.shape == (3, 2)
  observation, _ = env.reset()
  assert observation.shape == (3, 2) and np.all(observation == 0)
  frames = [env.step(np.zeros(1))[0][:, 0].tolist() for _ in range(5)]
  assert frames == [[1, 0, 0], [2, 1, 0], [3, 2, 0], [4, 3, 1], [5, 4, 2]]
  flat = FrameHistory(CounterEnv(duration=10, obs_shape=(2,)), [0, 2], flatten=True)
  assert flat.observation_space.shape == (4,)
  flat.reset()
  assert flat.step(np.zeros(1))[0].tolist() == [1, 1, 0, 0]


def test_frame_history_rejects_bad_indices():
  with pytest.raises(ValueError, match="must include 0"):
    FrameHistory(CounterEnv(), [1, 2])
  with pytest.raises(ValueError, match="ints >= 0"):
    FrameHistory(CounterEnv(), [0, -1])
  with pytest.raises(TypeError, match="needs a Box observation space"):
    FrameHistory(CounterEnv(obs_space=spaces.Discrete(3)), [0])


def test_frame_delta():
  bounded = spaces.Box(0.0, 10.0, (2,), np.float32)
  env = FrameDelta(CounterEnv(duration=5, obs_space=bounded))
  np.testing.assert_array_equal(env.observation_space.low, [-10, -10])
  np.testing.assert_array_equal(env.observation_space.high, [10, 10])
  assert np.all(env.reset()[0] == 0)
  observation = env.step(np.zeros(1))[0]
  assert np.all(env.step(np.zeros(1))[0] == 1) and np.all(observation == 1)
  with pytest.raises(RuntimeError, match="before reset"):
    FrameDelta(CounterEnv()).step(np.zeros(1))


def test_range_normalize_observations_and_actions():
  f32max = np.finfo(np.float32).max
  observation_space = spaces.Box(np.array([0, -np.inf, -f32max], np.float32),
                                 np.array([10, np.inf, f32max], np.float32))
  inner = CounterEnv(duration=10, obs_space=observation_space,
                     action_space=spaces.Box(0.0, 4.0, (2,), np.float32))
  env = RangeNormalize(inner)
  np.testing.assert_array_equal(env.observation_space.low, [-1, -np.inf, -f32max])
  np.testing.assert_array_equal(env.action_space.high, [1, 1])
  assert env.reset()[0].tolist() == [-1.0, 0.0, 0.0]
  observation = env.step(np.array([-1.0, 1.0], np.float32))[0]
  assert observation.tolist() == pytest.approx([-0.8, 1.0, 1.0])
  env.step(np.array([0.0, 0.5], np.float32))
  np.testing.assert_allclose(inner.actions, [[0.0, 4.0], [2.0, 3.0]])
  assert inner.actions[0].dtype == np.float32


def test_range_normalize_settings():
  half_open = spaces.Box(np.array([0, 0], np.float32), np.array([1, np.inf], np.float32))
  with pytest.raises(ValueError, match=r"unbounded at \[\[1\]\]"):
    RangeNormalize(CounterEnv(obs_space=half_open), observ=True)
  off = RangeNormalize(CounterEnv(obs_space=half_open), observ=False, action=False)
  assert off.observation_space == half_open and off.reset()[0].tolist() == [0, 0]
  discrete = CounterEnv(action_space=spaces.Discrete(3))
  assert RangeNormalize(discrete).action_space == spaces.Discrete(3)
  with pytest.raises(TypeError, match="needs a float Box action space"):
    RangeNormalize(discrete, action=True)


def test_clip_action():
  inner = CounterEnv(action_space=spaces.Box(-2.0, 2.0, (2,), np.float32))
  env = ClipAction(inner)
  assert np.all(np.isinf(env.action_space.high)) and np.all(np.isinf(env.action_space.low))
  env.reset()
  env.step(np.array([5.0, -0.5]))
  np.testing.assert_array_equal(inner.actions[0], [2.0, -0.5])
  with pytest.raises(TypeError, match="needs a Box action space"):
    ClipAction(CounterEnv(action_space=spaces.Discrete(2)))


def test_clip_action_can_advertise_the_real_bounds_and_still_clips():
  inner = CounterEnv(action_space=spaces.Box(-2.0, 2.0, (2,), np.float32))
  env = ClipAction(inner, advertise_bounds=True)
  assert env.action_space == inner.action_space
  env.reset()
  env.step(np.array([5.0, -0.5]))
  np.testing.assert_array_equal(inner.actions[0], [2.0, -0.5])


@pytest.mark.parametrize("duration", DURATIONS)
def test_limit_duration_truncates_and_keeps_termination(duration):
  env = LimitDuration(CounterEnv(duration), 2)
  env.reset()
  results = run(env, min(duration, 2))
  flags = [(terminated, truncated) for _, _, terminated, truncated, _ in results]
  if duration == 1:
    assert flags == [(True, False)]
  elif duration == 2:
    assert flags == [(False, False), (True, False)]  # a true end is not a truncation
  else:
    assert flags == [(False, False), (False, True)]
  with pytest.raises(RuntimeError, match="after the episode ended"):
    env.step(np.zeros(1))


def test_limit_duration_requires_reset():
  with pytest.raises(RuntimeError, match="step\\(\\) before reset\\(\\)"):
    LimitDuration(CounterEnv(), 3).step(np.zeros(1))
  with pytest.raises(ValueError, match="duration must be an int >= 1"):
    LimitDuration(CounterEnv(), 0)


def test_convert_to_32_bit():
  env = ConvertTo32Bit(CounterEnv(duration=5, dtype=np.float64))
  assert env.observation_space.dtype == np.float32
  assert np.isinf(env.observation_space.high).all()  # unbounded stays unbounded
  assert env.reset()[0].dtype == np.float32
  observation, reward, *_ = env.step(np.zeros(1))
  assert observation.dtype == np.float32 and type(reward) is np.float32
  ints = ConvertTo32Bit(CounterEnv(dtype=np.int64))
  assert ints.observation_space.dtype == np.int32 and ints.reset()[0].dtype == np.int32
  nested = ConvertTo32Bit(CounterEnv(obs_space=spaces.Box(0, 1, (2,), np.float64),
                                     action_space=spaces.MultiDiscrete([2, 3])))
  assert nested.observation_space.dtype == np.float32


def test_convert_to_32_bit_refuses_non_finite_values():
  class Broken(CounterEnv):
    def step(self, action):
      observation, *rest = super().step(action)
      return np.full(2, np.nan), *rest

  env = ConvertTo32Bit(Broken(dtype=np.float64))
  env.reset()
  with pytest.raises(ValueError, match="step\\(\\) observation is not finite"):
    env.step(np.zeros(1))

  class BadReward(CounterEnv):
    def step(self, action):
      observation, _, *rest = super().step(action)
      return observation, float("inf"), *rest

  env = ConvertTo32Bit(BadReward())
  env.reset()
  with pytest.raises(ValueError, match="step\\(\\) reward is not finite"):
    env.step(np.zeros(1))


class ValueEnv(gym.Env):
  """Returns the observations and rewards it is given, one per step."""

  def __init__(self, observations, rewards, dtype):
    self.observation_space = spaces.Box(-np.inf, np.inf, np.shape(observations[0]), dtype)
    self.action_space = spaces.Discrete(2)
    self.observations, self.rewards, self.t = observations, rewards, 0

  def reset(self, *, seed=None, options=None):
    self.t = 0
    return np.asarray(self.observations[0], self.observation_space.dtype), {}

  def step(self, action):
    self.t += 1
    obs = np.asarray(self.observations[self.t], self.observation_space.dtype)
    return obs, self.rewards[self.t - 1], False, False, {}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_convert_to_32_bit_short_path_gives_the_general_paths_values_without_warnings(dtype):
  big = 1e20 if dtype == np.float32 else 3e38  # squares overflow float32 / at float32's edge
  observations = [[0.5, -1.25], [big, -big], [1e-30, 0.0], [-3.0, 7.0]]
  rewards = [1.0, np.float64(2.5), np.int64(3)]
  env = ConvertTo32Bit(ValueEnv(observations, rewards, dtype))
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # no overflow warning from the finiteness test
    first, _ = env.reset()
    steps = [env.step(0) for _ in rewards]
  np.testing.assert_array_equal(first, np.float32([0.5, -1.25]))
  for (obs, reward, *_), expected, expected_reward in zip(steps, observations[1:], rewards):
    assert obs.dtype == np.float32 and type(reward) is np.float32
    np.testing.assert_array_equal(obs, np.asarray(expected, dtype).astype(np.float32))
    assert reward == np.float32(expected_reward)


@pytest.mark.parametrize("value, dtype", [(np.nan, np.float32), (np.inf, np.float32),
                                          (1e39, np.float64), (-np.inf, np.float64)])
def test_convert_to_32_bit_refuses_what_does_not_fit_float32(value, dtype):
  env = ConvertTo32Bit(ValueEnv([[0.0, 0.0], [1.0, value]], [1.0], dtype))
  env.reset()
  with pytest.raises(ValueError, match=r"step\(\) observation is not finite"):
    env.step(0)
  env = ConvertTo32Bit(ValueEnv([[0.0, 0.0], [1.0, 1.0]], [1e39], np.float32))
  env.reset()
  with pytest.raises(ValueError, match=r"step\(\) reward is not finite"):
    env.step(0)


def test_cache_spaces_reads_spaces_once():
  inner = CounterEnv()
  env = CacheSpaces(inner)
  inner.observation_space = spaces.Discrete(2)
  assert isinstance(env.observation_space, spaces.Box)
  assert env.action_space == spaces.Box(-1.0, 1.0, (1,), np.float32)


GUARD_CASES = [
  (spaces.Box(-1.0, 1.0, (2,), np.float32), np.zeros(3), "shape (3,); Box"),
  (spaces.Box(-1.0, 1.0, (2,), np.float32), np.array([0.0, 1.5]), "action[1] = 1.5 is outside"),
  (spaces.Box(-1.0, 1.0, (2,), np.float32), np.array([np.nan, 0.0]), "contains NaN"),
  (spaces.Box(-1.0, 1.0, (2,), np.float32), np.array([True, False]), "expects numbers"),
  (spaces.Discrete(3), 3, "action = 3 is outside Discrete(3)"),
  (spaces.Discrete(3), 1.0, "dtype float64; Discrete(3) expects integers"),
  (spaces.Discrete(3), np.array([1, 2]), "shape (2,)"),
  (spaces.MultiDiscrete([2, 3]), np.array([1, 3]), "action[1] = 3 is outside"),
  (spaces.MultiBinary(3), np.array([0, 2, 1]), "0 or 1"),
  (spaces.Dict({"a": spaces.Discrete(2)}), {"b": 0}, "lacks key 'a'"),
]


@pytest.mark.parametrize("space,action,fragment", GUARD_CASES)
def test_guard_refuses_bad_actions_before_the_env_sees_them(space, action, fragment):
  inner = CounterEnv(action_space=space)
  env = Guard(inner)
  env.reset()
  with pytest.raises(GuardError) as info:
    env.step(action)
  assert fragment in str(info.value)
  assert inner.actions == []


def test_guard_accepts_good_actions():
  for space, action in [(spaces.Box(-1, 1, (2,)), [0.5, -0.5]), (spaces.Discrete(3), 2),
                        (spaces.MultiDiscrete([2, 3]), np.array([1, 2])),
                        (spaces.MultiBinary(2), np.array([True, False]))]:
    env = Guard(CounterEnv(action_space=space))
    env.reset()
    env.step(action)


class NanEnv(CounterEnv):
  def step(self, action):
    observation, reward, *rest = super().step(action)
    observation[1] = np.nan
    return observation, reward, *rest


def test_guard_catches_nan_observations_and_warn_mode_passes_through():
  env = Guard(NanEnv())
  env.reset()
  with pytest.raises(GuardError, match=r"step\(\) observation is not finite \(nan\) at index"):
    env.step(np.zeros(1, np.float32))
  warn = Guard(NanEnv(), mode="warn")
  warn.reset()
  with pytest.warns(GuardWarning, match="not finite"):
    observation = warn.step(np.zeros(1, np.float32))[0]
  assert np.isnan(observation[1])
  lenient = Guard(CounterEnv(), mode="warn")
  lenient.reset()
  with pytest.warns(GuardWarning, match="outside"):
    lenient.step(np.full(1, 3.0, np.float32))
  assert lenient.actions == [np.full(1, 3.0, np.float32)]
  with pytest.raises(ValueError, match="did you mean 'warn'"):
    Guard(CounterEnv(), mode="wran")


def test_batch_ppo_stack_pendulum():
  env = batch_ppo_stack("Pendulum-v1", max_length=4)
  names = []
  layer = env
  while isinstance(layer, gym.Wrapper):
    names.append(type(layer).__name__)
    layer = layer.env
  assert names[:5] == ["CacheSpaces", "ConvertTo32Bit", "ClipAction", "RangeNormalize",
                       "LimitDuration"]
  assert env.observation_space == spaces.Box(-1.0, 1.0, (3,), np.float32)
  # the real (normalized) bounds, which DDPG, TD3 and SAC need; without RangeNormalize the
  # env's own torque range
  assert env.action_space == spaces.Box(-1.0, 1.0, (1,), np.float32)
  raw = batch_ppo_stack("Pendulum-v1", max_length=4, normalize_ranges=False)
  assert raw.action_space == spaces.Box(-2.0, 2.0, (1,), np.float32)
  env.reset(seed=0)
  results = run(env, 4, action=np.array([0.3], np.float32))
  assert [truncated for *_, truncated, _ in results] == [False, False, False, True]
  assert all(obs.dtype == np.float32 and type(reward) is np.float32
             for obs, reward, *_ in results)


def test_batch_ppo_stack_cartpole_without_normalization():
  env = batch_ppo_stack(gym.make("CartPole-v1"), max_length=500, normalize_ranges=False)
  layers = []
  layer = env
  while isinstance(layer, gym.Wrapper):
    layers.append(type(layer).__name__)
    layer = layer.env
  assert "RangeNormalize" not in layers and "ClipAction" not in layers
  assert env.action_space == spaces.Discrete(2)
