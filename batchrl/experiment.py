"""Runs a named experiment: builds env and agent, alternates train/eval phases, logs, checkpoints.

A run directory holds ``config.yaml`` (written before training starts), ``metrics.jsonl``,
TensorBoard events and ``checkpoints/``. Starting a run whose directory already has a
config resumes it from its latest good checkpoint. Resume is exact for the ``gymnax``
backend (the environment state is part of the checkpoint); with host environments the
agent state is restored exactly and the environments start new episodes.
"""
from __future__ import annotations

import functools
import logging
import math
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from batchrl import checkpoint, simulation
from batchrl.configs import Experiment, RunConfig
from batchrl.configclass import ConfigError
from batchrl.errors import UserInputError

log = logging.getLogger("batchrl")

CONFIG_FILE = "config.yaml"


# --------------------------------------------------------------------------- building


def make_host_env(env_id: str, max_length: int | None, normalize_ranges: bool,
                  render_mode: str | None = None):
  """One Gymnasium env with the Batch PPO wrapper stack (module level: picklable by spawn)."""
  from batchrl.envs.core import make_gym
  from batchrl.envs.wrappers import batch_ppo_stack

  kwargs = {} if render_mode is None else {"render_mode": render_mode}
  return batch_ppo_stack(make_gym(env_id, **kwargs), max_length, normalize_ranges)


def build_env(run: RunConfig, restart=None):
  """The batched in-graph env of a run: a gymnax ``VecEnv`` or an ``InGraphBatchEnv``
  (``restart``: the host ``BatchEnv``'s ``RestartPolicy``, None = failures raise)."""
  if run.backend == "gymnax":
    from batchrl.envs.jax_env import make_vec
    overrides = {} if run.max_length is None else {"max_steps_in_episode": run.max_length}
    return make_vec(run.env, run.num_envs, **overrides)
  from batchrl.envs.batch import BatchEnv
  from batchrl.envs.ingraph import InGraphBatchEnv
  constructor = functools.partial(make_host_env, run.env, run.max_length, run.normalize_ranges)
  workers = min(run.num_workers, run.num_envs)
  host = BatchEnv([constructor] * run.num_envs, num_workers=workers, seed=run.seed,
                  timeout=run.timeout, restart=restart)
  return InGraphBatchEnv(host)


def close_env(env) -> None:
  host = getattr(env, "batch_env", None)
  if host is not None:
    host.close()


def build_agent(exp: Experiment):
  """The experiment's ``Model``, from its agent type and config."""
  from batchrl.configs import agent_model
  return agent_model(exp.agent).make(exp.config)


def check_env(run: RunConfig) -> None:
  """Builds one environment of the run here, before any run directory or worker process
  exists, so a wrong id or a missing extra is a one-line ``UserInputError``."""
  import dataclasses
  if run.backend == "gymnax":
    build_env(dataclasses.replace(run, num_envs=1))
  else:
    make_host_env(run.env, run.max_length, run.normalize_ranges).close()


def eval_steps(run: RunConfig, env) -> int:
  if run.eval_steps is not None:
    return run.eval_steps
  limit = run.max_length or getattr(env, "max_episode_steps", None)
  if limit is None:
    raise ConfigError(f"run.eval_steps is None and {run.env} has no known episode limit; "
                      "set run.eval_steps or run.max_length.")
  return int(limit)


# --------------------------------------------------------------------------- schedule


def schedule(run: RunConfig, steps_per_iteration: int) -> dict[str, int]:
  """Iteration counts for the budget and the report/eval/checkpoint cadence."""
  per = steps_per_iteration
  every = lambda steps: max(1, math.ceil(steps / per))  # noqa: E731
  report = every(run.report_every)
  # Whole reports only: every chunk has the same length, so it compiles once.
  total = math.ceil(every(run.steps) / report) * report
  return {"total": total, "report": report,
          "eval": every(run.eval_every) if run.eval_every else 0,
          "checkpoint": every(run.checkpoint_every) if run.checkpoint_every else 0}


def _due(before: int, after: int, every: int, final: bool) -> bool:
  """Whether a multiple of ``every`` iterations was reached in ``(before, after]``."""
  return final or (every > 0 and before // every != after // every)


# --------------------------------------------------------------------------- metrics


def _episode_weighted(means, episodes) -> float:
  """Mean of per-iteration means weighted by their episode counts (NaN when no episodes)."""
  means, episodes = np.asarray(means, np.float64), np.asarray(episodes, np.float64)
  w = np.where(np.isnan(means), 0.0, episodes)
  return float(np.sum(np.nan_to_num(means) * w) / w.sum()) if w.sum() else math.nan


def summarize(infos: dict) -> dict[str, float]:
  """Reduces stacked iteration infos ``[..., N]`` to one report: scores weighted by episodes."""
  infos = jax.device_get(infos)
  out = {}
  for name, value in infos.items():
    value = np.asarray(value, np.float64)
    if name in ("mean_score", "mean_length"):
      out[name] = _episode_weighted(value, infos["episodes"])
    elif name == "episodes":
      out[name] = float(np.sum(value))
    else:
      out[name] = nan_mean(value[..., -1])  # the latest update's value
  return out


def nan_mean(values) -> float:
  """The mean of the non-NaN values; NaN, without numpy's empty-slice warning, when there
  are none (no episode finished in the window, or a metric no update has written yet)."""
  values = np.asarray(values, np.float64)
  values = values[~np.isnan(values)]
  return float(values.mean()) if values.size else math.nan


def per_seed_scores(infos: dict) -> list[float]:
  """Mean score per seed for a vmapped run (infos ``[S, N]``)."""
  infos = jax.device_get(infos)
  return [_episode_weighted(s, e) for s, e in zip(infos["mean_score"], infos["episodes"])]


# --------------------------------------------------------------------------- run directory


def run_directory(logdir, name: str, timestamp: str | None) -> Path:
  stamp = timestamp or time.strftime("%Y%m%dT%H%M%S")
  return Path(logdir) / f"{stamp}-{name}"


def prepare_run(run_dir: Path, exp: Experiment, overrides: list[str]) -> tuple[Experiment, bool]:
  """Writes the config of a new run, or loads the one of an existing run (resume).

  Returns the experiment to run and whether this is a resume. Resuming with overrides that
  change the saved config is refused: the run would no longer be the one it says it is.
  """
  from batchrl.configs import apply_overrides
  from batchrl.configclass import atomic_write_text
  import yaml

  path = run_dir / CONFIG_FILE
  if run_dir.exists() and not run_dir.is_dir():
    raise UserInputError(f"{run_dir} exists and is not a directory.")
  if path.exists():
    saved = Experiment.from_dict(yaml.safe_load(path.read_text()))
    if overrides and apply_overrides(saved, overrides) != saved:
      raise ConfigError(f"{run_dir} is an existing run; its config cannot be changed on "
                        f"resume (got --set {' '.join(overrides)}). Start a new run "
                        "(another --timestamp) instead.")
    return saved, True
  try:
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, yaml.safe_dump(exp.to_dict(), sort_keys=False))
  except OSError as e:
    raise UserInputError(f"cannot write the run directory {run_dir}: {e.strerror}; give a "
                         "--logdir you can write to.") from None
  return exp, False


def remove_new_run(run_dir: Path) -> bool:
  """Deletes a run directory this invocation created if it holds no checkpoint yet (a run
  that failed on bad input leaves nothing behind); returns whether it did."""
  import shutil
  if checkpoint.latest_step(Path(run_dir) / "checkpoints") is not None:
    return False
  shutil.rmtree(run_dir, ignore_errors=True)
  return True


# --------------------------------------------------------------------------- training


def check_seeds(exp: Experiment, seeds: int | None) -> None:
  """``--seeds`` needs in-graph environments: checked before a run directory is made."""
  if seeds is None:
    return
  if not isinstance(seeds, int) or seeds < 1:
    raise ConfigError(f"--seeds must be a positive int, got {seeds!r}.")
  if exp.run.backend != "gymnax":
    raise ConfigError("--seeds trains several agents in one compiled program and needs "
                      f"in-graph environments (run.backend='gymnax'); {exp.name!r} uses "
                      f"backend {exp.run.backend!r}.")


def _per_seed(scores) -> dict[str, float]:
  return {f"seed{i}/mean_score": float(x) for i, x in enumerate(scores)}


class Trainer:
  """Compiled pieces of one run and the loop that alternates them (train, eval, save)."""

  def __init__(self, exp: Experiment, run_dir: Path, *, seeds: int | None = None):
    from batchrl.train import fused

    check_seeds(exp, seeds)
    self.exp, self.run_dir, self.seeds = exp, Path(run_dir), seeds
    self.env = build_env(exp.run)
    self.agent = build_agent(exp)
    self.steps_per_iteration = exp.run.num_envs * self.agent.period
    self.plan = schedule(exp.run, self.steps_per_iteration)
    self.run_chunk = fused.make_run_chunk(self.env, self.agent, num_seeds=seeds)
    # evaluation, restarts and summaries run for a moment: compiled without optimization
    evaluate = fused.make_evaluate(self.env, self.agent, eval_steps(exp.run, self.env))
    self.evaluate = fused.jit(jax.vmap(evaluate) if seeds else evaluate, "once")
    self.restart = fused.jit(functools.partial(simulation.restart, self.env), "once")
    summarize = self.agent.summarize or (lambda state: {"scalars": {}, "histograms": {}})
    first = (lambda state: jax.tree.map(lambda x: x[0], state)) if seeds else (lambda s: s)
    self.summarize = fused.jit(lambda state: summarize(first(state)), "once")
    self.sim = fused.init_sim(self.env, self.agent, jax.random.key(exp.run.seed), seeds)
    self.iteration = 0

  @property
  def step(self) -> int:
    return self.iteration * self.steps_per_iteration

  def restore(self) -> bool:
    """Loads the latest good checkpoint, if any; returns whether one was loaded."""
    if not restore_checkpoint(self):
      return False
    if self.exp.run.backend != "gymnax":
      self.sim = self.restart(self.sim)  # host envs restarted: their state is not saved
    return True

  def save(self) -> None:
    save_checkpoint(self)

  def train_phase(self, iterations: int) -> dict[str, Any]:
    start = time.perf_counter()
    self.sim, infos = self.run_chunk(self.sim, iterations)
    metrics = summarize(infos)
    metrics["steps_per_second"] = iterations * self.steps_per_iteration / max(
        time.perf_counter() - start, 1e-9) * (self.seeds or 1)
    if self.seeds:
      metrics.update(_per_seed(per_seed_scores(infos)))
    return metrics

  def eval_phase(self) -> dict[str, Any]:
    stats = jax.device_get(self.evaluate(self.sim))
    if self.exp.run.backend != "gymnax":
      self.sim = self.restart(self.sim)  # evaluation used the same host envs
    metrics = {k: nan_mean(v) for k, v in stats.items()}
    if self.seeds:
      metrics.update(_per_seed(np.asarray(stats["mean_score"])))
    return metrics

  def close(self) -> None:
    close_env(self.env)


def restore_checkpoint(trainer) -> bool:
  """Loads the latest good checkpoint of ``trainer.run_dir`` into ``trainer.sim`` and
  ``trainer.iteration`` (any trainer: local or distributed); whether there was one."""
  ckpt_dir = trainer.run_dir / "checkpoints"
  if checkpoint.latest_step(ckpt_dir) is None:
    return False
  trainer.sim, manifest = checkpoint.restore(ckpt_dir, trainer.sim)
  trainer.iteration = int(manifest["counters"]["iteration"])
  log.info("Resumed %s at step %d (iteration %d).", trainer.run_dir, trainer.step,
           trainer.iteration)
  return True


def save_checkpoint(trainer) -> None:
  """Checkpoints ``trainer.sim`` at ``trainer.step`` with the config and counters."""
  checkpoint.save(trainer.run_dir / "checkpoints", trainer.step, trainer.sim,
                  config=trainer.exp.to_dict(), keep=trainer.exp.run.keep_checkpoints,
                  counters={"iteration": trainer.iteration, "steps": trainer.step})


def train(exp: Experiment, run_dir: Path, *, seeds: int | None = None,
          progress: bool = True, use_tensorboard: bool = True,
          ray: "RayOptions | None" = None) -> dict[str, Any]:
  """Trains (or resumes) the run in ``run_dir``; returns the last eval metrics.

  With ``ray`` (``batchrl.distributed.RayOptions``) the envs are stepped by Ray actors and
  this process is the learner; reports, evaluations and checkpoints are the same.
  """
  if ray is not None:
    from batchrl import distributed
    with distributed.trainer_on_ray(exp, run_dir, ray, seeds) as trainer:
      return _loop(trainer, progress, use_tensorboard)
  trainer = Trainer(exp, run_dir, seeds=seeds)
  try:
    return _loop(trainer, progress, use_tensorboard)
  finally:
    trainer.close()


def _loop(trainer, progress: bool, use_tensorboard: bool) -> dict[str, Any]:
  """Alternates train phases with evaluations and checkpoints until the budget is spent."""
  from batchrl.logging import Progress, RunLogger

  trainer.restore()
  plan, run_dir = trainer.plan, trainer.run_dir
  if trainer.iteration >= plan["total"]:
    log.info("%s is already complete (step %d); nothing to train.", run_dir, trainer.step)
    return {}
  logger = RunLogger(run_dir, use_tensorboard, resume_step=trainer.step)
  bar = Progress(plan["total"] * trainer.steps_per_iteration, initial=trainer.step,
                 enabled=progress)
  last_eval: dict[str, Any] = {}
  with logger:
    while trainer.iteration < plan["total"]:
      before = trainer.iteration
      metrics = trainer.train_phase(plan["report"])
      trainer.iteration += plan["report"]
      final = trainer.iteration >= plan["total"]
      _log(logger, bar, trainer.step, "train", metrics)
      _log_summaries(logger, trainer.step, trainer.summarize(trainer.sim.agent_state))
      if _due(before, trainer.iteration, plan["eval"], final):
        last_eval = trainer.eval_phase()
        _log(logger, bar, trainer.step, "eval", last_eval)
      if _due(before, trainer.iteration, plan["checkpoint"], final):
        trainer.save()
  bar.close()
  return last_eval


def _log_summaries(logger, step: int, summary: dict) -> None:
  """The agent's own TensorBoard material (first seed when training several)."""
  summary = jax.device_get(summary)
  logger.scalars("train", step, {k: float(v) for k, v in summary["scalars"].items()})
  logger.histograms("train", step, summary["histograms"])


def _log(logger, bar, step: int, phase: str, metrics: dict[str, Any]) -> None:
  logger.report(step, phase, metrics)
  logger.scalars(phase, step, {k: v for k, v in metrics.items()
                               if np.isscalar(v) and not isinstance(v, str)})
  logger.texts(phase, step, {k: v for k, v in metrics.items() if isinstance(v, str)})
  bar.update(step, phase=_bar_label(phase, metrics), score=metrics.get("mean_score"))


def _bar_label(phase: str, metrics: dict[str, Any]) -> str:
  """The phase, and for distributed runs the runners' throughput and the parameter lag."""
  rates = [v for k, v in metrics.items() if k.startswith("runner") and
           k.endswith("/steps_per_second")]
  if not rates:
    return phase
  return (f"{phase} [{len(rates)} runners {min(rates):,.0f}-{max(rates):,.0f} steps/s, "
          f"lag {metrics.get('param_lag', 0):g}]")
