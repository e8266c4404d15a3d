"""One trial of a search: its values applied to the config, trained as a normal run.

A trial's run directory is ``trials/<number>/`` (``config.yaml``, ``metrics.jsonl``,
TensorBoard, checkpoints), trained by the same ``LocalTrainer`` and loop as ``batchrl train``.
Each evaluation's metric is reported to Optuna; when the pruner says the trial is hopeless
the loop stops after that evaluation, whose record in ``metrics.jsonl`` says
``"stopped": "pruned ..."``. With several seeds per trial, a gymnax config trains them in one
compiled program (its evaluations are the mean over seeds); host configs train them one
after another in ``trials/<number>/seed<k>/``, reported at steps offset by the budget so
every trial reports at the same steps. With ``runners`` (``--runners N``) a host trial steps
its envs in N Ray runner actors, as ``batchrl train --ray`` does (``batchrl.distributed``),
on the Ray instance the search is connected to.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
from pathlib import Path
from typing import Callable, ContextManager

from batchrl import distributed
from batchrl.configclass import ConfigError
from batchrl.configs import Experiment, apply_overrides
from batchrl.distributed import RayOptions
from batchrl.logging import read_metrics
from batchrl.train import loop
from batchrl.train.local import LocalTrainer
from batchrl.train.rundir import prepare_run
from batchrl.tune.options import TuneOptions
from batchrl.tune.space import Param, overrides_of
from batchrl.tune.study import CURVE, FAILED, RESUMES, RUN_DIR, TRIALS_DIR

log = logging.getLogger("batchrl")


class TrialFailed(Exception):
  """A trial that cannot give a value (values that clash, no finite evaluation): recorded as
  failed, and the search goes on."""


@dataclasses.dataclass(frozen=True)
class TrialRun:
  """One run of a trial: its directory, experiment, the seeds it trains at once (None: one)
  and the offset added to its steps when reporting to Optuna."""

  run_dir: Path
  exp: Experiment
  seeds: int | None
  offset: int


def suggest(trial, param: Param):
  """``trial``'s value for ``param`` (Optuna's suggest_* by kind)."""
  if param.kind == "choice":
    return trial.suggest_categorical(param.key, list(param.choices))
  if param.kind == "int":
    return trial.suggest_int(param.key, param.low, param.high)
  return trial.suggest_float(param.key, param.low, param.high, log=param.kind == "loguniform")


def trial_experiment(trial, base: Experiment, overrides: list[str],
                     params: tuple[Param, ...]) -> Experiment:
  """``base`` with the ``--set`` items and this trial's values, applied together (so
  schedules derived from the budget follow both)."""
  values = {p.key: suggest(trial, p) for p in params}
  try:
    return apply_overrides(base, [*overrides, *overrides_of(params, values)])
  except ConfigError as e:  # values that are fine alone but clash together
    trial.set_user_attr(FAILED, str(e))
    raise TrialFailed(f"trial {trial.number}: {e}") from None


def trial_runs(trial_dir: Path, exp: Experiment, seeds_per_trial: int) -> list[TrialRun]:
  """The runs of one trial (see the module doc)."""
  if seeds_per_trial == 1 or exp.run.backend == "gymnax":
    return [TrialRun(trial_dir, exp, seeds_per_trial if seeds_per_trial > 1 else None, 0)]
  return [TrialRun(trial_dir / f"seed{k}",
                   dataclasses.replace(exp, run=exp.run.replace(seed=exp.run.seed + k)),
                   None, k * exp.run.steps)
          for k in range(seeds_per_trial)]


def run_trial(optuna, trial, base: Experiment, overrides: list[str],
              params: tuple[Param, ...], options: TuneOptions, tune_dir: Path,
              stop: Callable[[], bool] | None = None,
              on_report: Callable[[int, dict], None] | None = None,
              runners: RayOptions | None = None) -> float:
  """Trains one trial and returns its objective; raises ``optuna.TrialPruned`` when pruned,
  and ``KeyboardInterrupt`` when ``stop()`` turned true (after a checkpoint: the search
  resumes the trial from there). ``on_report(step, metrics)`` also sees every evaluation
  reported to Optuna (``--ray`` passes them on to Ray Tune). ``runners``: the trial's envs
  step in Ray runner actors (Ray must be connected)."""
  exp = trial_experiment(trial, base, overrides, params)
  if runners is not None:
    runners = _fit_runners(trial, exp, runners)
  trial_dir = Path(tune_dir) / TRIALS_DIR / str(trial.number)
  trial.set_user_attr(RUN_DIR, str(trial_dir.relative_to(tune_dir)))
  _take_over(trial, Path(tune_dir) / TRIALS_DIR)
  runs = trial_runs(trial_dir, exp, options.seeds_per_trial)
  values = []
  for run in runs:
    _report_earlier(trial, run, options.metric)
    stopped = _train(run, options,
                     _pruning_hook(optuna, trial, run.offset, options, on_report), stop,
                     runners)
    if stopped:
      raise optuna.TrialPruned(stopped)
    values.append(objective_of(run.run_dir, options))
  record_curve(trial, [run.run_dir for run in runs], options)
  value = sum(values) / len(values)
  if not math.isfinite(value):
    trial.set_user_attr(FAILED, f"no evaluation gave a finite {options.metric}")
    raise TrialFailed(f"trial {trial.number}: no evaluation gave a finite {options.metric}")
  return value


def _train(run: TrialRun, options: TuneOptions, on_eval: Callable,
           stop: Callable[[], bool] | None, runners: RayOptions | None) -> str | None:
  """Trains (or resumes) ``run``; the reason the pruner stopped it early, if it did."""
  exp, _ = prepare_run(run.run_dir, run.exp, [])
  with _trainer(exp, run, runners) as trainer:
    last = loop.run(trainer, progress=False, use_tensorboard=options.tensorboard,
                    stop=stop, on_eval=on_eval)
    if not last.get("stopped") and trainer.iteration < trainer.plan["total"]:
      raise KeyboardInterrupt  # stop() asked the loop to stop; it saved a checkpoint
  return last.get("stopped")


def _trainer(exp: Experiment, run: TrialRun, runners: RayOptions | None) -> ContextManager:
  """The run's trainer, closed on exit: local, or the learner of Ray runners (the runners
  stopped on exit; Ray itself is the search's)."""
  if runners is None:
    return contextlib.closing(LocalTrainer(exp, run.run_dir, seeds=run.seeds))
  return distributed.trainer_on_ray(exp, run.run_dir, runners, run.seeds)


def _fit_runners(trial, exp: Experiment, runners: RayOptions) -> RayOptions:
  """``runners`` for this trial's experiment (envs per runner from its ``num_envs``); values
  that do not fit runners (say a searched ``num_envs`` that does not split evenly) fail the
  trial, as values that clash do."""
  try:
    return distributed.preflight(exp, runners)
  except ConfigError as e:
    trial.set_user_attr(FAILED, str(e))
    raise TrialFailed(f"trial {trial.number}: {e}") from None


def _pruning_hook(optuna, trial, offset: int, options: TuneOptions,
                  on_report: Callable[[int, dict], None] | None = None):
  """The loop's ``on_eval``: reports the metric; a reason to stop when the pruner says so."""
  def on_eval(step: int, metrics: dict) -> str | None:
    value = metrics.get(options.metric)
    if value is None or not math.isfinite(value):
      return None
    trial.report(float(value), offset + step)
    if on_report is not None:
      on_report(offset + step, metrics)
    if trial.should_prune():
      return (f"pruned by the {type(trial.study.pruner).__name__} at step {step}: "
              f"{options.metric} {value:.6g}")
    return None

  return on_eval


def existing_trial(optuna, study, number: int):
  """An ``optuna.trial.Trial`` for trial ``number`` of ``study``, which another process
  asked for (a ``--parallel`` worker's own trials come from ``study.optimize``; a ``--ray``
  trial's from Ray's searcher in the driver). Its ``suggest_*`` calls return the values
  already drawn, and it reports to the study as the asking process would.

  Optuna maps numbers to storage ids only through ``FrozenTrial._trial_id`` (its own
  integrations use it); tests/test_tune_parallel.py would catch a change.
  """
  frozen = next((t for t in study.get_trials(deepcopy=False) if t.number == number), None)
  if frozen is None:
    raise LookupError(f"study {study.study_name} has no trial {number}")
  return optuna.trial.Trial(study, frozen._trial_id)


def objective_of(run_dir: Path, options: TuneOptions) -> float:
  """The run's best (or last) evaluation of the metric; NaN when it has none."""
  records = [r for r in read_metrics(run_dir) if r.get("phase") == "eval"]
  values = [r.get(options.metric) for r in records]
  if options.objective == "last":
    last = values[-1] if values else None
    return float(last) if last is not None else math.nan
  finite = [float(v) for v in values if v is not None and math.isfinite(v)]
  if not finite:
    return math.nan
  return max(finite) if options.direction == "maximize" else min(finite)


def curve_of(run_dir: Path, options: TuneOptions) -> float:
  """The mean of the run's evaluations of the metric (null ones left out; NaN without any):
  the area under its evaluation curve, per evaluation. Of two runs with the same objective
  (both reach CartPole's cap of 500), the one that got there sooner has the better mean."""
  values = [r.get(options.metric) for r in read_metrics(run_dir) if r.get("phase") == "eval"]
  finite = [float(v) for v in values if v is not None and math.isfinite(v)]
  return sum(finite) / len(finite) if finite else math.nan


def record_curve(trial, run_dirs: list[Path], options: TuneOptions) -> None:
  """Stores the mean of ``curve_of`` over the trial's runs (its seeds) in the trial, where
  ``optimize.completed`` breaks ties with it."""
  curves = [curve_of(run_dir, options) for run_dir in run_dirs]
  curve = sum(curves) / len(curves)
  if math.isfinite(curve):
    trial.set_user_attr(CURVE, curve)


def _take_over(trial, trials_dir: Path) -> None:
  """A trial that continues an interrupted one moves its run directory to its own number
  (it resumes from the checkpoints there)."""
  old = trial.user_attrs.get(RESUMES)
  if old is None:
    return
  source, target = trials_dir / str(old), trials_dir / str(trial.number)
  if source.is_dir() and not target.exists():
    os.replace(source, target)
    log.info("Trial %d continues interrupted trial %d (%s)", trial.number, old, target)


def _report_earlier(trial, run: TrialRun, metric: str) -> None:
  """Evaluations a resumed run made before, reported again (Optuna lost them with the
  interrupted trial), so the pruner sees the whole curve."""
  if not (run.run_dir / "metrics.jsonl").is_file():
    return
  for record in read_metrics(run.run_dir):
    value = record.get(metric)
    if record.get("phase") == "eval" and value is not None and math.isfinite(value):
      trial.report(float(value), run.offset + int(record["step"]))
