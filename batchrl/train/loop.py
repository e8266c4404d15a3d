"""``run``: the loop that drives any ``Trainer`` through its budget, logging as it goes.

Train phases of ``plan["report"]`` iterations alternate with evaluations and checkpoints at
the plan's cadence; every report goes to ``metrics.jsonl``, TensorBoard and the progress
bar. The loop starts from the trainer's latest checkpoint, so running it again resumes.
"""
from __future__ import annotations

import logging
from typing import Any

import jax
import numpy as np

from batchrl.logging import Progress, RunLogger
from batchrl.train.schedule import due
from batchrl.train.trainer import Trainer

log = logging.getLogger("batchrl")


def run(trainer: Trainer, *, progress: bool = True,
        use_tensorboard: bool = True) -> dict[str, Any]:
  """Trains (or resumes) until the budget is spent; returns the last eval metrics ({} when
  the run was already complete)."""
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
      _log_summaries(logger, trainer.step, trainer.summaries())
      if due(before, trainer.iteration, plan["eval"], final):
        last_eval = trainer.eval_phase()
        _log(logger, bar, trainer.step, "eval", last_eval)
      if due(before, trainer.iteration, plan["checkpoint"], final):
        trainer.save()
  bar.close()
  return last_eval


def _log_summaries(logger: RunLogger, step: int, summary: dict) -> None:
  """The agent's own TensorBoard material (first seed when training several)."""
  summary = jax.device_get(summary)
  logger.scalars("train", step, {k: float(v) for k, v in summary["scalars"].items()})
  logger.histograms("train", step, summary["histograms"])


def _log(logger: RunLogger, bar: Progress, step: int, phase: str,
         metrics: dict[str, Any]) -> None:
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
