"""``batchrl visualize``: videos and episode statistics of a run's policy (its mode).

Loads the run's ``config.yaml`` and a checkpoint (the latest good one unless a path is
given), plays ``num_episodes`` evaluation episodes in Gymnasium environments rendering
offscreen (``rgb_array``; MuJoCo through EGL), and writes ``episode-NNN.mp4`` per episode
and ``episodes.json``. Without a checkpoint it refuses, unless ``allow_untrained``: the
original silently filmed an untrained policy.

Filming can be slow (MuJoCo rendered on a CPU: tenths of a second a frame, minutes for a
1000-step episode), so it says what renders the frames as it starts, and logs its
progress: the frame reached every ``PROGRESS_EVERY_S`` seconds, and each episode's end.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import re
import subprocess
import time
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
PROGRESS_EVERY_S = 10.0  # seconds between two progress lines while filming
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
                       atari=run.atari, env_kwargs=run.make_kwargs())


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


class FrameProgress:
  """Progress lines while episodes are filmed side by side: the frame reached (the first
  at once, then every ``every_s`` seconds, with the time a frame has taken since the first,
  which also compiled the policy, and the most time left) and each episode's end."""

  def __init__(self, num_episodes: int, max_frames: int | None,
               every_s: float = PROGRESS_EVERY_S, clock=time.monotonic):
    self.num_episodes, self.max_frames, self.every_s = num_episodes, max_frames, every_s
    self._clock = clock
    self._first = self._last = None  # (time, frame) of the first line; time of the last
    self.done = 0  # episodes ended

  def begin(self) -> None:
    """Episodes start (the next ones, after those of a full batch): the next frame line
    comes at once, and times frames from there."""
    self._first = None

  def frame(self, frame: int, running: int) -> None:
    """``frame`` frames of the longest episode are filmed; ``running`` episodes go on."""
    now = self._clock()
    if self._first is not None and now - self._last < self.every_s:
      return
    total = f"/{self.max_frames}" if self.max_frames else ""
    line = (f"Filming: frame {frame}{total}, {running} running, {self.done} of "
            f"{self.num_episodes} episodes done")
    if self._first is None:
      self._first = (now, frame)
    elif frame > self._first[1]:
      per_frame = (now - self._first[0]) / (frame - self._first[1])
      line += f", {per_frame:.3f} s a frame"
      if self.max_frames and frame < self.max_frames:
        line += f", at most {_duration(per_frame * (self.max_frames - frame))} left"
    log.info(line)
    self._last = now

  def episode_done(self, length: int, score: float) -> None:
    """An episode ended after ``length`` frames with return ``score``."""
    self.done += 1
    log.info("Filming: episode %d/%d ended after %d frames, return %.2f", self.done,
             self.num_episodes, length, score)


def _duration(seconds: float) -> str:
  return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def renderer_note(env) -> str:
  """What renders ``env``'s frames, said as filming starts: Gymnasium's ``rgb_array`` mode,
  and for MuJoCo the ``MUJOCO_GL`` backend and how slow it is on a CPU."""
  if getattr(env.unwrapped, "mujoco_renderer", None) is None:
    return f"Rendering {_env_id(env)} with Gymnasium's rgb_array mode."
  backend = os.environ.get("MUJOCO_GL")
  backend = f"MUJOCO_GL={backend}" if backend else "MUJOCO_GL unset: MuJoCo's default, glfw"
  return (f"Rendering {_env_id(env)} with MuJoCo offscreen (rgb_array, {backend}). MuJoCo "
          "renders fast on a GPU's EGL; on a CPU (EGL's or OSMesa's software renderer, "
          "llvmpipe) a frame takes tenths of a second, so a 1000-step episode takes "
          "minutes.")


def gl_renderer_note(env) -> str | None:
  """Which OpenGL renderer drew MuJoCo's first frame (its context is current then), and
  whether that is the CPU; None for other envs or when OpenGL cannot be asked."""
  if getattr(env.unwrapped, "mujoco_renderer", None) is None:
    return None
  try:  # here, not at the top: PyOpenGL picks its platform from MUJOCO_GL when first imported
    from OpenGL import GL, error
  except (ImportError, AttributeError) as e:  # no PyOpenGL, or no platform it can load
    log.debug("cannot ask OpenGL for its renderer: %r", e)
    return None
  try:
    name = GL.glGetString(GL.GL_RENDERER)
  except error.Error as e:
    log.debug("cannot ask OpenGL for its renderer: %r", e)
    return None
  if not name:  # no current context
    return None
  name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
  on_cpu = any(soft in name.lower() for soft in ("llvmpipe", "softpipe", "swrast", "software"))
  return (f"MuJoCo's OpenGL renderer is {name}" + (": software rendering on the CPU, slow."
                                                   if on_cpu else "."))


def _env_id(env) -> str:
  return env.spec.id if env.spec is not None else type(env.unwrapped).__name__


def _max_frames(exp: Experiment, env) -> int | None:
  """The longest an episode can be: the run's ``max_length``, else the env's own limit."""
  return exp.run.max_length or (env.spec.max_episode_steps if env.spec is not None else None)


def play(exp: Experiment, agent, agent_state, num_episodes: int, seed: int):
  """Plays one episode in each of ``num_episodes`` envs with the policy's mode, logging
  the renderer and the progress (``FrameProgress``).

  The agent acts for the batch size it was built for (``num_envs``): recorded envs fill it
  cyclically, and more episodes than that are filmed that many at a time.
  """
  envs = [render_env(exp) for _ in range(num_episodes)]
  try:
    log.info(renderer_note(envs[0]))
    batch = exp.run.num_envs
    if num_episodes > batch:
      log.info("Filming %d episodes %d at a time (the policy acts for num_envs=%d envs).",
               num_episodes, batch, batch)
    act, track = jax.jit(agent.act, static_argnums=3), jax.jit(agent.track)
    progress = FrameProgress(num_episodes, _max_frames(exp, envs[0]))
    groups = [_film(exp, (act, track), agent_state, envs[first:first + batch],
                    seed + first, progress) for first in range(0, num_episodes, batch)]
    fps = envs[0].metadata.get("render_fps", 30)
  finally:
    for env in envs:
      env.close()
  frames = [clip for group in groups for clip in group[0]]
  returns, lengths = (np.concatenate([group[i] for group in groups]) for i in (1, 2))
  return frames, returns, lengths, fps


def _film(exp: Experiment, policy, agent_state, envs: list, seed: int,
          progress: FrameProgress):
  """``(frames, returns, lengths)`` of one episode in each of ``envs`` (at most the
  policy's batch), env ``i`` reset with ``seed + i``; ``policy``: jitted ``(act, track)``."""
  act, track = policy
  count, batch = len(envs), exp.run.num_envs
  fill = np.arange(batch) % count
  observe = Observer(exp, envs[0].observation_space, count)
  raw = observe.frames([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
  obs = observe(raw, np.ones(count, bool))
  frames = [[env.render()] for env in envs]
  note = gl_renderer_note(envs[0]) if progress.done == 0 else None  # said once, first
  if note:
    log.info(note)
  progress.begin()
  returns, lengths = np.zeros(count), np.zeros(count, int)
  running = np.ones(count, bool)
  key = jax.random.key(seed)
  while running.any():
    key, act_key = jax.random.split(key)
    action, extras = act(agent_state, jnp.asarray(obs[fill]), act_key, True)
    action = np.asarray(action)
    next_raw, rewards = raw.copy(), np.zeros(count, np.float32)
    ended, game_over = np.zeros(count, bool), np.zeros(count, bool)
    for i in np.flatnonzero(running):
      o, r, term, trunc, _ = envs[i].step(action[i])
      score, game_over[i] = observe.score(o, r, term or trunc)
      next_raw[i], rewards[i], ended[i] = observe.frames([o])[0], r, term or trunc
      returns[i] += score
      lengths[i] += 1
      frames[i].append(envs[i].render())
    next_obs = observe(next_raw, np.zeros(count, bool), keep=False)
    transition = Transition(jnp.asarray(obs[fill]), action, jnp.asarray(rewards[fill]),
                            jnp.asarray(ended[fill]), jnp.zeros(batch, bool),
                            jnp.asarray(next_obs[fill]), extras)
    agent_state = track(agent_state, transition)
    for i in np.flatnonzero(game_over):
      progress.episode_done(lengths[i], returns[i])
    running &= ~game_over
    progress.frame(int(lengths.max()), int(running.sum()))
    # a lost life ends the agent's episode, not the game: the env's reset continues it
    for i in np.flatnonzero(ended & running):
      next_raw[i] = observe.frames([envs[i].reset()[0]])[0]
    raw = next_raw
    obs = observe(raw, ended & running)
  return frames, returns, lengths


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
    log.info("Writing %s (%d frames)", video, len(clip))
    write_video(video, clip, fps)
    episodes.append({"index": i, "return": float(returns[i]), "length": int(lengths[i]),
                     "video": str(video)})
  result = {"run": str(run_dir), "config": exp.name, "checkpoint": source,
            "episodes": episodes, "mean_return": float(np.mean(returns)),
            "mean_length": float(np.mean(lengths))}
  (outdir / "episodes.json").write_text(json.dumps(result, indent=2))
  return result
