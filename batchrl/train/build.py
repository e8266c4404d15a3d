"""A run's environment and agent, built from its ``RunConfig`` and ``Experiment``.

Shared by every trainer: the local one (``batchrl.train.local``), the Ray learner and its
env runners (``batchrl.distributed``), and ``batchrl visualize``.
"""
from __future__ import annotations

import dataclasses
import functools

from batchrl.agents.families import family
from batchrl.configclass import ConfigError
from batchrl.configs import Experiment, RunConfig
from batchrl.envs.batch import BatchEnv
from batchrl.envs.core import make_gym
from batchrl.envs.ingraph import InGraphBatchEnv
from batchrl.envs.jax_env import make_vec
from batchrl.envs.wrappers import batch_ppo_stack


def make_host_env(env_id: str, max_length: int | None, normalize_ranges: bool,
                  render_mode: str | None = None):
  """One Gymnasium env with the Batch PPO wrapper stack (module level: picklable by spawn)."""
  kwargs = {} if render_mode is None else {"render_mode": render_mode}
  return batch_ppo_stack(make_gym(env_id, **kwargs), max_length, normalize_ranges)


def build_env(run: RunConfig, restart=None):
  """The batched in-graph env of a run: a gymnax ``VecEnv`` or an ``InGraphBatchEnv``
  (``restart``: the host ``BatchEnv``'s ``RestartPolicy``, None = failures raise)."""
  if run.backend == "gymnax":
    overrides = {} if run.max_length is None else {"max_steps_in_episode": run.max_length}
    return make_vec(run.env, run.num_envs, **overrides)
  constructor = functools.partial(make_host_env, run.env, run.max_length, run.normalize_ranges)
  workers = min(run.num_workers, run.num_envs)
  host = BatchEnv([constructor] * run.num_envs, num_workers=workers, seed=run.seed,
                  timeout=run.timeout, restart=restart)
  return InGraphBatchEnv(host)


def close_env(env) -> None:
  """Stops the worker processes behind ``env`` (host envs); nothing for in-graph envs."""
  host = getattr(env, "batch_env", None)
  if host is not None:
    host.close()


def build_model(exp: Experiment):
  """The experiment's ``Model``, from its agent's family and config."""
  return family(exp.agent).make(exp.config)


def check_env(run: RunConfig) -> None:
  """Builds one environment of the run here, before any run directory or worker process
  exists, so a wrong id or a missing extra is a one-line ``UserInputError``."""
  if run.backend == "gymnax":
    build_env(dataclasses.replace(run, num_envs=1))
  else:
    make_host_env(run.env, run.max_length, run.normalize_ranges).close()


def eval_steps(run: RunConfig, env) -> int:
  """Steps of one evaluation: ``run.eval_steps``, else the episode limit of the run or env."""
  if run.eval_steps is not None:
    return run.eval_steps
  limit = run.max_length or getattr(env, "max_episode_steps", None)
  if limit is None:
    raise ConfigError(f"run.eval_steps is None and {run.env} has no known episode limit; "
                      "set run.eval_steps or run.max_length.")
  return int(limit)
