"""BatchEnv follows Gymnasium's auto-reset modes: step for step what SyncVectorEnv returns.

Each mode (NEXT_STEP, SAME_STEP, DISABLED), in-process and with worker processes (also with
this process stepping a group itself), is driven next to ``SyncVectorEnv(autoreset_mode=same)``
with the same seeds, actions and resets; observations, rewards, flags and infos (final
observations and infos, masks, dtypes) must be equal, also under Gymnasium's vector wrappers.
"""
import functools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.vector import NormalizeObservation, RecordEpisodeStatistics

from batchrl.envs.batch import BatchEnv, RestartPolicy
from batchrl.envs.ingraph import InGraphBatchEnv
from batchrl.envs.process import EnvError
from conftest import assert_same

try:
  from tests import mock_envs
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
  import mock_envs

CONTEXT = "forkserver"  # workers start in milliseconds; spawn is covered by test_batch_env.py
MODES = list(AutoresetMode)
# (num_workers, step_in_parent): in-process, one worker, this process + one worker.
LAYOUTS = [(0, False), (1, False), (2, True)]
N = 3


class InfoEnv(gym.Env):
  """Episodes that end by termination (action 2, at random) or truncation (``limit`` steps),
  with infos of every kind Gymnasium batches: ints, floats, numpy scalars and arrays, strings,
  nested dicts, keys present on some steps only, and a reset info."""

  def __init__(self, limit: int = 4):
    self.limit = limit
    self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    self.action_space = gym.spaces.Discrete(3)
    self.t = 0

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.t = 0
    return self._obs(), {"start": float(self.np_random.random()), "options": str(options)}

  def step(self, action):
    self.t += 1
    terminated = bool(action == 2 and self.np_random.random() < 0.5)
    info = {"t": self.t, "x": np.float32(self.t / 2), "done": terminated}
    if self.t % 2:
      info.update(vec=np.arange(2) * self.t, name=f"step{self.t}", nested={"a": 1.5 * self.t})
    return self._obs(), float(action) - 0.5, terminated, self.t >= self.limit, info

  def _obs(self):
    return self.np_random.normal(size=3).astype(np.float32)


def cartpoles():
  return [functools.partial(gym.make, "CartPole-v1", max_episode_steps=20)] * N


def info_envs():
  return [functools.partial(InfoEnv, limit) for limit in (3, 4, 6)]


def dict_obs_envs():  # observations not in shared memory: they travel pickled
  return [functools.partial(mock_envs.DictObsEnv, duration) for duration in (2, 3, 5)]


ENVS = {"CartPole-v1, 20 steps": (cartpoles, 2), "InfoEnv": (info_envs, 3),
        "DictObsEnv": (dict_obs_envs, 2)}


def drive(env, mode, num_actions, steps=90, seed=0):
  """The results of a fixed script: seeded reset, random actions, resets as the mode needs
  (DISABLED: every ended env, through reset_mask) plus a seeded partial reset every 17 steps."""
  rng = np.random.default_rng(seed)
  history = [env.reset(seed=[seed * 10 + i for i in range(N)])]
  ended = np.zeros(N, bool)
  for t in range(steps):
    mask = ended.copy() if mode == AutoresetMode.DISABLED else np.zeros(N, bool)
    if t % 17 == 16:
      mask[t % N] = True
    if mask.any():
      history.append(env.reset(seed=[1000 + t + i for i in range(N)],
                               options={"reset_mask": mask, "note": t}))
    result = env.step(rng.integers(0, num_actions, N))
    ended = result[2] | result[3]
    history.append(result)
  return history


def batch_env(make, mode, layout, **kwargs):
  num_workers, step_in_parent = layout
  return BatchEnv(make(), num_workers=num_workers, step_in_parent=step_in_parent,
                  context=CONTEXT, autoreset_mode=mode, **kwargs)


@pytest.mark.parametrize("layout", LAYOUTS, ids=["in-process", "1 worker", "parent+worker"])
@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
@pytest.mark.parametrize("env_name", list(ENVS))
def test_batch_env_equals_sync_vector_env_step_for_step(env_name, mode, layout):
  make, num_actions = ENVS[env_name]
  reference = SyncVectorEnv(make(), autoreset_mode=mode)
  with batch_env(make, mode, layout) as env:
    assert env.metadata["autoreset_mode"] is mode
    ours = drive(env, mode, num_actions)
  theirs = drive(reference, mode, num_actions)
  reference.close()
  assert_same(ours, theirs)
  flags = np.array([result[2:4] for result in theirs if len(result) == 5])
  assert flags[:, 0].any() and (flags[:, 1].any() or env_name == "DictObsEnv")  # both ways
  if mode == AutoresetMode.SAME_STEP:
    assert any("final_obs" in result[4] for result in theirs if len(result) == 5)


def _without_episode_time(history):
  """RecordEpisodeStatistics' ``episode["t"]`` is wall-clock time: not comparable."""
  for result in history:
    result[-1].get("episode", {}).pop("t", None)
  return history


@pytest.mark.parametrize("layout", LAYOUTS[:2], ids=["in-process", "1 worker"])
@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
def test_record_episode_statistics_sees_the_same_episodes(mode, layout):
  reference = RecordEpisodeStatistics(SyncVectorEnv(info_envs(), autoreset_mode=mode))
  with batch_env(info_envs, mode, layout) as env:
    ours = _without_episode_time(drive(RecordEpisodeStatistics(env), mode, 3))
  theirs = _without_episode_time(drive(reference, mode, 3))
  reference.close()
  assert_same(ours, theirs)
  assert any("episode" in result[4] for result in theirs if len(result) == 5)


def test_normalize_observation_needs_next_step_and_matches_sync_vector_env():
  mode = AutoresetMode.NEXT_STEP
  with batch_env(cartpoles, mode, (2, False)) as env:
    wrapped = NormalizeObservation(env)
    ours = [wrapped.reset(seed=[0, 1, 2])] + [wrapped.step(np.array([0, 1, 1]) if t % 3 else
                                                           np.array([1, 0, 1]))
                                              for t in range(40)]
  reference = NormalizeObservation(SyncVectorEnv(cartpoles(), autoreset_mode=mode))
  theirs = [reference.reset(seed=[0, 1, 2])] + [reference.step(np.array([0, 1, 1]) if t % 3
                                                               else np.array([1, 0, 1]))
                                                for t in range(40)]
  reference.close()
  assert_same(ours, theirs)
  # Gymnasium's own check reads our metadata (an AssertionError before 1.4, then ValueError)
  with BatchEnv(cartpoles()) as same_step, pytest.raises((AssertionError, ValueError)):
    NormalizeObservation(same_step)


def test_default_mode_is_same_step_and_names_are_accepted():
  with BatchEnv([mock_envs.DurationEnv]) as env:
    assert env.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert env.autoreset_mode is AutoresetMode.SAME_STEP
  for name in ("NEXT_STEP", "NextStep"):
    with BatchEnv([mock_envs.DurationEnv], autoreset_mode=name) as env:
      assert env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
  with BatchEnv.from_id("CartPole-v1", 2, autoreset_mode="Disabled") as env:
    assert env.metadata["autoreset_mode"] is AutoresetMode.DISABLED


@pytest.mark.parametrize("mode", ["next_step", "SameSteps", 1, None])
def test_a_bad_mode_names_the_valid_ones(mode):
  with pytest.raises(ValueError, match="autoreset_mode must be one of") as info:
    BatchEnv([mock_envs.DurationEnv], autoreset_mode=mode)
  for name in ("NEXT_STEP", "SameStep", "DISABLED"):
    assert name in str(info.value)


@pytest.mark.parametrize("layout", [(0, False), (2, True)], ids=["in-process", "parent+worker"])
def test_disabled_refuses_to_step_an_ended_env_until_reset_mask_resets_it(layout):
  make = functools.partial(mock_envs.DurationEnv, duration=2)
  with BatchEnv([make] * 3, num_workers=layout[0], step_in_parent=layout[1], context=CONTEXT,
                autoreset_mode="DISABLED") as env:
    env.reset()
    env.step(np.zeros(3, np.int64))
    obs, _, terminated, _, infos = env.step(np.zeros(3, np.int64))
    assert terminated.all() and "final_obs" not in infos
    np.testing.assert_array_equal(obs[:, 0], [2, 2, 2])  # the last observation, no reset
    with pytest.raises(EnvError, match=r"DISABLED: environments \[0, 1, 2\].*reset_mask"):
      env.step(np.zeros(3, np.int64))
    obs, _ = env.reset(options={"reset_mask": np.array([True, False, False])})
    np.testing.assert_array_equal(obs[:, 0], [0, 2, 2])
    with pytest.raises(EnvError, match=r"environments \[1, 2\]"):
      env.step(np.zeros(3, np.int64))
    env.reset(indices=[1, 2])
    obs = env.step(np.zeros(3, np.int64))[0]
    np.testing.assert_array_equal(obs[:, 0], [1, 1, 1])


def test_reset_mask_is_checked_and_popped_like_gymnasium():
  with BatchEnv([mock_envs.DurationEnv] * 2) as env:
    env.reset()
    options = {"reset_mask": np.array([False, True]), "other": 1}
    env.reset(options=options)
    assert options == {"other": 1}  # SyncVectorEnv pops it too; wrappers above rely on that
    for bad in (np.array([True]), np.array([0, 1]), np.array([False, False]), [True, True]):
      with pytest.raises(ValueError, match="reset_mask"):
        env.reset(options={"reset_mask": bad})
    with pytest.raises(ValueError, match="not both"):
      env.reset(indices=[0], options={"reset_mask": np.array([True, False])})


@pytest.mark.parametrize("layout", [(0, False), (1, False)], ids=["in-process", "1 worker"])
def test_next_step_resets_a_restarted_env_on_its_next_step(layout):
  """A restart ends the episode as truncated; NEXT_STEP then owes that env its reset step."""
  make = functools.partial(mock_envs.FlakyEnv, duration=100, fail_at=3)
  with BatchEnv([make, mock_envs.DurationEnv], num_workers=layout[0], context=CONTEXT,
                restart=RestartPolicy(max_restarts=1), autoreset_mode="NEXT_STEP") as env:
    env.reset(seed=0)
    actions = np.zeros(2, np.int64)
    env.step(actions)
    env.step(actions)
    _, rewards, terminated, truncated, infos = env.step(actions)  # env 0 fails: restarted
    assert truncated[0] and not terminated[0] and rewards[0] == 0 and infos["env_restarted"][0]
    obs, rewards, terminated, truncated, _ = env.step(actions)  # its reset step
    assert rewards[0] == 0 and not (terminated[0] or truncated[0]) and obs[0, 0] == 0
    assert obs[1, 0] == 0  # env 1 (duration 3) ended at step 3: its reset step too
    obs = env.step(actions)[0]
    np.testing.assert_array_equal(obs[:, 0], [1, 1])


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED])
def test_in_graph_batch_env_refuses_a_mode_other_than_same_step(mode):
  env = BatchEnv(cartpoles(), num_workers=0, autoreset_mode=mode)
  try:
    with pytest.raises(ValueError, match=f"autoreset_mode=SAME_STEP.*got {mode.name}"):
      InGraphBatchEnv(env)
  finally:
    env.close()
  same = BatchEnv(cartpoles(), num_workers=0)
  try:
    assert InGraphBatchEnv(same).num_envs == N
  finally:
    same.close()


@pytest.mark.parametrize("layout", LAYOUTS, ids=["in-process", "1 worker", "parent+worker"])
def test_infos_false_drops_the_envs_infos_and_keeps_the_final_observations(layout):
  """``BatchEnv(infos=False)`` (what training's in-graph env uses): the same observations,
  rewards and flags, and final observations where episodes ended; none of the envs' keys."""
  make, num_actions = ENVS["InfoEnv"]
  mode = AutoresetMode.SAME_STEP
  with batch_env(make, mode, layout) as env:
    full = drive(env, mode, num_actions)
  with batch_env(make, mode, layout, infos=False) as env:
    lean = drive(env, mode, num_actions)
  ended = 0
  for ours, theirs in zip(lean, full):
    assert_same(ours[:-1], theirs[:-1])
    infos, theirs_infos = ours[-1], theirs[-1]
    if "_final_obs" in theirs_infos:
      ended += 1
      np.testing.assert_array_equal(infos["_final_obs"], theirs_infos["_final_obs"])
      for got, want in zip(infos["final_obs"], theirs_infos["final_obs"]):
        assert (got is None) == (want is None)
        if want is not None:
          np.testing.assert_array_equal(got, want)
      assert infos["final_info"] == {}
    assert set(infos) <= {"final_obs", "_final_obs", "final_info", "_final_info"}
  assert ended and any(set(r[-1]) - {"final_obs", "_final_obs", "final_info", "_final_info"}
                       for r in full)  # the envs do return infos of their own


def test_infos_must_be_a_bool():
  with pytest.raises(ValueError, match="infos must be True or False, got 'no'"):
    BatchEnv([lambda: gym.make("CartPole-v1")], infos="no")
