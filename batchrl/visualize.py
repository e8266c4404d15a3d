"""``batchrl visualize``: videos and episode statistics of a run's policy (its mode).

Loads the run's ``config.yaml`` and a checkpoint (the latest good one unless a path is
given), plays ``num_episodes`` evaluation episodes in Gymnasium environments rendering
offscreen (``rgb_array``; MuJoCo through EGL), and writes ``episode-NNN.mp4`` per episode
and ``episodes.json``. Without a checkpoint it refuses, unless ``allow_untrained``: the
original silently filmed an untrained policy.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import yaml

from batchrl import checkpoint
from batchrl.agents.core import Transition
from batchrl.configs import Experiment
from batchrl.configclass import ConfigError
from batchrl.errors import UserInputError
from batchrl.experiment import CONFIG_FILE, build_model, build_env, close_env, make_host_env

_CKPT_NAME = re.compile(r"ckpt-(\d+)$")


def load_experiment(run_dir: Path) -> Experiment:
  path = Path(run_dir) / CONFIG_FILE
  if not path.exists():
    raise UserInputError(f"{path} not found: --logdir must be a run directory written by "
                         "`batchrl train` (it holds config.yaml).")
  return Experiment.from_dict(yaml.safe_load(path.read_text()))


def load_agent_state(exp: Experiment, run_dir: Path, agent, checkpoint_path: str | None,
                     allow_untrained: bool, seed: int):
  """The agent state from a checkpoint, or a fresh one when allowed. Returns (state, source)."""
  from batchrl.train import fused

  run = dataclasses.replace(exp.run, num_workers=0)
  env = build_env(run)
  try:
    template = fused.init_sim(env, agent, jax.random.key(seed))
  finally:
    close_env(env)
  if checkpoint_path is not None:
    path = Path(checkpoint_path)
    match = _CKPT_NAME.search(path.name)
    if not match:
      raise ConfigError(f"--checkpoint {path} is not a checkpoint directory (ckpt-NNN).")
    sim, _ = checkpoint.restore(path.parent, template, step=int(match.group(1)))
    return sim.agent_state, str(path)
  try:
    sim, manifest = checkpoint.restore(Path(run_dir) / "checkpoints", template)
    return sim.agent_state, f"step {manifest['step']}"
  except checkpoint.NoCheckpointError:
    if not allow_untrained:
      raise checkpoint.NoCheckpointError(
          f"no checkpoint in {Path(run_dir) / 'checkpoints'}: nothing trained to show. Train "
          "first, or pass --allow-untrained to record a freshly initialised policy.") from None
    return template.agent_state, "untrained"


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
  return make_host_env(run.env, run.max_length, run.normalize_ranges, "rgb_array")


def play(exp: Experiment, agent, agent_state, num_episodes: int, seed: int):
  """Plays one episode in each of ``num_episodes`` envs with the policy's mode.

  The agent acts for the batch size it was built for; recorded envs fill it cyclically.
  """
  envs = [render_env(exp) for _ in range(num_episodes)]
  batch = exp.run.num_envs
  fill = np.arange(batch) % num_episodes
  act = jax.jit(agent.act, static_argnums=3)
  track = jax.jit(agent.track)
  obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
  frames = [[env.render()] for env in envs]
  returns, lengths = np.zeros(num_episodes), np.zeros(num_episodes, int)
  running = np.ones(num_episodes, bool)
  key = jax.random.key(seed)
  while running.any():
    key, act_key = jax.random.split(key)
    action, extras = act(agent_state, jnp.asarray(obs[fill]), act_key, True)
    action = np.asarray(action)
    next_obs, rewards = obs.copy(), np.zeros(num_episodes, np.float32)
    ended = np.zeros(num_episodes, bool)
    for i in np.flatnonzero(running):
      o, r, term, trunc, _ = envs[i].step(action[i])
      next_obs[i], rewards[i], ended[i] = o, r, term or trunc
      returns[i] += r
      lengths[i] += 1
      frames[i].append(envs[i].render())
    transition = Transition(jnp.asarray(obs[fill]), action, jnp.asarray(rewards[fill]),
                            jnp.asarray(ended[fill]), jnp.zeros(batch, bool),
                            jnp.asarray(next_obs[fill]), extras)
    agent_state = track(agent_state, transition)
    running &= ~ended
    obs = next_obs
  fps = envs[0].metadata.get("render_fps", 30)
  for env in envs:
    env.close()
  return frames, returns, lengths, fps


def visualize(run_dir, outdir, *, num_episodes: int = 1, checkpoint_path: str | None = None,
              allow_untrained: bool = False, seed: int = 0) -> dict[str, Any]:
  import imageio.v2 as imageio

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
    imageio.mimsave(video, clip, fps=fps, macro_block_size=1)
    episodes.append({"index": i, "return": float(returns[i]), "length": int(lengths[i]),
                     "video": str(video)})
  result = {"run": str(run_dir), "config": exp.name, "checkpoint": source,
            "episodes": episodes, "mean_return": float(np.mean(returns)),
            "mean_length": float(np.mean(lengths))}
  (outdir / "episodes.json").write_text(json.dumps(result, indent=2))
  return result
