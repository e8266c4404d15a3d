"""``run``: the loop that drives any ``Trainer`` through its budget, logging as it goes.

Train phases (``plan["report"]`` iterations, to the next multiple of it after a resume from
a stop, and the budget's last what is left of it) alternate with evaluations and
checkpoints at the plan's cadence; every report goes to ``metrics.jsonl``, TensorBoard and
the progress bar. The loop starts from the trainer's
latest checkpoint, so running it again resumes. When ``stop()`` turns true (``batchrl train``:
the first Ctrl-C, see ``train.interrupt``), the trainer ends its train phase after the
compiled call under way (one update, or about ``schedule.CALL_SECONDS`` of updates of a
fused run), and the loop checkpoints there and returns. Phases end on multiples of
``plan["report"]`` (``phase_length``), so the resumed run reports, evaluates and
checkpoints at the same steps as one never stopped.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import jax
import numpy as np

from batchrl.logging import Progress, RunLogger
from batchrl.train import track as track_run
from batchrl.train.schedule import budget_note, due, phase_length
from batchrl.train.trainer import Trainer

log = logging.getLogger("batchrl")


def run(trainer: Trainer, *, progress: bool = True, use_tensorboard: bool = True,
        stop: Callable[[], bool] | None = None,
        on_eval: Callable[[int, dict], str | None] | None = None,
        track: bool | None = None) -> dict[str, Any]:
  """Trains (or resumes) until the budget is spent, or until ``stop()`` is true (then with a
  checkpoint at the step the trainer stopped at, see the module doc); returns the last eval
  metrics ({} when the run was already complete or stopped before an evaluation).

  ``on_eval(step, metrics)`` sees every evaluation before it is logged (``batchrl tune``
  reports it to its pruner); a reason it returns stops the run there, with a checkpoint, and
  is logged with that evaluation as ``stopped`` (also in the returned metrics).

  ``track`` (None: the run's ``run.track``) also logs the run to Weights & Biases
  (``batchrl.train.track``)."""
  trainer.restore()
  plan, run_dir = trainer.plan, trainer.run_dir
  if trainer.iteration >= plan["total"]:
    log.info("%s is already complete (step %d); nothing to train.", run_dir, trainer.step)
    return {}
  note = budget_note(trainer.exp.run, trainer.steps_per_iteration)
  if note:
    log.info(note)
  tracked = trainer.exp.run.track if track is None else track
  tracker = track_run.start(trainer.exp, run_dir) if tracked else None
  logger = RunLogger(run_dir, use_tensorboard, resume_step=trainer.step, tracker=tracker)
  bar = Progress(plan["total"] * trainer.steps_per_iteration, initial=trainer.step,
                 enabled=progress)
  last_eval: dict[str, Any] = {}
  # the bar is closed before anything else is printed, however the loop ends
  with logger, bar:
    while trainer.iteration < plan["total"]:
      before = trainer.iteration
      length = phase_length(plan, trainer.iteration)
      metrics = trainer.train_phase(length, progress=_mover(bar, trainer), stop=stop)
      # fewer than asked when ``stop`` ended the phase after a compiled call under way
      trainer.iteration += metrics.pop("iterations", length)
      final = trainer.iteration >= plan["total"]
      _log(logger, bar, trainer.step, "train", metrics)
      _log_summaries(logger, trainer.step, trainer.summaries())
      # asked to stop: checkpoint now, skipping an evaluation that was due (it takes time)
      stopping = not final and stop is not None and stop()
      if not stopping and due(before, trainer.iteration, plan["eval"], final):
        last_eval = _evaluate(trainer, bar)
        verdict = on_eval(trainer.step, last_eval) if on_eval is not None else None
        if verdict and not final:
          last_eval, stopping = {**last_eval, "stopped": verdict}, True
        _log(logger, bar, trainer.step, "eval", last_eval)
      logger.flush()  # the step's values as one row to a tracker, now (not at the next step)
      if stopping or due(before, trainer.iteration, plan["checkpoint"], final):
        trainer.save()
      if stopping:
        break
  return last_eval


def _mover(bar: Progress, trainer: Trainer) -> Callable[[int], None] | None:
  """What moves the bar while a train phase runs (None when there is no bar to move)."""
  if not bar.enabled:
    return None
  start, per = trainer.step, trainer.steps_per_iteration
  return lambda done: bar.update(start + done * per)


def _evaluate(trainer: Trainer, bar: Progress) -> dict[str, Any]:
  """One evaluation phase, shown in the progress bar; its wall time is ``eval_seconds``."""
  bar.update(trainer.step, phase="evaluating")
  start = time.perf_counter()
  metrics = trainer.eval_phase()
  return {**metrics, "eval_seconds": time.perf_counter() - start}


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
