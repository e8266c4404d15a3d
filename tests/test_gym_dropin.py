"""BatchEnv.drop_in is Gymnasium's vector env: the same code, run against Gymnasium's
SyncVectorEnv / AsyncVectorEnv and against BatchEnv (in-process, 1 and 2 workers), gets the
same observations, rewards, flags, infos, seeds, attributes and exceptions (issue #52).

Gymnasium's own results are computed once per module where its envs cannot be reused (an
AsyncVectorEnv whose env raised is broken) and compared with each BatchEnv layout.
"""
import functools
import inspect
import multiprocessing
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from batchrl.envs.batch import BatchEnv
from batchrl.envs.process import EnvWorkerError, EnvWorkerTimeout
from conftest import assert_same as assert_equal

# a drop-in gives the same types too (a tuple, not a list; 2, not np.int64(2))
assert_same = functools.partial(assert_equal, exact_types=True)

CONTEXT = "forkserver"  # workers start in milliseconds; spawn is covered by test_batch_env.py
WORKERS = [0, 1, 2]


class Boom(ValueError):
  """An env's own exception, with an attribute of its own."""

  def __init__(self, message, code=7):
    super().__init__(message)
    self.code = code


class PlainEnv(gym.Env):
  """Observations are Python ints (in Discrete(size)); episodes of ``length`` steps; actions
  are not checked (action 4 of a Discrete(4) space is taken) and action 3 raises ``Boom``."""

  metadata = {"render_modes": ["ansi"], "render_fps": 7}  # its own: Gymnasium writes into it

  def __init__(self, length: int = 2, size: int = 5):
    self.length = length
    self.observation_space = gym.spaces.Discrete(size)
    self.action_space = gym.spaces.Discrete(4)
    self.t, self.last_action = 0, None

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.t = 0
    return 0, {"draw": int(self.np_random.integers(1000))}

  def step(self, action):
    if action == 3:
      raise Boom("action 3 is not allowed", code=int(self.t))
    self.t += 1
    self.last_action = action
    return self.t, 1.0, self.t >= self.length, False, {"a": int(action)}


class BoxEnv(PlainEnv):
  """Box observations whose bounds depend on ``high`` (same shape and dtype)."""

  def __init__(self, high: float = 1.0):
    super().__init__(length=3)
    self.high = high
    self.observation_space = gym.spaces.Box(-high, high, (2,), np.float32)

  def reset(self, *, seed=None, options=None):
    _, info = super().reset(seed=seed)
    return np.full(2, self.high / 2, np.float32), info

  def step(self, action):
    _, reward, terminated, truncated, info = super().step(action)
    return np.full(2, self.t / 10, np.float32), reward, terminated, truncated, info


def cartpole():
  return gym.make("CartPole-v1", render_mode="rgb_array", max_episode_steps=12)


def ours(fns, num_workers, **kwargs):
  return BatchEnv.drop_in(fns, num_workers=num_workers, context=CONTEXT, **kwargs)


@pytest.fixture(scope="module", params=WORKERS, ids=[f"{w} workers" for w in WORKERS])
def cartpoles(request):
  """(BatchEnv.drop_in, SyncVectorEnv) over the same two CartPoles, NEXT_STEP by default."""
  env = ours([cartpole] * 2, request.param)
  reference = SyncVectorEnv([cartpole] * 2)
  yield env, reference
  env.close()
  reference.close()


def rollout(env, steps=30):
  """Seeded reset and a fixed action script; everything the env returns."""
  history = [env.reset(seed=5), env.np_random_seed]
  for t in range(steps):
    history.append(env.step(np.array([t % 2, (t // 3) % 2])))
  return history


def test_drop_in_takes_the_arguments_and_defaults_of_both_gymnasium_classes():
  mine = inspect.signature(BatchEnv.drop_in).parameters
  for cls in (AsyncVectorEnv, SyncVectorEnv):
    theirs = list(inspect.signature(cls.__init__).parameters.values())[1:]  # without self
    for parameter in theirs:
      assert parameter.name in mine and mine[parameter.name].default == parameter.default
  positional = list(inspect.signature(AsyncVectorEnv.__init__).parameters)[1:]
  assert list(mine)[:len(positional)] == positional  # in AsyncVectorEnv's order


def test_batchrl_behaviours_are_options_and_bad_values_are_named():
  with pytest.raises(ValueError, match="worker= replaces AsyncVectorEnv's own worker"):
    BatchEnv.drop_in([PlainEnv], worker=lambda *args: None)
  with pytest.raises(ValueError, match="seeding must be one of"):
    BatchEnv([PlainEnv], seeding="gym")
  with pytest.raises(ValueError, match="check_actions must be True or False"):
    BatchEnv([PlainEnv], check_actions="no")
  with BatchEnv([PlainEnv] * 2, seed=3) as own, BatchEnv.drop_in([PlainEnv] * 2,
                                                                 num_workers=0) as dropped:
    assert own.autoreset_mode is AutoresetMode.SAME_STEP  # what batchrl's trainers build
    own.reset(seed=3)
    dropped.reset(seed=3)
    assert dropped.np_random_seed == (3, 4) and own.np_random_seed != (3, 4)


# -- 1, 2: set_attr, get_attr and call through gym.make's wrappers -------------------------


def test_get_attr_and_call_read_through_wrappers_as_gymnasium(cartpoles):
  env, reference = cartpoles
  for name in ("gravity", "render_mode", "spec"):
    assert_same(env.get_attr(name), reference.get_attr(name), name)
    assert_same(env.call(name), reference.call(name), name)
  assert env.get_attr("gravity") == (9.8, 9.8)
  assert_same(env.call("get_wrapper_attr", "length"), reference.call("get_wrapper_attr", "length"))


def test_set_attr_sets_through_wrappers_as_gymnasium(cartpoles):
  env, reference = cartpoles
  for vector in (env, reference):
    vector.set_attr("gravity", [9.0, 10.0])
    vector.set_attr("note", "same for all")  # not an attribute yet: set on the outer wrapper
  assert_same(env.get_attr("gravity"), reference.get_attr("gravity"))
  assert env.get_attr("gravity") == (9.0, 10.0)
  assert_same(env.get_attr("note"), reference.get_attr("note"))
  for vector in (env, reference):
    with pytest.raises(ValueError, match="Values must be a list or tuple with length"):
      vector.set_attr("gravity", [1.0])
    vector.set_attr("gravity", 9.8)


# -- 3, 5, 8: metadata, render mode, seeds, the default auto-reset mode ---------------------


def test_metadata_render_mode_and_default_autoreset_mode_are_gymnasiums(cartpoles):
  env, reference = cartpoles
  assert env.render_mode == reference.render_mode == "rgb_array"
  # (Gymnasium writes autoreset_mode into the env class's own metadata dict: compared apart)
  assert {k: v for k, v in env.metadata.items() if k != "autoreset_mode"} == {
      k: v for k, v in reference.metadata.items() if k != "autoreset_mode"}
  assert env.metadata["render_fps"] == 50
  assert env.metadata["autoreset_mode"] is env.autoreset_mode is reference.autoreset_mode
  assert env.autoreset_mode is AutoresetMode.NEXT_STEP


def test_seeds_and_steps_are_gymnasiums(cartpoles):
  env, reference = cartpoles
  ours_history, theirs = rollout(env), rollout(reference)
  assert_same(ours_history, theirs)
  assert env.np_random_seed == (5, 6)
  assert any(result[2].any() or result[3].any() for result in theirs[2:])  # auto-resets ran


# -- 9: final observations are the env's own objects ---------------------------------------


@pytest.mark.parametrize("num_workers", WORKERS)
def test_same_step_final_obs_are_the_envs_own_objects(num_workers):
  fns = [functools.partial(PlainEnv, 2), functools.partial(PlainEnv, 3)]
  mode = AutoresetMode.SAME_STEP
  reference = SyncVectorEnv(fns, autoreset_mode=mode)
  with ours(fns, num_workers, autoreset_mode=mode) as env:
    results = [(vector.reset(seed=0), [vector.step(np.array([0, 1])) for _ in range(4)])
               for vector in (env, reference)]
  reference.close()
  assert_same(*results)
  finals = results[0][1][1][4]["final_obs"]
  assert type(finals[0]) is int and finals[0] == 2  # not np.int64(2)


# -- 6: actions are passed on, as Gymnasium does --------------------------------------------


@pytest.mark.parametrize("num_workers", WORKERS)
def test_actions_are_passed_on_unchecked_as_gymnasium(num_workers):
  fns = [PlainEnv] * 2
  reference = SyncVectorEnv(fns)
  results = []
  with ours(fns, num_workers) as env:
    for vector in (env, reference):
      vector.reset(seed=0)
      taken = []  # what the envs got: values and types (a list's ints, numpy scalars)
      for actions in ([4, 1], np.array([2.0, 1.0]), np.array([0, 1]), np.array([1, 0])):
        vector.step(actions)  # 4 is outside Discrete(4): taken; floats: as the env takes them
        taken.append(vector.get_attr("last_action"))
      results.append(taken)
      with pytest.raises(TypeError):
        vector.step(0)  # a scalar where a batch is due
      with pytest.raises(ValueError):
        vector.step(np.zeros(3, np.int64))  # the wrong number of actions
  reference.close()
  assert_same(*results)
  assert results[0][0] == (4, 1)
  with BatchEnv(fns, num_workers=num_workers, context=CONTEXT) as checked:  # BatchEnv's own
    checked.reset()
    with pytest.raises(ValueError, match=r"\[0, 3\]"):
      checked.step([4, 1])


# -- 7: exceptions keep their classes ------------------------------------------------------


@pytest.fixture(scope="module")
def gymnasium_errors():
  """What AsyncVectorEnv raises: an env's exception, and any use after close."""
  reference = AsyncVectorEnv([PlainEnv] * 2, context=CONTEXT)
  reference.reset(seed=0)
  out = {}
  with pytest.raises(Exception) as info, warnings.catch_warnings():
    warnings.simplefilter("ignore")  # AsyncVectorEnv logs the worker's error as warnings
    reference.step(np.array([0, 3]))
  out["env"] = info.value
  reference.close(terminate=True)
  with pytest.raises(Exception) as info:
    reference.step(np.array([0, 0]))
  out["closed"] = info.value
  with pytest.raises(Exception) as info:
    reference.reset()
  out["closed reset"] = info.value
  return out


@pytest.mark.parametrize("num_workers", WORKERS)
def test_an_envs_exception_keeps_its_class_and_closed_is_gymnasiums(num_workers,
                                                                  gymnasium_errors):
  with ours([PlainEnv] * 2, num_workers) as env:
    env.reset(seed=0)
    with pytest.raises(Boom) as info:
      env.step(np.array([0, 3]))
    assert type(gymnasium_errors["env"]) is Boom
    error = info.value
    assert isinstance(error, EnvWorkerError) and error.index == 1  # BatchEnv's own, too
    assert error.code == 0 and "action 3 is not allowed" in str(error)
    assert "test_gym_dropin.py" in error.traceback and "raise Boom" in str(error)
    with pytest.raises(Boom):  # SyncVectorEnv: the env's exception itself
      SyncVectorEnv([PlainEnv]).step(np.array([3]))
  for action, key in ((lambda: env.step(np.array([0, 0])), "closed"),
                      (env.reset, "closed reset")):
    with pytest.raises(ClosedEnvironmentError):
      action()
    assert isinstance(gymnasium_errors[key], ClosedEnvironmentError)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_mismatched_spaces_raise_what_both_gymnasium_classes_raise(num_workers):
  fns = [PlainEnv, functools.partial(PlainEnv, size=6)]  # Discrete(5) and Discrete(6)
  with pytest.raises(AssertionError):
    SyncVectorEnv(fns)
  with pytest.raises(AssertionError, match="share their spaces") as info:  # however split
    ours(fns, num_workers)
  assert isinstance(info.value, RuntimeError)  # what AsyncVectorEnv raises (test below)


def test_async_vector_env_raises_runtime_error_for_mismatched_spaces():
  """What the test above holds BatchEnv to (an AsyncVectorEnv of one worker per env)."""
  with pytest.raises(RuntimeError):
    AsyncVectorEnv([PlainEnv, functools.partial(PlainEnv, size=6)], context=CONTEXT)


# -- 4: observation modes ------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", WORKERS)
def test_observation_modes_are_gymnasiums(num_workers):
  fns = [functools.partial(BoxEnv, high) for high in (1.0, 2.0)]
  with pytest.raises(AssertionError):
    SyncVectorEnv(fns)  # 'same' is the default
  with pytest.raises(AssertionError, match="observation_mode='different'"):
    ours(fns, num_workers)
  custom = (gym.spaces.Box(-5, 5, (2, 2), np.float32), gym.spaces.Box(-5, 5, (2,), np.float32))
  for mode in ("different", custom):
    reference = SyncVectorEnv(fns, observation_mode=mode)
    with ours(fns, num_workers, observation_mode=mode) as env:
      assert env.observation_space == reference.observation_space
      assert env.single_observation_space == reference.single_observation_space
      results = [(vector.reset(seed=1), vector.step(np.array([0, 1])))
                 for vector in (env, reference)]
    reference.close()
    assert_same(*results)
  with pytest.raises(ValueError, match="Invalid `observation_mode`"):
    SyncVectorEnv(fns, observation_mode="differing")
  with pytest.raises(ValueError, match="Invalid `observation_mode`"):
    ours(fns, num_workers, observation_mode="differing")


# -- 10: the split-phase API ---------------------------------------------------------------


def split_phase(env):
  """reset_async/reset_wait, step_async/step_wait, call_async/call_wait and their errors;
  what each returned."""
  out = []
  with pytest.raises(NoAsyncCallError):
    env.step_wait()
  env.reset_async(seed=3)
  with pytest.raises(AlreadyPendingCallError):
    env.step_async(np.array([0, 1]))
  with pytest.raises(NoAsyncCallError):
    env.step_wait()
  out.append(env.reset_wait(timeout=10))
  for t in range(5):
    env.step_async(np.array([0, t % 3]))
    with pytest.raises(AlreadyPendingCallError):
      env.reset_async()
    out.append(env.step_wait(timeout=10))
  env.call_async("get_wrapper_attr", "last_action")
  for busy in (lambda: env.set_attr("t", 0), lambda: env.call("t"), env.reset_async):
    with pytest.raises(AlreadyPendingCallError):
      busy()
  with pytest.raises(NoAsyncCallError):
    env.step_wait()
  out.append(env.call_wait(timeout=10))
  return out


@pytest.fixture(scope="module")
def gymnasium_split_phase():
  reference = AsyncVectorEnv([PlainEnv] * 2, context=CONTEXT)
  try:
    return split_phase(reference)
  finally:
    reference.close()


@pytest.mark.parametrize("num_workers", WORKERS)
def test_split_phase_api_is_gymnasiums(num_workers, gymnasium_split_phase):
  with ours([PlainEnv] * 2, num_workers) as env:
    assert_same(split_phase(env), gymnasium_split_phase)
    env.step_async(np.array([0, 0]))
  with pytest.raises(ClosedEnvironmentError):  # closed with a step pending: dropped
    env.step_wait()


class SlowEnv(PlainEnv):
  def step(self, action):
    if action == 2:
      time.sleep(2.0)
    return super().step(action)


def test_a_wait_past_its_timeout_is_multiprocessings_timeout_error():
  """As AsyncVectorEnv's ``step_wait(timeout)``; here the silent worker is then ended (see
  docs/environments.md), and a restart policy would replace it."""
  env = ours([SlowEnv] * 2, 1)
  env.reset()
  env.step_async(np.array([0, 2]))
  with pytest.raises(multiprocessing.TimeoutError) as info:
    env.step_wait(timeout=0.2)
  assert isinstance(info.value, EnvWorkerTimeout) and info.value.index == 1
  assert env.closed
