"""Atari: the wrappers of batchrl.envs.atari against a hand-made frame env, the in-graph
preprocessing and score channel (batchrl.envs.preprocessed), the missing-extra error, and a
short ppo_atari run (needs ale-py: skipped without it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl.envs import ale, atari
from batchrl.envs.preprocessed import PreprocessedEnv, build_env_stack
from batchrl.errors import UserInputError
from batchrl.preprocessing import PreprocessingSpecError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FrameEnv(gym.Env):
  """A fake one-frame-per-step Atari game, fully scripted.

  Frame ``t`` (t = frames since reset) is a 2x2x1 uint8 image: pixel (0, 0) holds ``t`` on
  even frames and 0 on odd ones, pixel (0, 1) holds ``t`` on odd frames (a flickering
  sprite: only a max over two frames sees both). ``rewards[t]`` is the reward of the step
  that shows frame t; ``lives_at[t]`` the lives after it; the game ends at ``length``
  frames. Records every action.
  """

  metadata = {"render_modes": []}

  def __init__(self, length=100, rewards=None, lives_at=None, meanings=None):
    self.observation_space = gym.spaces.Box(0, 255, (2, 2, 1), np.uint8)
    self.action_space = gym.spaces.Discrete(4)
    self.length, self.rewards, self.lives_at = length, rewards or {}, lives_at or {}
    self.meanings = meanings or ["NOOP", "FIRE", "RIGHT", "LEFT"]
    self.actions, self.resets = [], 0

  def get_action_meanings(self):
    return self.meanings

  def _frame(self):
    frame = np.zeros((2, 2, 1), np.uint8)
    frame[0, self.t % 2, 0] = self.t
    return frame

  def _lives(self):
    passed = [k for k in self.lives_at if k <= self.t]
    return self.lives_at[max(passed)] if passed else 3

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.t, self.resets = 0, self.resets + 1
    return self._frame(), {"lives": self._lives()}

  def step(self, action):
    self.actions.append(int(action))
    self.t += 1
    return (self._frame(), float(self.rewards.get(self.t, 0.0)), self.t >= self.length, False,
            {"lives": self._lives()})


# --------------------------------------------------------------------------- wrappers


def test_max_and_skip_max_pools_the_last_two_frames_and_sums_rewards():
  env = atari.MaxAndSkip(FrameEnv(rewards={2: 1.0, 4: 3.0}), skip=4)
  env.reset(seed=0)
  frame, reward, terminated, truncated, _ = env.step(2)
  # frames 3 (odd: pixel (0,1) = 3) and 4 (even: pixel (0,0) = 4): the max shows both
  np.testing.assert_array_equal(frame[..., 0], [[4, 3], [0, 0]])
  assert reward == 4.0 and not terminated and not truncated
  assert env.unwrapped.actions == [2, 2, 2, 2]


def test_max_and_skip_stops_when_the_game_ends():
  env = atari.MaxAndSkip(FrameEnv(length=6), skip=4)
  env.reset(seed=0)
  env.step(0)
  frame, _, terminated, _, _ = env.step(0)
  assert terminated and len(env.unwrapped.actions) == 6  # 4 + 2 frames, then the end
  np.testing.assert_array_equal(frame[..., 0], [[6, 5], [0, 0]])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_noop_reset_takes_1_to_noop_max_noops_reproducibly(seed):
  counts = []
  for _ in range(2):
    env = atari.NoopReset(FrameEnv(), noop_max=30)
    frame, _ = env.reset(seed=seed)
    counts.append(env.last_noops)
    assert env.unwrapped.actions == [atari.NOOP] * env.last_noops
    assert env.unwrapped.t == env.last_noops  # the first frame is after the no-ops
  assert counts[0] == counts[1] and 1 <= counts[0] <= 30
  seen = set()
  env = atari.NoopReset(FrameEnv(), noop_max=3)
  for seed in range(40):
    env.reset(seed=seed)
    seen.add(env.last_noops)
  assert seen == {1, 2, 3}


def test_episodic_life_ends_the_agents_episode_at_a_life_loss_but_not_the_game():
  game = FrameEnv(length=10, lives_at={0: 3, 4: 2})
  env = atari.EpisodicLife(atari.ScoreObservation(game))
  env.reset(seed=0)
  for t in range(1, 4):
    obs, _, terminated, _, _ = env.step(2)
    assert not terminated
  obs, _, terminated, _, _ = env.step(2)  # frame 4: a life lost
  assert terminated and obs[atari.GAME_OVER] == 0.0
  env.reset()  # continues the game with one no-op, no real reset
  assert game.resets == 1 and game.t == 5 and game.actions[-1] == atari.NOOP
  for _ in range(4):
    obs, _, terminated, _, _ = env.step(2)
  assert game.t == 9 and not terminated
  obs, _, terminated, _, _ = env.step(2)  # frame 10: the game is over
  assert terminated and obs[atari.GAME_OVER] == 1.0
  env.reset()
  assert game.resets == 2 and game.t == 0  # a real reset after a game over


def test_episodic_life_resets_for_real_when_given_a_seed():
  game = FrameEnv(length=10, lives_at={0: 3, 2: 2})
  env = atari.EpisodicLife(game)
  env.reset(seed=0)
  env.step(0)
  _, _, terminated, _, _ = env.step(0)
  assert terminated
  env.reset(seed=5)  # a forced restart (before an evaluation): a new game
  assert game.resets == 2 and game.t == 0


def test_clipping_reaches_the_agent_only_and_scores_stay_raw():
  # the life lost at frame 6: the reset continues the game with a no-op (frame 7)
  game = FrameEnv(length=40, rewards={3: 4.0, 8: -2.0, 9: 0.5}, lives_at={0: 2, 6: 1})
  env = atari.wrap_atari(game, noop_max=0, skip=1, fire_reset=False)
  env.reset(seed=0)
  agent, raw = [], []
  for _ in range(10):
    obs, reward, terminated, _, _ = env.step(2)
    agent.append(reward)
    raw.append(float(obs[atari.SCORE_REWARD]))
    if terminated:
      env.reset()
  assert sorted(set(agent)) == [-1.0, 0.0, 1.0]
  assert sum(raw) == 4.0 - 2.0 + 0.5  # the game's own score, counted across the lost life
  assert agent.count(1.0) == 2 and agent.count(-1.0) == 1


def test_fire_reset_presses_fire_only_where_the_game_has_it():
  game = FrameEnv()
  env = atari.wrap_atari(game, noop_max=0)
  env.reset(seed=0)
  assert game.actions == [atari.FIRE] * 4 + [2] * 4  # each action held for 4 frames
  plain = FrameEnv(meanings=["NOOP", "UP", "DOWN"])
  atari.wrap_atari(plain, noop_max=0).reset(seed=0)
  assert plain.actions == []


# ---------------------------------------------------------- in-graph preprocessing


class ScriptedBatch:
  """A batched in-graph env (jax_env protocol) over a score-channel Dict: env b shows the
  RGB frame ``t + b`` everywhere; env 0 ends an agent episode at t = 2 (a life) and its game
  at t = 4; rewards are clipped 1s while the raw score is 5 per step."""

  num_envs = 2
  single_action_space = gym.spaces.Discrete(2)
  single_observation_space = gym.spaces.Dict({
      atari.FRAME: gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
      atari.SCORE_REWARD: gym.spaces.Box(-np.inf, np.inf, (), np.float32),
      atari.GAME_OVER: gym.spaces.Box(0.0, 1.0, (), np.float32)})

  def _obs(self, t, game_over):
    frames = (t + jnp.arange(2))[:, None, None, None] * jnp.ones((2, 4, 4, 3))
    return {atari.FRAME: frames.astype(jnp.uint8), atari.SCORE_REWARD: jnp.full((2,), 5.0),
            atari.GAME_OVER: game_over.astype(jnp.float32)}

  def reset(self, key):
    return self._obs(jnp.int32(0), jnp.zeros(2, bool)), jnp.int32(0)

  def step(self, key, t, action):
    from batchrl.envs.jax_env import EnvStep
    t = t + 1
    done = jnp.array([True, False]) & ((t == 2) | (t == 4))
    game_over = jnp.array([True, False]) & (t == 4)
    final = self._obs(t, game_over)
    obs = jax.tree.map(lambda f: jnp.where(done.reshape((2,) + (1,) * (f.ndim - 1)), 0, f),
                       final)
    return EnvStep(obs, t, jnp.ones(2), done, jnp.zeros(2, bool), final, {})


def _stack(spec):
  return build_env_stack(spec, ScriptedBatch.single_observation_space)


def test_preprocessed_env_stacks_frames_as_channels_and_moves_scores_to_info():
  spec = [{"type": "grayscale", "weights": [1.0, 0.0, 0.0]},
          {"type": "image_resize", "width": 2, "height": 2}, {"type": "sequence", "length": 3}]
  env = PreprocessedEnv(ScriptedBatch(), _stack(spec))
  assert env.single_observation_space.shape == (2, 2, 3)
  obs, state = env.reset(jax.random.key(0))
  np.testing.assert_allclose(obs[1, 0, 0], [1, 1, 1], atol=1e-5)  # refilled with the first frame
  out = env.step(None, state, jnp.zeros(2, jnp.int32))
  np.testing.assert_allclose(out.obs[1, 0, 0], [1, 1, 2], atol=1e-5)
  np.testing.assert_allclose(out.info["score_reward"], [5, 5])
  out = env.step(None, out.state, jnp.zeros(2, jnp.int32))  # env 0 loses a life at t = 2
  np.testing.assert_allclose(out.final_obs[0, 0, 0], [0, 1, 2], atol=1e-5)  # its last frames
  np.testing.assert_allclose(out.obs[0, 0, 0], [0, 0, 0], atol=1e-5)  # refilled with the new frame
  np.testing.assert_allclose(out.obs[1, 0, 0], [1, 2, 3], atol=1e-5)
  assert out.info["game_over"].tolist() == [False, False]


def test_scores_count_whole_games_with_raw_rewards():
  from batchrl import simulation

  class Idle:
    def act(self, state, obs, key, deterministic):
      return jnp.zeros(obs.shape[:1], jnp.int32), {}

    def track(self, state, transition):
      return state

  env = PreprocessedEnv(ScriptedBatch(), _stack([{"type": "grayscale"}]))
  sim = simulation.SimState(*env.reset(jax.random.key(0)), (), jax.random.key(1),
                            jnp.zeros(2), jnp.zeros(2, jnp.int32))
  sim = sim._replace(env_state=sim.obs, obs=sim.env_state)  # (env_state, obs) order
  _, rollout = simulation.simulate(env, Idle(), sim, 5, mode="track")
  # env 0: the life lost at t = 2 is no score; its game ends at t = 4 with 4 x 5 raw points
  assert rollout.done[:, 0].tolist() == [False, False, False, True, False]
  assert float(rollout.episode_return[3, 0]) == 20.0
  assert float(rollout.episode_length[3, 0]) == 4
  assert not rollout.done[:, 1].any()
  # the agent learns from the clipped reward and the life's end
  assert rollout.transitions.terminated[:, 0].tolist() == [False, True, False, True, False]


def test_running_standardize_is_refused_in_env_preprocessing():
  with pytest.raises(PreprocessingSpecError, match="running_standardize"):
    _stack([{"type": "running_standardize"}])


def test_a_preprocessing_typo_names_the_closest_type():
  with pytest.raises(PreprocessingSpecError, match="grayscale"):
    _stack([{"type": "greyscale"}])


# ------------------------------------------------------------------ missing extra


def test_an_atari_id_without_the_extra_is_one_line_naming_it(monkeypatch):
  monkeypatch.setattr(ale, "_registered", False)
  real_import = ale.importlib.import_module

  def no_ale(name, *args):
    if name == "ale_py":
      raise ImportError("No module named 'ale_py'")
    return real_import(name, *args)

  monkeypatch.setattr(ale.importlib, "import_module", no_ale)
  with pytest.raises(UserInputError, match=r'pip install "batchrl\[atari\]"') as error:
    ale.ensure_registered("ALE/NotRegisteredYet-v5")
  assert "\n" not in str(error.value)
  ale.ensure_registered("NotAtariAtAll-v1")  # other ids: gymnasium's own error later
  with pytest.raises(UserInputError, match=r"batchrl\[atari\]"):
    ale.import_ale()


def test_atari_ids_look_like_atari():
  assert ale.looks_like_atari("ALE/Breakout-v5")
  assert ale.looks_like_atari("PongNoFrameskip-v4")
  assert not ale.looks_like_atari("CartPole-v1")


def test_the_nature_cnn_json_is_the_configs_network():
  from batchrl.configs.atari import NATURE_CNN
  with open(os.path.join(ROOT, "examples", "configs", "nature_cnn.json")) as f:
    assert json.load(f) == NATURE_CNN



def test_ppo_atari_runs_its_update_on_the_host_on_the_cpu_only():
  # XLA:CPU's slow convolution gradients inside loops (jax #12868): the update leaves the
  # compiled chunk on the CPU; the loop equivalence is tests/test_ppo_host_update.py
  from batchrl.agents.ppo.model import make_ppo
  from batchrl.configs.ppo import ppo_atari
  from batchrl.train import host_update
  config = ppo_atari().config
  assert config.update_loop == "auto"
  assert host_update.on_host(make_ppo(config)) == (jax.default_backend() == "cpu")


# ----------------------------------------------------------------- with ale-py


def test_ale_ids_build_through_make_gym():
  pytest.importorskip("ale_py")
  from batchrl.envs.core import make_gym
  env = make_gym("ALE/Breakout-v5")
  assert env.observation_space.shape == (210, 160, 3)
  env.close()
  from batchrl.envs import make  # the TensorForce interface (Agent.create, Runner) too
  with make("ALE/Pong-v5") as pong:
    assert pong.states["shape"] == (210, 160, 3) and pong.actions["num_values"] == 6


def test_v5_ids_get_the_wrappers_with_one_frame_per_ale_step():
  pytest.importorskip("ale_py")
  env = atari.atari_env("ALE/Breakout-v5")
  assert env.unwrapped._frameskip == 1  # frame skip (and its max-pool) are the wrappers'
  env.close()


def test_an_unknown_game_names_close_ids():
  pytest.importorskip("ale_py")
  from batchrl.envs.core import make_gym
  with pytest.raises(UserInputError, match="ALE/Breakout-v5"):
    make_gym("ALE/Breakot-v5")


def test_atari_wrappers_refuse_a_non_atari_env():
  pytest.importorskip("ale_py")
  with pytest.raises(UserInputError, match="not an Atari"):
    atari.atari_env("CartPole-v1")


def test_atari_env_reports_lives_and_fires_on_breakout():
  pytest.importorskip("ale_py")
  env = atari.atari_env("BreakoutNoFrameskip-v4")
  obs, info = env.reset(seed=0)
  assert obs[atari.FRAME].shape == (210, 160, 3) and info["lives"] == 5
  assert isinstance(env.env, atari.FireReset)
  env.close()


@pytest.mark.slow
def test_ppo_atari_trains_and_evaluates_through_the_cli(tmp_path):
  pytest.importorskip("ale_py")
  logdir = tmp_path / "run"
  # 2 updates of 2 envs x 64 steps, an evaluation of 50 steps (the Nature CNN on CPU)
  sets = ["steps=256", "report_every=128", "eval_every=256", "eval_steps=50",
          "checkpoint_every=256", "num_workers=0", "num_envs=2", "rollout_length=64",
          "batch_size=64"]
  result = _train([arg for s in sets for arg in ("--set", s)], logdir)
  assert result.returncode == 0, result.stderr[-3000:]
  (run_dir,) = logdir.iterdir()
  assert any((run_dir / "checkpoints").iterdir())
  metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
  assert metrics, "no report written"
  videos = tmp_path / "videos"
  command = [sys.executable, "-m", "batchrl", "visualize", str(run_dir), "--outdir",
             str(videos), "--num-episodes", "1"]
  result = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
  assert result.returncode == 0, result.stderr[-3000:]
  episodes = json.loads((videos / "episodes.json").read_text())["episodes"]
  assert (videos / "episode-000.mp4").stat().st_size > 0
  # a whole game: Breakout's 5 lives, each at least the FIRE presses and a missed ball
  assert episodes[0]["length"] > 50 and episodes[0]["return"] >= 0


def _train(args, logdir):
  command = [sys.executable, "-m", "batchrl", "train", "--config", "ppo_atari", "--logdir",
             str(logdir)] + list(args)
  return subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)


@pytest.mark.parametrize("sets, message", [
    (['preprocessing=[{"type": "grayscale"}, {"type": "image_resize", "width": 4, '
      '"height": 4}]', 'network=[{"type": "conv2d", "size": 8, "window": 8, '
      '"padding": "valid"}, {"type": "flatten"}]'], "larger than its input (4, 4)"),
    (['preprocessing=[{"type": "greyscale"}]'], "did you mean 'grayscale'"),
    (["env=ALE/Breakot-v5"], "ALE/Breakout-v5"),
    (["env=CartPole-v1"], "not an Atari"),
])
def test_bad_atari_input_is_one_line_before_any_run_directory(tmp_path, sets, message):
  pytest.importorskip("ale_py")
  result = _train([arg for s in sets for arg in ("--set", s)], tmp_path / "runs")
  assert result.returncode == 2
  assert message in result.stderr
  errors = [line for line in result.stderr.splitlines() if "error" in line]
  assert len(errors) == 1
  assert not (tmp_path / "runs").exists()
