"""``batchrl export``: the policy of a ``batchrl train`` run directory as a file that runs
without batchrl (``batchrl.export`` says what is in it).

Loads the run as ``batchrl visualize`` does (``config.yaml``, the latest good checkpoint or
the one asked for), builds its model, and exports its deterministic act. Runs on the
gymnasium backend trained behind the Batch PPO wrapper stack (``train.build.make_host_env``):
its stateless maps are folded into the file, so it takes the Gymnasium env's own
observations and returns the action the env itself takes: bounded observations mapped to
[-1, 1] (``RangeNormalize``), float actions clipped (``ClipAction``) and mapped back to the
env's range. Runs with ``run.atari`` or ``run.preprocessing`` (stacks with state, frames
stacked) are exported as their model sees the env: observations after all of it, actions
before the wrappers; ``batchrl export`` says so.
"""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Callable

import gymnasium as gym
import jax.numpy as jnp
import numpy as np

from batchrl import checkpoint
from batchrl.configs import RunConfig
from batchrl.envs.wrappers import ClipAction, RangeNormalize
from batchrl.errors import UserInputError
from batchrl.export import Policy, check_format, export_policy, model_policy
from batchrl.train.build import build_env, build_model, close_env, make_host_env
from batchrl.visualize import load_agent_state, load_experiment, not_a_run_hint

log = logging.getLogger("batchrl")


def export_run(run_dir, out, *, step: int | None = None, format: str = "onnx",
               seed_index: int | None = None) -> tuple[Path, str]:
  """Writes the policy of the run in ``run_dir`` (its checkpoint at ``step``, else the
  latest good one) to ``out``; returns ``(path, which checkpoint)``. A run trained with
  ``--seeds K`` holds K agents: ``seed_index`` picks one (default 0)."""
  check_format(format)
  run_dir = Path(run_dir)
  if not run_dir.is_dir():
    raise UserInputError(f"{run_dir} is not a directory: {not_a_run_hint(run_dir)}")
  exp = load_experiment(run_dir)
  model = build_model(exp)
  state, source = load_agent_state(exp, run_dir, model, _checkpoint_path(run_dir, step),
                                   allow_untrained=False, seed=0, seed_index=seed_index)
  source = source if step is None else f"step {step}"
  space = _observation_space(exp.run)
  policy = model_policy(model, state, space)
  if exp.run.atari or exp.run.preprocessing:
    log.warning("This run preprocesses observations before its model sees them (%s): the "
                "exported policy takes observations and returns actions as its model sees "
                "them, after the env's wrappers and that preprocessing.",
                "run.atari" if exp.run.atari else "run.preprocessing")
  elif exp.run.backend in ("gymnasium", "envpool"):  # EnvPool's maps: the same stack's
    policy = _fold_env_maps(policy, exp.run)
  return export_policy(policy, out, format), source


def _checkpoint_path(run_dir: Path, step: int | None) -> str | None:
  """The checkpoint directory of ``step`` (None: the latest good one, found on restore)."""
  if step is None:
    return None
  found = {c.step: c.path for c in checkpoint.list_checkpoints(run_dir / "checkpoints")}
  if step not in found:
    steps = ", ".join(str(s) for s in sorted(found)) or "none"
    raise UserInputError(f"--checkpoint {step}: no checkpoint at that step in "
                         f"{run_dir / 'checkpoints'} (steps there: {steps}).")
  return str(found[step])


def _observation_space(run: RunConfig) -> gym.Space:
  """One env's observation space as the model sees it (a single env, no worker process)."""
  env = build_env(dataclasses.replace(run, num_envs=1, num_workers=0))
  try:
    return env.single_observation_space
  finally:
    close_env(env)


def _fold_env_maps(policy: Policy, run: RunConfig) -> Policy:
  """``policy`` for the raw Gymnasium env: the observation and action maps of the run's
  stateless wrappers around it, innermost observation map first, outermost action map
  first (as a step passes through the stack)."""
  try:
    env = make_host_env(run.env, run.max_length, run.normalize_ranges,
                        env_kwargs=run.make_kwargs())
  except UserInputError as error:  # an EnvPool task Gymnasium lacks: its maps are unknown
    log.warning("The exported policy takes observations and returns actions as the model "
                "sees them (the env's range maps not folded in: %s).", error)
    return policy
  try:
    obs_maps, action_maps, raw_space = _wrapper_maps(env)
  finally:
    env.close()
  if not obs_maps and not action_maps:
    return policy
  act = policy.act

  def folded(states):
    for fn in reversed(obs_maps):
      states = fn(states)
    actions = act(states)
    for fn in action_maps:
      actions = fn(actions)
    return actions

  name, _, dtype = policy.inputs[0]
  inputs = ((name, tuple(raw_space.shape), dtype),) if not policy.named else policy.inputs
  return dataclasses.replace(policy, act=folded, inputs=inputs)


def _wrapper_maps(env: gym.Env) -> tuple[list[Callable], list[Callable], gym.Space]:
  """``(observation maps, action maps, raw observation space)`` of ``env``'s wrappers, from
  the outermost in."""
  obs_maps, action_maps = [], []
  layer = env
  while isinstance(layer, gym.Wrapper):
    if isinstance(layer, ClipAction):
      space = layer.env.action_space
      action_maps.append(lambda a, lo=space.low, hi=space.high: jnp.clip(a, lo, hi))
    elif isinstance(layer, RangeNormalize):
      inner = layer.env
      if layer._observ_mask is not None:  # our own wrapper's record of what it rescales
        obs_maps.append(_unit_map(inner.observation_space, layer._observ_mask))
      if layer._action_mask is not None:
        action_maps.append(_real_map(inner.action_space, layer._action_mask))
    layer = layer.env
  return obs_maps, action_maps, env.unwrapped.observation_space


def _unit_map(space: gym.spaces.Box, mask: np.ndarray) -> Callable:
  """Bounded elements of ``space`` to [-1, 1] (``RangeNormalize``'s observation map)."""
  low = np.where(mask, space.low, 0.0).astype(np.float32)
  width = np.where(mask, space.high - space.low, 2.0).astype(np.float32)
  return lambda x: jnp.where(mask, 2.0 * (x - low) / width - 1.0, x).astype(jnp.float32)


def _real_map(space: gym.spaces.Box, mask: np.ndarray) -> Callable:
  """Actions in [-1, 1] to ``space``'s range where ``mask`` (``RangeNormalize``'s action map)."""
  low = np.where(mask, space.low, 0.0).astype(np.float32)
  width = np.where(mask, space.high - space.low, 2.0).astype(np.float32)
  return lambda a: jnp.where(mask, low + (a + 1.0) * width / 2.0, a).astype(jnp.float32)
