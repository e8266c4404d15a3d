"""``run.backend='envpool'`` (``batchrl.envs.pool``): EnvPool's step inside the compiled loop.

What is held: the compiled step gives exactly what EnvPool's own host API gives, with
same-step auto-reset; EnvPool's tasks have the dynamics of Gymnasium's of the same id,
transition by transition, and from a start both fix, observation by observation through
``BatchEnv`` (their seedings differ, so seeded starts do not match: the module doc says
so); the maps and spaces are those of the gymnasium backend's stack; bad
input is a one-line error; a run trains, resumes and evaluates.
"""
import dataclasses
import functools
import json
import sys

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

envpool = pytest.importorskip("envpool")
# EnvPool's spaces, and Gymnasium's envs stepped from a set state, warn: not this code's
pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered",
                                        "ignore:.*already returned terminated")

from batchrl import configs  # noqa: E402  (after the importorskip above)
from batchrl.cli import main  # noqa: E402  (after the importorskip above)
from batchrl.configs import RunConfig  # noqa: E402  (after the importorskip above)
from batchrl.envs import pool as pool_module  # noqa: E402  (after the importorskip above)
from batchrl.envs.batch import BatchEnv  # noqa: E402  (after the importorskip above)
from batchrl.envs.core import make_gym  # noqa: E402  (after the importorskip above)
from batchrl.envs.ingraph import InGraphBatchEnv  # noqa: E402  (after the importorskip above)
from batchrl.envs.pool import PoolEnv, make_pool  # noqa: E402  (after the importorskip above)
from batchrl.envs.wrappers import batch_ppo_stack  # noqa: E402  (after the importorskip above)
from batchrl.errors import UserInputError  # noqa: E402  (after the importorskip above)
from batchrl.train.build import agent_spaces, check_env  # noqa: E402  (after the importorskip above)
from batchrl.train.local import LocalTrainer  # noqa: E402  (after the importorskip above)


def _scan_steps(env: PoolEnv, actions):
  """``EnvStep``s of ``actions`` [T, B, ...] from a reset, in one compiled scan."""
  obs, state = env.reset(jax.random.key(0))

  def body(state, action):
    out = env.step(None, state, action)
    return out.state, (out.obs, out.reward, out.terminated, out.truncated, out.final_obs)

  _, steps = jax.jit(lambda s, a: jax.lax.scan(body, s, a))(state, actions)
  return jax.device_get(obs), jax.device_get(steps)


def _host_same_step(pool, actions):
  """EnvPool's own host API, turned into same-step auto-reset by hand: the reference."""
  first, _ = pool.reset()
  out = {k: [] for k in ("obs", "reward", "terminated", "truncated", "final_obs")}
  for action in actions:
    obs, reward, terminated, truncated, _ = pool.step(np.asarray(action))
    final = obs.copy()
    for i in np.flatnonzero(terminated | truncated):  # EnvPool resets on the next step
      pool.send(np.zeros((1,) + pool.action_space.shape, action.dtype), np.array([i], np.int32))
      obs[i] = pool.recv()[0][0]
    for key, value in zip(out, (obs, reward, terminated, truncated, final)):
      out[key].append(value)
  return first, {key: np.array(value) for key, value in out.items()}


def test_the_compiled_step_is_envpools_own_step_with_same_step_autoreset():
  actions = np.random.default_rng(1).uniform(-1, 1, (70, 2, 1)).astype(np.float32)
  env = PoolEnv(make_pool("Pendulum-v1", 2, seed=3, max_length=30), normalize_ranges=False)
  first, (obs, reward, terminated, truncated, final_obs) = _scan_steps(env, actions)
  ref_first, ref = _host_same_step(make_pool("Pendulum-v1", 2, seed=3, max_length=30),
                                   actions)
  np.testing.assert_array_equal(first, ref_first.astype(np.float32))
  # the episodes end at the limit (steps 30 and 60), reported as truncation
  assert np.flatnonzero(truncated[:, 0]).tolist() == [29, 59] and not terminated.any()
  np.testing.assert_array_equal(truncated, ref["truncated"])
  np.testing.assert_array_equal(reward, ref["reward"].astype(np.float32))
  np.testing.assert_array_equal(final_obs, ref["final_obs"].astype(np.float32))
  np.testing.assert_array_equal(obs, ref["obs"].astype(np.float32))
  # where an episode ended, the observation to act on is the next episode's first one
  assert np.abs(obs[29] - final_obs[29]).max() > 0
  np.testing.assert_array_equal(obs[28], final_obs[28])


def test_discrete_actions_and_terminations_step_as_on_the_host():
  actions = np.random.default_rng(2).integers(0, 2, (100, 3)).astype(np.int32)
  env = PoolEnv(make_pool("CartPole-v1", 3, seed=5), normalize_ranges=False)
  first, (obs, reward, terminated, truncated, final_obs) = _scan_steps(env, actions)
  ref_first, ref = _host_same_step(make_pool("CartPole-v1", 3, seed=5), actions)
  assert terminated.sum() >= 3  # random CartPole episodes end within a few dozen steps
  np.testing.assert_array_equal(first, ref_first)
  for got, key in zip((obs, reward, terminated, final_obs),
                      ("obs", "reward", "terminated", "final_obs")):
    np.testing.assert_array_equal(got, ref[key].astype(got.dtype), err_msg=key)


def test_the_spaces_and_maps_are_the_gymnasium_backends():
  for env_id in ("Pendulum-v1", "CartPole-v1", "HalfCheetah-v5"):
    for normalize in (True, False):
      run = RunConfig(env=env_id, backend="envpool", num_envs=1, normalize_ranges=normalize)
      host = batch_ppo_stack(make_gym(env_id), None, normalize)
      spaces = agent_spaces(run)
      assert spaces == (host.observation_space, host.action_space), (env_id, normalize)
  # Pendulum's torque: the agent's [-1, 1] reaches the env as [-2, 2], clipped beyond
  maps = PoolEnv(make_pool("Pendulum-v1", 1, 0))._maps
  np.testing.assert_allclose(maps.action(jnp.array([[-1.0], [0.5], [3.0]])),
                             [[-2.0], [1.0], [2.0]])


def _transition_gaps(env_id: str, set_state, compared=lambda expected: True,
                     steps: int = 1000) -> float:
  """The largest gap between EnvPool's next observation and Gymnasium's from the same state
  and action, over ``steps`` random transitions (episodes restarted as they end) whose
  ``expected`` next observation passes ``compared``."""
  rng = np.random.default_rng(0)
  pool = envpool.make(env_id, env_type="gymnasium", num_envs=1, seed=0)
  reference = gym.make(env_id).unwrapped
  reference.reset(seed=0)
  reference.action_space.seed(0)
  obs, _ = pool.reset()
  gap = 0.0
  for _ in range(steps):
    action = reference.action_space.sample() if isinstance(
        reference.action_space, gym.spaces.Box) else int(rng.integers(reference.action_space.n))
    set_state(reference, obs[0].astype(np.float64))
    expected = reference.step(action)[0]
    obs, _, terminated, truncated, _ = pool.step(np.asarray([action]))
    if terminated[0] or truncated[0]:
      obs, *_ = pool.step(np.asarray([action]))  # EnvPool's reset step
    elif compared(expected):
      gap = max(gap, float(np.abs(obs[0] - expected).max()))
  return gap


def _set_cartpole(env, obs):
  env.state = obs


def _set_pendulum(env, obs):
  env.state = np.array([np.arctan2(obs[1], obs[0]), obs[2]])


def _set_cheetah(env, obs):  # the x position is not observed; the physics does not use it
  env.set_state(np.concatenate([[0.0], obs[:8]]), obs[8:])


def _below_speed_limit(expected):
  return abs(expected[2]) < 8.0


@pytest.mark.parametrize("env_id,set_state,tolerance", [
    ("CartPole-v1", _set_cartpole, 1e-6), ("Pendulum-v1", _set_pendulum, 1e-5),
    ("HalfCheetah-v5", _set_cheetah, 1e-4)])
def test_envpool_tasks_have_gymnasiums_dynamics_transition_by_transition(env_id, set_state,
                                                                         tolerance):
  compared = _below_speed_limit if env_id == "Pendulum-v1" else (lambda expected: True)
  assert _transition_gaps(env_id, set_state, compared) < tolerance


def test_envpools_pendulum_moves_with_the_unclipped_speed_where_the_limit_binds():
  """A known difference (written in batchrl.envs.pool): where the speed limit of 8 binds,
  EnvPool's Pendulum-v1 moves the angle with the speed before clipping (as gym 0.21 did),
  Gymnasium's with the clipped one."""
  assert _transition_gaps("Pendulum-v1", _set_pendulum,
                          lambda expected: not _below_speed_limit(expected)) > 1e-3


def test_bad_input_is_one_clear_error(monkeypatch):
  with pytest.raises(UserInputError, match=r"no task 'HalfCheeta-v5'.*did you mean 'HalfCheetah"):
    make_pool("HalfCheeta-v5", 1, 0)
  with pytest.raises(UserInputError, match="flat Box observations.*with run.atari, ALE"):
    PoolEnv(make_pool("Pong-v5", 1, 0))  # EnvPool's id, without run.atari
  with pytest.raises(UserInputError, match="no task"):  # before any run directory exists
    check_env(RunConfig(env="HalfCheeta-v5", backend="envpool"))
  with pytest.raises(Exception, match="run.atari .*needs run.backend='gymnasium'"):
    RunConfig(env="BreakoutNoFrameskip-v4", backend="gymnax", atari=True)
  monkeypatch.setitem(sys.modules, "envpool", None)  # as if it were not installed
  with pytest.raises(UserInputError, match=r'pip install "batchrl\[envpool\]"'):
    pool_module.import_envpool()


@pytest.mark.slow
def test_a_run_on_envpool_trains_evaluates_and_resumes(tmp_path):
  overrides = ["backend=envpool", "num_envs=4", "steps=1600", "report_every=800",
               "eval_every=1600", "rollout_length=200", "update_epochs=1",
               "checkpoint_every=1600", "batch_size=null"]
  assert main(["train", "--config", "pendulum", "--logdir", str(tmp_path), "--timestamp", "P",
               *[arg for item in overrides for arg in ("--set", item)],
               "--no-tensorboard"]) == 0
  run_dir = tmp_path / "P-pendulum"
  lines = (run_dir / "metrics.jsonl").read_text().split("\n")
  evals = [json.loads(line) for line in lines if line and json.loads(line)["phase"] == "eval"]
  assert [r["step"] for r in evals] == [1600] and -2000 < evals[0]["mean_score"] < 0
  # the checkpoint resumes: the agent goes on from it, on a pool built anew
  resumed = LocalTrainer(configs.apply_overrides(configs.get("pendulum"), overrides),
                         run_dir)
  assert resumed.restore() and resumed.step == 1600
  saved = jax.device_get(resumed.sim.agent_state)
  assert np.isfinite(resumed.train_phase(1)["mean_score"])
  changed = jax.tree.leaves(jax.tree.map(lambda a, b: bool(np.any(a != b)), saved,
                                         jax.device_get(resumed.sim.agent_state)))
  assert any(changed)
  resumed.close()
  # the exported policy takes the raw env's observations and returns its actions: the run's
  # maps folded in (Pendulum: the speed over [-8, 8], the torque over [-2, 2])
  ort = pytest.importorskip("onnxruntime")
  from batchrl.export import model_policy
  from batchrl.export_run import export_run
  path, _ = export_run(run_dir, tmp_path / "policy.onnx")
  session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
  raw = np.array([[1.0, 0.0, 8.0], [0.0, -1.0, -4.0]], np.float32)
  exported = session.run(None, {session.get_inputs()[0].name: raw})[0]
  maps = PoolEnv(make_pool("Pendulum-v1", 1, 0))._maps
  model_act = model_policy(resumed.agent, saved, maps.observation_space).act
  expected = maps.action(model_act(maps.observation(jnp.asarray(raw))))
  np.testing.assert_allclose(exported, expected, atol=1e-5)


# -- Atari ------------------------------------------------------------------------------


def test_ale_ids_map_to_envpools_games_with_their_sticky_actions():
  assert pool_module.pool_task("BreakoutNoFrameskip-v4", atari=True) == (
      "Breakout-v5", {**pool_module.ATARI_OPTIONS, "repeat_action_probability": 0.0})
  task, options = pool_module.pool_task("ALE/SpaceInvaders-v5", atari=True)
  assert task == "SpaceInvaders-v5" and options["repeat_action_probability"] == 0.25
  assert pool_module.pool_task("HalfCheetah-v5", atari=False) == ("HalfCheetah-v5", {})
  for env_id in ("CartPole-v1", "Breakout-v4", "BreakoutDeterministic-v4"):
    with pytest.raises(UserInputError, match="takes an ALE id of the form"):
      pool_module.pool_task(env_id, atari=True)


@pytest.fixture(scope="module")
def breakout_steps():
  """200 random steps of 2 EnvPool Breakouts through ``PoolEnv(atari=True)``."""
  env = PoolEnv(make_pool("BreakoutNoFrameskip-v4", 2, seed=0, atari=True), atari=True)
  actions = np.random.default_rng(0).integers(0, 4, (200, 2)).astype(np.int32)
  return env, _scan_steps(env, actions)


def test_atari_on_envpool_gives_raw_frames_and_the_score_channel(breakout_steps):
  env, (first, (obs, reward, terminated, truncated, final_obs)) = breakout_steps
  assert env.single_observation_space["frame"].shape == (210, 160, 3)
  assert obs["frame"].shape == (200, 2, 210, 160, 3) and obs["frame"].dtype == np.uint8
  assert first["frame"].shape == (2, 210, 160, 3) and first["frame"].max() > 0
  game_over = final_obs["game_over"] > 0.5
  # a lost life ends the agent's episode; only the fifth ends the game (a random player
  # loses all five within 200 steps in at least one of the two games)
  assert game_over.any()
  assert (terminated | truncated)[game_over].all()
  assert terminated.sum() >= 5 * game_over.sum()
  assert set(np.unique(reward)) <= {-1.0, 0.0, 1.0}  # the agent's reward is clipped
  assert (final_obs["score_reward"] >= reward).all()  # scores stay raw
  assert not obs["game_over"].any()  # the observation to act on starts no game over


def test_atari_on_envpool_restarts_whole_games(breakout_steps):
  """A lost life ends the agent's episode only; a restart (before an evaluation, on resume)
  starts a new game with every life, wherever the game was."""
  env, _ = breakout_steps
  obs, (handle, lives) = env.reset(jax.random.key(1))
  assert np.asarray(lives).tolist() == [5, 5]
  step = jax.jit(lambda state, action: env.step(None, state, action))
  state, lost = (handle, lives), False
  for _ in range(60):  # a random player loses its first life within a few dozen steps
    out = step(state, jnp.asarray([3, 3], jnp.int32))
    state, lost = out.state, lost or bool(out.terminated.any())
  assert lost and min(np.asarray(state[1])) < 5
  assert not (np.asarray(out.final_obs["game_over"]) > 0).all()
  _, (_, lives) = env.reset(jax.random.key(2))
  assert np.asarray(lives).tolist() == [5, 5]


def test_atari_on_envpool_feeds_the_same_network_input_as_the_gymnasium_backend():
  run = configs.get("ppo_atari").run
  ours = agent_spaces(run)
  pooled = agent_spaces(dataclasses.replace(run, backend="envpool"))
  assert pooled == ours and ours[0].shape == (84, 84, 4)


@pytest.mark.slow
def test_ppo_atari_trains_on_envpool_through_the_cli(tmp_path):
  # 2 updates of 2 envs x 64 steps and an evaluation of 50 steps (the Nature CNN on CPU)
  sets = ["backend=envpool", "steps=256", "report_every=128", "eval_every=256",
          "eval_steps=50", "checkpoint_every=256", "num_envs=2", "rollout_length=64",
          "batch_size=64"]
  assert main(["train", "--config", "ppo_atari", "--logdir", str(tmp_path), "--timestamp",
               "A", *[arg for item in sets for arg in ("--set", item)],
               "--no-tensorboard"]) == 0
  lines = (tmp_path / "A-ppo_atari" / "metrics.jsonl").read_text().split("\n")
  records = [json.loads(line) for line in lines if line]
  assert [r["phase"] for r in records] == ["train", "train", "eval"]
  assert any((tmp_path / "A-ppo_atari" / "checkpoints").iterdir())


def test_batchenv_and_envpool_give_the_same_first_1000_observations_from_a_fixed_start():
  """Where the start is the same (InvertedPendulum-v5 without reset noise: both seedings
  then agree), the two backends give the same observations, rewards and episode ends for
  the same actions, auto-resets included (random actions end an episode every few steps)."""
  def steps(env):
    actions = np.random.default_rng(0).uniform(-1, 1, (1000, 2, 1)).astype(np.float32)
    return _scan_steps(env, actions)

  make = functools.partial(gym.make, "InvertedPendulum-v5", reset_noise_scale=0.0)
  host = BatchEnv([make] * 2, num_workers=0, seed=0, infos=False)
  try:
    first, (obs, reward, terminated, truncated, final_obs) = steps(InGraphBatchEnv(host))
  finally:
    host.close()
  pool = envpool.make("InvertedPendulum-v5", env_type="gymnasium", num_envs=2, seed=0,
                      reset_noise_scale=0.0)
  pool_first, pool_out = steps(PoolEnv(pool, normalize_ranges=False))
  assert terminated.sum() > 100  # many episodes, each restarted in the step that ended it
  np.testing.assert_allclose(pool_first, first, atol=1e-6)
  for got, want in zip(pool_out, (obs, reward, terminated, truncated, final_obs)):
    np.testing.assert_allclose(got, want, atol=1e-5)
