"""BatchEnv: done patterns, auto-reset, seeding, workers == in-process, restarts, clean-up."""
import functools
import glob
import multiprocessing
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from batchrl.envs.batch import BatchEnv, RestartPolicy
from batchrl.envs.process import (
  EnvClosedError,
  EnvError,
  EnvWorkerDied,
  EnvWorkerError,
  EnvWorkerTimeout,
)

try:
  from tests import mock_envs
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
  import mock_envs


# Workers forked from a server that has gymnasium loaded start in milliseconds; spawn (the
# default) is covered by test_close_leaves_no_process_and_no_shared_memory, test_process.py
# and test_constructors.py.
CONTEXT = "forkserver"


def durations(*ds):
  return [functools.partial(mock_envs.DurationEnv, duration=d) for d in ds]




@pytest.fixture(scope="module")
def duration_batch():
  """One BatchEnv with 2 workers over envs of durations 1..4, shared by the tests below."""
  env = BatchEnv(durations(1, 2, 3, 4), num_workers=2, context=CONTEXT)
  yield env
  env.close()


@pytest.mark.parametrize("mode", ["in-process", "workers", "parent and a worker"])
def test_done_pattern_with_automatic_and_forced_resets(mode, duration_batch):
  if mode == "workers":
    env = duration_batch
  else:
    env = BatchEnv(durations(1, 2, 3, 4), num_workers=2 * (mode != "in-process"),
                   step_in_parent=mode != "in-process", context=CONTEXT)
  obs, infos = env.reset()
  np.testing.assert_array_equal(obs, [[0, 1], [0, 2], [0, 3], [0, 4]])
  actions = np.zeros(4, np.int64)
  for t in range(1, 13):
    obs, rewards, terminated, truncated, infos = env.step(actions)
    ds = np.array([1, 2, 3, 4])
    expected_done = t % ds == 0
    np.testing.assert_array_equal(terminated, expected_done)
    assert not truncated.any()
    np.testing.assert_array_equal(rewards, ds)
    np.testing.assert_array_equal(obs[:, 0], np.where(expected_done, 0, t % ds))  # auto-reset
    np.testing.assert_array_equal(infos["_final_obs"], expected_done)
    # As SyncVectorEnv: an object array [N] of the last observations, None where none ended.
    finals = infos["final_obs"]
    assert finals.dtype == object and all(finals[i] is None for i in np.flatnonzero(~expected_done))
    np.testing.assert_array_equal([finals[i][0] for i in np.flatnonzero(expected_done)],
                                  ds[expected_done])
    np.testing.assert_array_equal(infos["final_info"]["t"][expected_done], ds[expected_done])
    # Envs that just reset return their (empty) reset info, the others their step info.
    np.testing.assert_array_equal(infos.get("_t", np.zeros(4, bool)), ~expected_done)
  # Forced reset of env 3 only (mid-episode: t=12 -> after reset at 0).
  env.step(actions)  # t=13: env 3 at step 1 of its episode
  obs, _ = env.reset(indices=[3])
  assert obs[3, 0] == 0 and obs[2, 0] == 1  # env 2 (duration 3) keeps its observation
  terminated = np.array([env.step(actions)[2][3] for _ in range(4)])
  np.testing.assert_array_equal(terminated, [False, False, False, True])
  if mode != "workers":
    assert len(env.worker_pids) == (1 if mode == "parent and a worker" else 0)
    env.close()


def _rollout(env_id, num_workers, seed, steps, **kwargs):
  env = BatchEnv.from_id(env_id, num_envs=4, num_workers=num_workers, seed=seed, context=CONTEXT,
                         **kwargs)
  rng = np.random.default_rng(123)
  space = env.single_action_space
  out = [env.reset()[0]]
  for _ in range(steps):
    if isinstance(space, gym.spaces.Discrete):
      action = rng.integers(0, space.n, size=4)
    else:
      action = rng.uniform(space.low, space.high, size=(4, *space.shape)).astype(space.dtype)
    obs, rewards, terminated, truncated, infos = env.step(action)
    final = np.zeros_like(obs)
    for i in np.flatnonzero(infos.get("_final_obs", [])):
      final[i] = infos["final_obs"][i]
    out += [obs, rewards, terminated, truncated, final]
  env.close()
  return out


@pytest.mark.parametrize("env_id, steps, step_in_parent", [
    ("CartPole-v1", 300, False), ("Pendulum-v1", 420, False), ("CartPole-v1", 300, True)])
def test_workers_match_in_process_exactly(env_id, steps, step_in_parent):
  local = _rollout(env_id, 0, seed=7, steps=steps)
  remote = _rollout(env_id, 2, seed=7, steps=steps, step_in_parent=step_in_parent)
  for a, b in zip(local, remote):
    np.testing.assert_array_equal(a, b)
  # Pendulum truncates at 200 steps; CartPole terminates: both auto-reset paths ran.
  assert any(np.any(x) for x in local[3::5] + local[4::5])


def test_same_seed_same_trajectory_and_distinct_env_seeds():
  a = _rollout("CartPole-v1", 0, seed=3, steps=50)
  b = _rollout("CartPole-v1", 0, seed=3, steps=50)
  c = _rollout("CartPole-v1", 0, seed=4, steps=50)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  assert not np.array_equal(a[0], c[0])
  first = a[0]
  assert len({tuple(row) for row in first.tolist()}) == 4  # each env got its own seed
  env = BatchEnv.from_id("CartPole-v1", num_envs=4)
  np.testing.assert_array_equal(env.reset(seed=3)[0], first)  # reset(seed) == constructor seed
  env.close()


def test_dict_observations_travel_pickled_and_match_in_process():
  def run(num_workers):
    env = BatchEnv([functools.partial(mock_envs.DictObsEnv, duration=d) for d in (2, 3, 4)],
                   num_workers=num_workers, context=CONTEXT, seed=11)
    obs, _ = env.reset()
    history = [obs]
    for _ in range(7):
      obs, rewards, terminated, _, infos = env.step(np.array([0, 1, 1]))
      history += [obs, rewards, terminated]
      if terminated.any():
        assert infos["final_obs"][np.flatnonzero(terminated)[0]]["t"] > 0
    env.close()
    return history
  for a, b in zip(run(0), run(2)):
    if isinstance(a, dict):
      for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    else:
      np.testing.assert_array_equal(a, b)


def test_close_leaves_no_process_and_no_shared_memory():
  before = set(glob.glob("/dev/shm/*"))
  env = BatchEnv(durations(1, 2, 3), num_workers=3)
  env.reset()
  pids = env.worker_pids
  assert len(pids) == 3 and all(mock_envs.alive(pid) for pid in pids)
  env.close()
  env.close()  # idempotent
  deadline = time.monotonic() + 10
  while any(mock_envs.alive(pid) for pid in pids) and time.monotonic() < deadline:
    time.sleep(0.05)
  assert not any(mock_envs.alive(pid) for pid in pids)
  assert not {p.pid for p in multiprocessing.active_children()} & set(pids)
  assert set(glob.glob("/dev/shm/*")) <= before
  with pytest.raises(EnvClosedError, match="closed"):
    env.step(np.zeros(3, np.int64))


def test_actions_are_validated_before_anything_is_sent(duration_batch):
  env = duration_batch
  env.reset()
  with pytest.raises(ValueError, match="for 4 environments"):
    env.step(np.zeros(3, np.int64))
  with pytest.raises(ValueError, match="for 4 environments"):
    env.step(0)
  with pytest.raises(ValueError, match=r"shape \(\)"):
    env.step(np.zeros((4, 2), np.int64))
  with pytest.raises(ValueError, match="dtype float64"):
    env.step(np.zeros(4))
  with pytest.raises(ValueError, match=r"\[0, 1\]"):
    env.step(np.array([0, 1, 2, 0]))
  box = BatchEnv.from_id("Pendulum-v1", num_envs=2)
  box.reset()
  with pytest.raises(ValueError, match=r"each action must have shape \(1,\)"):
    box.step(np.zeros((2, 3), np.float32))
  with pytest.raises(ValueError, match="dtype <U1"):
    box.step(np.array([["a"], ["b"]]))
  box.step(np.array([[5.0], [-5.0]]))  # out of bounds is fine: gymnasium envs clip
  box.close()


def test_step_before_reset_and_bad_arguments_are_errors():
  env = BatchEnv(durations(1, 2))
  with pytest.raises(EnvError, match="reset"):
    env.step(np.zeros(2, np.int64))
  with pytest.raises(ValueError, match="indices"):
    env.reset(indices=[5])
  env.close()
  with pytest.raises(ValueError, match="num_workers"):
    BatchEnv(durations(1, 2), num_workers=3)
  lock = threading.Lock()  # a constructor capturing a lock cannot travel to a worker
  with pytest.raises(TypeError, match=r"constructor of environment 1, .* cannot be sent .*lock"):
    BatchEnv([mock_envs.DurationEnv, lambda: lock and mock_envs.DurationEnv()], num_workers=1)
  with pytest.raises(ValueError, match="did you mean"):
    BatchEnv.from_id("Pendulum-v0", num_envs=2)
  with pytest.raises(ValueError, match="max_restarts"):
    RestartPolicy(max_restarts=-1)
  with pytest.raises(ValueError, match="did you mean 'max_restarts'"):
    RestartPolicy(max_restart=2)
  with pytest.raises(ValueError, match="share their spaces"):
    BatchEnv([mock_envs.DurationEnv, mock_envs.DictObsEnv])
  with pytest.raises(ValueError, match="step_in_parent must be True or False"):
    BatchEnv(durations(1, 2), num_workers=2, step_in_parent="yes")


def test_call_and_get_attr(duration_batch):
  assert duration_batch.get_attr("duration") == (1, 2, 3, 4)
  totals = duration_batch.get_attr("steps_total")
  assert duration_batch.call("add", 1, y=1) == tuple(t + 2 for t in totals)


def _flaky_batch(num_workers, max_restarts, step_in_parent=False):
  fns = [functools.partial(mock_envs.FlakyEnv, duration=100, fail_at=5)] + durations(100, 100, 100)
  return BatchEnv(fns, num_workers=num_workers, context=CONTEXT,
                  restart=RestartPolicy(max_restarts=max_restarts), step_in_parent=step_in_parent)


@pytest.mark.parametrize("num_workers, step_in_parent", [(0, False), (2, False), (2, True)])
def test_restart_policy_recreates_a_raising_env_and_marks_the_cut(num_workers, step_in_parent):
  env = _flaky_batch(num_workers, max_restarts=3, step_in_parent=step_in_parent)
  env.reset()
  for t in range(1, 9):
    obs, rewards, terminated, truncated, infos = env.step(np.zeros(4, np.int64))
    if t == 5:  # the flaky env raised: restarted, its episode reported as cut
      np.testing.assert_array_equal(truncated, [True, False, False, False])
      np.testing.assert_array_equal(infos["env_restarted"], [True, False, False, False])
      assert rewards[0] == 0.0 and obs[0, 0] == 0 and obs[1, 0] == 5
      assert "_final_obs" not in infos
    else:
      assert "env_restarted" not in infos and not truncated.any()
  np.testing.assert_array_equal(env.restarts, [1, 0, 0, 0])
  env.close()


@pytest.mark.parametrize("num_workers", [0, 1])
def test_restart_cap_exceeded_raises_the_original_error(num_workers):
  env = _flaky_batch(num_workers, max_restarts=1)
  env.reset()
  with pytest.raises(EnvWorkerError, match="flaky env fails") as info:
    for _ in range(12):  # fails on step 5 (restarted), and again on step 10 (cap reached)
      env.step(np.zeros(4, np.int64))
  assert info.value.index == 0
  assert any("max_restarts" in note for note in info.value.__notes__)
  with pytest.raises(EnvError, match="reset"):  # the lost step must not pass unnoticed
    env.step(np.zeros(4, np.int64))
  env.close()


def test_error_without_policy_names_env_and_carries_traceback():
  fns = durations(100, 100) + [functools.partial(mock_envs.FlakyEnv, duration=100, fail_at=2)]
  env = BatchEnv(fns, num_workers=1, context=CONTEXT)
  env.reset()
  env.step(np.zeros(3, np.int64))
  with pytest.raises(EnvWorkerError) as info:
    env.step(np.zeros(3, np.int64))
  assert info.value.index == 2 and "environment 2" in str(info.value)
  assert "FlakyEnv" not in info.value.exc_type and "def step" not in info.value.traceback
  assert "mock_envs.py" in info.value.traceback
  with pytest.raises(EnvError, match="reset"):
    env.step(np.zeros(3, np.int64))
  env.reset()  # the worker is alive: a reset makes the batch usable again
  with pytest.raises(EnvWorkerError, match="flaky"):  # (and the same env fails again)
    env.step(np.zeros(3, np.int64))
  env.close()


@pytest.mark.parametrize("step_in_parent", [False, True])
def test_dead_worker_is_restarted_with_all_its_envs(step_in_parent):
  fns = durations(100, 100) + [functools.partial(mock_envs.ExitEnv, at=3), *durations(100)]
  env = BatchEnv(fns, num_workers=2, context=CONTEXT, seed=0, restart=RestartPolicy(max_restarts=2),
                 step_in_parent=step_in_parent)
  env.reset()
  old = env.worker_pids
  for t in range(1, 5):
    obs, rewards, terminated, truncated, infos = env.step(np.zeros(4, np.int64))
    if t == 3:
      np.testing.assert_array_equal(truncated, [False, False, True, True])
      np.testing.assert_array_equal(infos["env_restarted"], [False, False, True, True])
      np.testing.assert_array_equal(obs[:, 0], [3, 3, 0, 0])
  if step_in_parent:  # envs 0 and 1 are stepped here; the one worker hosts 2 and 3
    assert len(old) == 1 and env.worker_pids != old
  else:
    assert env.worker_pids[0] == old[0] and env.worker_pids[1] != old[1]
  np.testing.assert_array_equal(env.restarts, [0, 0, 1, 1])
  env.close()


def test_dead_worker_without_policy_raises_died_and_closes():
  fns = durations(100) + [functools.partial(mock_envs.ExitEnv, at=2, code=7)]
  env = BatchEnv(fns, num_workers=2, context=CONTEXT)
  env.reset()
  env.step(np.zeros(2, np.int64))
  with pytest.raises(EnvWorkerDied) as info:
    env.step(np.zeros(2, np.int64))
  assert info.value.index == 1 and info.value.exitcode == 7
  assert "environment 1" in str(info.value)
  assert env.closed


def test_hung_worker_times_out_naming_the_env():
  fns = durations(100) + [functools.partial(mock_envs.HangEnv, at=2)]
  env = BatchEnv(fns, num_workers=2, context=CONTEXT, timeout=1.0)
  env.reset()
  env.step(np.zeros(2, np.int64))
  pids = env.worker_pids
  with pytest.raises(EnvWorkerTimeout) as info:
    env.step(np.zeros(2, np.int64))
  assert info.value.index == 1 and "environment 1" in str(info.value)
  assert env.closed and not mock_envs.alive(pids[1])


def test_hung_worker_is_replaced_under_a_policy():
  fns = durations(100) + [functools.partial(mock_envs.HangEnv, at=2)]
  env = BatchEnv(fns, num_workers=2, context=CONTEXT, timeout=1.0, restart=RestartPolicy())
  env.reset()
  env.step(np.zeros(2, np.int64))
  _, _, _, truncated, infos = env.step(np.zeros(2, np.int64))
  np.testing.assert_array_equal(truncated, [False, True])
  np.testing.assert_array_equal(env.restarts, [0, 1])
  env.close()


def test_constructor_error_in_worker_names_the_env():
  with pytest.raises(EnvWorkerError, match="bad constructor") as info:
    BatchEnv(durations(1, 2) + [mock_envs.failing_constructor], num_workers=2, context=CONTEXT)
  assert info.value.index == 2 and "failing_constructor" in info.value.traceback
