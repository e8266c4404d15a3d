"""A run's environment and agent, built from its ``RunConfig`` and ``Experiment``.

Shared by every trainer: the local one (``batchrl.train.local``), the Ray learner and its
env runners (``batchrl.distributed``), and ``batchrl visualize``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import warnings

import jax

from batchrl import measured
from batchrl.agents.families import family
from batchrl.configs import Experiment, RunConfig
from batchrl.envs.atari import atari_env
from batchrl.envs.batch import BatchEnv
from batchrl.envs.checker import EnvCheckError
from batchrl.envs.checker import check_env as check_gym_env
from batchrl.envs.core import make_gym
from batchrl.envs.ingraph import InGraphBatchEnv
from batchrl.envs.jax_env import make_vec
from batchrl.envs.pool import PoolEnv, make_pool
from batchrl.envs.preprocessed import PreprocessedEnv, build_env_stack, parse_spec, processed_space
from batchrl.envs.wrappers import batch_ppo_stack
from batchrl.errors import UserInputError
from batchrl.specs import EnvSpec
from batchrl.train import host_update


def make_host_env(env_id: str, max_length: int | None, normalize_ranges: bool,
                  render_mode: str | None = None, atari: bool = False,
                  env_kwargs: dict | None = None):
  """One Gymnasium env with the Batch PPO wrapper stack, or with the Atari wrappers
  (``batchrl.envs.atari``) when ``atari`` (module level: picklable by spawn).
  ``env_kwargs``: keyword arguments of ``gymnasium.make`` (``RunConfig.make_kwargs()``)."""
  if atari:
    return atari_env(env_id, max_length, render_mode)
  kwargs = dict(env_kwargs or {}, **({} if render_mode is None else {"render_mode": render_mode}))
  return batch_ppo_stack(make_gym(env_id, **kwargs), max_length, normalize_ranges)


def build_env(run: RunConfig, restart=None, lanes: int | None = None):
  """The batched in-graph env of a run: a gymnax ``VecEnv`` or an ``InGraphBatchEnv``
  (``restart``: the host ``BatchEnv``'s ``RestartPolicy``, None = failures raise).
  ``lanes``: host envs only, ``lanes`` independent batches of ``run.num_envs`` envs stepped
  together under ``vmap`` (``InGraphBatchEnv``'s lanes: the seeds of a host run in one
  program); None: one batch, not under ``vmap``."""
  if lanes is not None and run.backend != "gymnasium":
    raise ValueError(f"lanes are for host envs (backend 'gymnasium'), not {run.backend!r}.")
  if run.backend == "gymnax":
    overrides = {} if run.max_length is None else {"max_steps_in_episode": run.max_length}
    return preprocess(make_vec(run.env, run.num_envs, **overrides), run)
  if run.backend == "envpool":
    return preprocess(pool_env(run), run)
  constructor = functools.partial(make_host_env, run.env, run.max_length, run.normalize_ranges,
                                  atari=run.atari, env_kwargs=run.make_kwargs())
  total = run.num_envs * (lanes or 1)
  workers = min(run.num_workers, total)
  # infos=False: the in-graph env reads only final observations from them
  host = BatchEnv([constructor] * total, num_workers=workers, seed=run.seed,
                  timeout=run.timeout, restart=restart, infos=False)
  return preprocess(InGraphBatchEnv(host, lanes=lanes), run)


def pool_env(run: RunConfig) -> PoolEnv:
  """The run's EnvPool envs as an in-graph env (``run.backend='envpool'``)."""
  pool = make_pool(run.env, run.num_envs, run.seed, run.max_length, run.atari)
  return PoolEnv(pool, run.normalize_ranges, run.atari)


def preprocess(env, run: RunConfig):
  """``env`` behind ``run.preprocessing`` (and the Atari score channel), when there is any."""
  if not run.atari and run.preprocessing is None:
    return env
  spec = parse_spec(run.preprocessing)
  return PreprocessedEnv(env, build_env_stack(spec, env.single_observation_space))


def close_env(env) -> None:
  """Stops the worker processes behind ``env`` (host envs) or EnvPool's threads (envpool
  runs: a ``PoolEnv``, preprocessed or not); nothing for gymnax envs."""
  host = getattr(env, "batch_env", None)
  if host is not None:
    host.close()
  pool = getattr(getattr(env, "env", env), "pool", None)
  if pool is not None:
    pool.close()


def build_model(exp: Experiment):
  """The experiment's ``Model``, from its agent's family and config, its update scheduled
  as the drivers run it (``host_update.schedule``: from the host, where it asks for that)."""
  return host_update.schedule(family(exp.agent).make(exp.config))


def agent_spaces(run: RunConfig) -> tuple:
  """``(observation space, action space)`` of one env as the agent sees it (after
  ``run.preprocessing``), from one env built here and closed."""
  if run.backend in ("gymnax", "envpool"):
    env = build_env(dataclasses.replace(run, num_envs=1))
    return env.single_observation_space, env.single_action_space
  env = make_host_env(run.env, run.max_length, run.normalize_ranges, atari=run.atari,
                      env_kwargs=run.make_kwargs())
  try:
    if run.atari or run.preprocessing is not None:
      stack = build_env_stack(parse_spec(run.preprocessing), env.observation_space)
      return processed_space(stack), env.action_space
    return env.observation_space, env.action_space
  finally:
    env.close()


def check_env(run: RunConfig, exp: Experiment | None = None) -> None:
  """Builds one environment of the run here, before any run directory or worker process
  exists, so a wrong id, a missing extra or a bad ``run.preprocessing`` is a one-line
  ``UserInputError``; with ``exp``, also that its agent fits the run (``check_agent``).
  A user's own env (a ``module:EnvId`` id) passes ``batchrl.envs.check_env`` first."""
  if run.backend == "gymnasium" and ":" in run.env:
    check_user_env(run)
  spaces = agent_spaces(run)
  if exp is not None:
    check_agent(exp, spaces, run.num_envs)


def check_user_env(run: RunConfig) -> None:
  """``batchrl.envs.check_env`` on one env of the run as its constructor makes it (before
  the wrappers): its problems, each with what to fix, are a ``UserInputError``."""
  env = make_gym(run.env, **run.make_kwargs())
  try:
    with warnings.catch_warnings():  # Gymnasium's checker warns of what this one reports
      warnings.simplefilter("ignore")
      check_gym_env(env, seed=run.seed)
  except EnvCheckError as e:
    raise UserInputError(f"{e}\n(run.env {run.env!r}: fix the env, then train again)") \
        from None
  finally:
    env.close()


def check_agent(exp: Experiment, spaces: tuple, num_envs: int) -> None:
  """Whether ``exp``'s agent can start on ``num_envs`` envs of ``spaces`` (observation and
  action space as the agent sees them): its ``init`` traced with ``jax.eval_shape``, so
  nothing is compiled or run, and what an agent refuses there (PQN: continuous actions,
  minibatches that do not divide its rollout; any agent: a network that does not fit the
  observations) is a ``UserInputError`` before the run starts, not after its directory
  exists. An agent that refuses the spaces themselves (DQN given float actions, TD3 given
  discrete ones) raises a plain ``TypeError`` or ``ValueError`` from deep in its networks:
  here that is the user's choice of agent and env, so it becomes one line naming both, as
  ``Agent.create`` reports it."""
  model = build_model(exp)
  spec = EnvSpec(spaces[0], spaces[1], num_envs)
  try:
    jax.eval_shape(lambda key: model.init(key, spec), jax.random.key(0))
  except UserInputError:
    raise
  except (TypeError, ValueError) as e:
    raise UserInputError(f"agent {exp.agent!r} (config {exp.name!r}) cannot train on "
                         f"{exp.run.env!r}: {e}") from e


_NO_CAP = 2**31 - 1  # an int32 count no evaluation reaches


def eval_steps(run: RunConfig, env) -> int:
  """Steps of one evaluation at most: ``run.eval_steps``, else the episode limit of the run
  or env; an env without one is capped by ``eval_cap`` alone (the training before it)."""
  if run.eval_steps is not None:
    return run.eval_steps
  limit = run.max_length or getattr(env, "max_episode_steps", None)
  return _NO_CAP if limit is None else int(limit)


def eval_cap(run: RunConfig, trained_steps: int) -> int:
  """Steps per env an evaluation after ``trained_steps`` training steps may take: with the
  default ``eval_steps`` (None), as many as the training before it over all envs, so a
  default evaluation never outlasts the training it measures by more than its acts cost;
  a given ``run.eval_steps`` is the cap as given (whole episodes after a short run). Before
  any training (a trainer driven by hand) only the episode limit caps it."""
  if run.eval_steps is not None:
    return run.eval_steps
  if trained_steps <= 0:
    return _NO_CAP
  return max(1, math.ceil(trained_steps / run.num_envs))


def chunk_kind(run: RunConfig) -> str:
  """How a run's training chunk is compiled (``programs.jit``'s kinds): ``"long"`` for
  host-env runs of ``measured.LONG_HOST_STEPS`` steps or more (minutes, each step crossing to
  Python); ``"loop"`` (the faster compile) for fused runs, where compiling is a large share
  of the run, and for short runs (tests)."""
  long_run = run.backend != "gymnax" and run.steps >= measured.LONG_HOST_STEPS
  return "long" if long_run else "loop"


def eval_kind(env, run: RunConfig) -> str:
  """How an evaluation is compiled (``programs.jit``'s kinds): ``"loop"`` (optimized) for
  image observations, where a convolutional policy unoptimized runs several times slower
  than it compiles, and for runs whose evaluations step their envs
  ``measured.LOOP_EVAL_STEPS`` times or more in all; ``"once"`` (compiled fast, run for a
  moment) for the rest."""
  if len(env.single_observation_space.shape or ()) >= 3:
    return "loop"
  return "loop" if planned_eval_steps(run, env) >= measured.LOOP_EVAL_STEPS else "once"


def planned_eval_steps(run: RunConfig, env) -> int:
  """Steps per env the run's evaluations may take in all, at most: each one's cap
  (``eval_cap`` after the training before it, within ``eval_steps``), the final one
  included."""
  times = list(range(run.eval_every, run.steps, run.eval_every)) if run.eval_every else []
  limit = eval_steps(run, env)
  return sum(min(limit, eval_cap(run, trained)) for trained in [*times, run.steps])
