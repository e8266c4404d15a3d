"""``batchrl visualize``: videos and episode statistics of a run's policy (its mode).

Loads the run's ``config.yaml`` and a checkpoint (the latest good one unless a path is
given), plays ``num_episodes`` evaluation episodes in Gymnasium environments rendering
offscreen (``rgb_array``; MuJoCo through EGL), and writes ``episode-NNN.mp4`` per episode
and ``episodes.json``. Without a checkpoint it refuses, unless ``allow_untrained``: the
original silently filmed an untrained policy.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import logging
import re
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import imageio_ffmpeg
import jax
import jax.numpy as jnp
import numpy as np
import yaml

from batchrl import checkpoint
from batchrl.agents.core import Transition
from batchrl.configclass import ConfigError
from batchrl.configs import Experiment
from batchrl.envs.preprocessed import (
  GAME_OVER,
  SCORE_REWARD,
  build_env_stack,
  has_score_channel,
  parse_spec,
  split_observation,
)
from batchrl.errors import UserInputError
from batchrl.experiment import (
  CONFIG_FILE,
  build_env,
  build_model,
  close_env,
  make_host_env,
  restore_sim,
)

_CKPT_NAME = re.compile(r"ckpt-(\d+)$")
log = logging.getLogger("batchrl")


def load_experiment(run_dir: Path) -> Experiment:
  """The experiment of a run directory, read from its ``config.yaml``."""
  path = Path(run_dir) / CONFIG_FILE
  if not path.exists():
    raise UserInputError(f"{path} not found: {not_a_run_hint(Path(run_dir))}")
  return Experiment.from_dict(yaml.safe_load(path.read_text()))


def not_a_run_hint(path: Path) -> str:
  """What to give instead of ``path``, which is not a run directory: one of the runs when it
  holds runs (a logdir given where a run is asked for), else what a run directory is."""
  runs = sorted(p.parent for p in path.glob(f"*/{CONFIG_FILE}")) if path.is_dir() else []
  if runs:
    return (f"{path} holds runs (it is a LOGDIR); give one run directory, e.g. {runs[-1]}")
  return ("give a run directory written by `batchrl train` (LOGDIR/<timestamp>-<config>, it "
          "holds config.yaml)")


def load_agent_state(exp: Experiment, run_dir: Path, agent, checkpoint_path: str | None,
                     allow_untrained: bool, seed: int, seed_index: int | None = None):
  """The agent state from a checkpoint, or a fresh one when allowed. Returns (state, source).

  A run trained with ``--seeds K`` holds K agents stacked on a leading axis: the one at
  ``seed_index`` is returned (default 0, the first)."""
  from batchrl.train import fused

  ckpt_dir = Path(checkpoint_path).parent if checkpoint_path else Path(run_dir) / "checkpoints"
  run = dataclasses.replace(exp.run, num_workers=0)
  env = build_env(run)
  try:
    template = fused.init_sim(env, agent, jax.random.key(seed))
    seeds = checkpoint.stacked_size(ckpt_dir, template)
    check_seed_index(seed_index, seeds)
    if seeds is not None:  # K copies stacked: a template needs only the structure and shapes
      template = jax.tree.map(lambda x: jnp.broadcast_to(x, (seeds,) + x.shape), template)
  finally:
    close_env(env)
  pick = functools.partial(_one_seed, seeds, seed_index or 0)
  if checkpoint_path is not None:
    path = Path(checkpoint_path)
    match = _CKPT_NAME.search(path.name)
    if not match:
      raise ConfigError(f"--checkpoint {path} is not a checkpoint directory (ckpt-NNN).")
    sim, _ = restore_sim(path.parent, template, agent, step=int(match.group(1)))
    return pick(sim.agent_state, str(path))
  try:
    sim, manifest = restore_sim(ckpt_dir, template, agent)
    return pick(sim.agent_state, f"step {manifest['step']}")
  except checkpoint.NoCheckpointError:
    if not allow_untrained:
      raise checkpoint.NoCheckpointError(
          f"no checkpoint in {ckpt_dir}: nothing trained to show. Train "
          "first, or pass --allow-untrained to record a freshly initialised policy.") from None
    return template.agent_state, "untrained"


def check_seed_index(seed_index: int | None, seeds: int | None) -> None:
  """``--seed-index`` against the run's number of stacked agents (None: one agent)."""
  if seed_index is None:
    return
  if seeds is None and seed_index != 0:
    raise UserInputError(f"--seed-index {seed_index}: this run trained one agent (it was not "
                         "trained with --seeds K); leave --seed-index out.")
  if seeds is not None and not 0 <= seed_index < seeds:
    raise UserInputError(f"--seed-index {seed_index}: this run trained {seeds} agents at once "
                         f"(--seeds {seeds}); give an index from 0 to {seeds - 1}.")


def _one_seed(seeds: int | None, index: int, state, source: str):
  if seeds is None:
    return state, source
  log.info("This run trained %d agents at once (--seeds %d): using the one at index %d "
           "(--seed-index picks another).", seeds, seeds, index)
  return jax.tree.map(lambda x: x[index], state), f"{source}, seed index {index} of {seeds}"


def render_env(exp: Experiment):
  """A Gymnasium env that renders frames and matches what the policy was trained on."""
  run = exp.run
  if run.backend == "gymnax":
    import gymnasium as gym
    try:
      kwargs = {} if run.max_length is None else {"max_episode_steps": run.max_length}
      return gym.make(run.env, render_mode="rgb_array", **kwargs)
    except gym.error.Error as e:
      raise ConfigError(f"cannot render gymnax env {run.env!r}: no Gymnasium env of the same "
                        f"id to film ({e}).") from None
  return make_host_env(run.env, run.max_length, run.normalize_ranges, "rgb_array",
                       atari=run.atari)


class Observer:
  """What the policy sees of the recorded envs: the run's ``preprocessing`` (applied here on
  the host, as ``PreprocessedEnv`` does in the compiled loop) and, for Atari, whole games with
  raw scores while a lost life ends the agent's episode (``batchrl.envs.atari``)."""

  def __init__(self, exp: Experiment, space, num_envs: int):
    run = exp.run
    self.scored = has_score_channel(space)
    self.stack = None
    if run.atari or run.preprocessing is not None:
      self.stack = build_env_stack(parse_spec(run.preprocessing), space)
      self.state = self.stack.init(num_envs)
      self._process = jax.jit(lambda st, x, r: self.stack.process(st, x, r, update=False))

  def __call__(self, obs: np.ndarray, reset: np.ndarray, keep: bool = True) -> np.ndarray:
    """Processed observations ``[N, ...]``; ``reset`` marks streams whose episode begins;
    ``keep=False`` leaves the stack's memory as it was (the last frames of ended episodes)."""
    if self.stack is None:
      return obs
    state, y = self._process(self.state, jnp.asarray(obs), jnp.asarray(reset))
    self.state = state if keep else self.state
    y = np.asarray(y, np.float32)
    return y.reshape(y.shape[:3] + (-1,)) if y.ndim == 5 else y  # frames as channels

  def frames(self, obs_list) -> np.ndarray:
    return np.stack([split_observation(o, self.scored)[0] for o in obs_list])

  def score(self, obs, reward: float, ended: bool) -> tuple[float, bool]:
    """(the step's raw score, whether the whole game is over)."""
    if not self.scored:
      return float(reward), ended
    return float(obs[SCORE_REWARD]), bool(obs[GAME_OVER])


def play(exp: Experiment, agent, agent_state, num_episodes: int, seed: int):
  """Plays one episode in each of ``num_episodes`` envs with the policy's mode.

  The agent acts for the batch size it was built for; recorded envs fill it cyclically.
  """
  envs = [render_env(exp) for _ in range(num_episodes)]
  batch = exp.run.num_envs
  fill = np.arange(batch) % num_episodes
  act = jax.jit(agent.act, static_argnums=3)
  track = jax.jit(agent.track)
  observe = Observer(exp, envs[0].observation_space, num_episodes)
  raw = observe.frames([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
  obs = observe(raw, np.ones(num_episodes, bool))
  frames = [[env.render()] for env in envs]
  returns, lengths = np.zeros(num_episodes), np.zeros(num_episodes, int)
  running = np.ones(num_episodes, bool)
  key = jax.random.key(seed)
  while running.any():
    key, act_key = jax.random.split(key)
    action, extras = act(agent_state, jnp.asarray(obs[fill]), act_key, True)
    action = np.asarray(action)
    next_raw, rewards = raw.copy(), np.zeros(num_episodes, np.float32)
    ended, game_over = np.zeros(num_episodes, bool), np.zeros(num_episodes, bool)
    for i in np.flatnonzero(running):
      o, r, term, trunc, _ = envs[i].step(action[i])
      score, game_over[i] = observe.score(o, r, term or trunc)
      next_raw[i], rewards[i], ended[i] = observe.frames([o])[0], r, term or trunc
      returns[i] += score
      lengths[i] += 1
      frames[i].append(envs[i].render())
    next_obs = observe(next_raw, np.zeros(num_episodes, bool), keep=False)
    transition = Transition(jnp.asarray(obs[fill]), action, jnp.asarray(rewards[fill]),
                            jnp.asarray(ended[fill]), jnp.zeros(batch, bool),
                            jnp.asarray(next_obs[fill]), extras)
    agent_state = track(agent_state, transition)
    running &= ~game_over
    # a lost life ends the agent's episode, not the game: the env's reset continues it
    for i in np.flatnonzero(ended & running):
      next_raw[i] = observe.frames([envs[i].reset()[0]])[0]
    raw = next_raw
    obs = observe(raw, ended & running)
  fps = envs[0].metadata.get("render_fps", 30)
  for env in envs:
    env.close()
  return frames, returns, lengths, fps


def write_video(path: Path, frames: list, fps: float) -> None:
  """Encodes RGB frames ([H, W, 3] uint8) as an H.264 mp4 with imageio-ffmpeg's ffmpeg.

  Why not ``imageio.mimsave``: imageio-ffmpeg starts ffmpeg with ``preexec_fn=os.setpgrp``
  (so that Ctrl-C does not kill it mid-file), and a ``preexec_fn`` makes Python run its
  at-fork hooks before the fork: JAX's hook then warns "os.fork() was called ... will likely
  lead to a deadlock". ``process_group=0`` gives ffmpeg its own process group without any
  Python in the child, so no hook runs. Settings as imageio's defaults (quality 5: crf 25).
  """
  height, width = np.asarray(frames[0]).shape[:2]
  command = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-v", "error", "-f", "rawvideo",
             "-pix_fmt", "rgb24", "-s", f"{width}x{height}",
             "-r", str(Fraction(fps).limit_denominator()), "-i", "-", "-an",
             "-vcodec", "libx264", "-pix_fmt", "yuv420p", "-crf", "25",
             "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2",  # yuv420p needs even sides
             str(path)]
  ffmpeg = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, process_group=0)
  try:
    for frame in frames:
      ffmpeg.stdin.write(np.ascontiguousarray(frame, np.uint8).tobytes())
  except BrokenPipeError:  # ffmpeg stopped early: its own message is read below
    pass
  except BaseException:  # Ctrl-C: in its own process group, ffmpeg did not get the signal
    ffmpeg.kill()
    ffmpeg.wait()
    raise
  _, err = ffmpeg.communicate()
  if ffmpeg.returncode != 0:
    raise RuntimeError(f"ffmpeg could not write {path} (exit code {ffmpeg.returncode}): "
                       f"{err.decode(errors='replace').strip()}")


def visualize(run_dir, outdir, *, num_episodes: int = 1, checkpoint_path: str | None = None,
              allow_untrained: bool = False, seed: int = 0) -> dict[str, Any]:
  if num_episodes < 1:
    raise ConfigError(f"--num-episodes must be >= 1, got {num_episodes}.")
  run_dir, outdir = Path(run_dir), Path(outdir)
  exp = load_experiment(run_dir)
  agent = build_model(exp)
  agent_state, source = load_agent_state(exp, run_dir, agent, checkpoint_path,
                                         allow_untrained, seed)
  frames, returns, lengths, fps = play(exp, agent, agent_state, num_episodes, seed)
  outdir.mkdir(parents=True, exist_ok=True)
  episodes = []
  for i, clip in enumerate(frames):
    video = outdir / f"episode-{i:03d}.mp4"
    write_video(video, clip, fps)
    episodes.append({"index": i, "return": float(returns[i]), "length": int(lengths[i]),
                     "video": str(video)})
  result = {"run": str(run_dir), "config": exp.name, "checkpoint": source,
            "episodes": episodes, "mean_return": float(np.mean(returns)),
            "mean_length": float(np.mean(lengths))}
  (outdir / "episodes.json").write_text(json.dumps(result, indent=2))
  return result
