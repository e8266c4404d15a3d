"""``--ray``: the trials of a search as Ray Tune trials, their values picked by Optuna.

    batchrl tune --config pendulum --logdir runs --trials 4 --search ... --ray --parallel 2

Ray Tune runs each trial as a function trainable (``trainable``) that trains the trial with
the same code as a search without Ray (``batchrl.tune.trial.run_trial``): the same run
directory ``trials/<n>/``, the same evaluations reported to Optuna at env steps. Ray's
``OptunaSearch`` is the search algorithm, on the search's own ``study.db`` (its
``storage=`` and ``study_name=``; it loads the existing study), so the study holds the same
records as a search without Ray, and running the command again resumes it.
``ConcurrencyLimiter`` runs ``--parallel`` trials at a time; ``FailureConfig(max_failures)``
restarts a trial whose process failed (it resumes from its last checkpoint in its run
directory). A local Ray instance lives under ``<search>/ray`` and is shut down at the end
(``batchrl.distributed.cluster.connect``, as for ``batchrl train --ray``); ``--address``
joins a cluster, whose nodes must see the search directory at the same path (a shared
filesystem: every trial writes its run directory and reports to ``study.db`` there).

Ctrl-C (``stop``) stops the trials as without Ray, each after its current update with a
checkpoint: the driver (``_StopWhen``, polled by Ray Tune) writes a flag file in the
search's ``ray_results/`` that every trial's training loop checks (a callable cannot reach
Ray workers; a file reaches every node that shares the search directory), and the searcher
starts no new trial. The stopped trials stay running in the study, so that the same command
runs them again, from their checkpoints. Ray Tune's own way to end an experiment would kill
the trials mid-run instead (losing everything since their last periodic checkpoint).

Pruning stays Optuna's (``--pruner``), decided inside the trial as without Ray, rather than
mapped onto a Ray scheduler: a trial stopped by a Ray scheduler is killed mid-run and
``OptunaSearch`` records it as COMPLETE with its partial value, where Optuna's pruner lets the
trial stop itself after a checkpoint, say so in its ``metrics.jsonl``, and be recorded as
PRUNED. ``StudySearch`` adapts ``OptunaSearch`` to that: the trial reports its evaluations
itself (at env steps, not at Ray's iteration numbers), and its last result says how it
ended.

This module imports Ray Tune at the top: ``batchrl.tune.optimize`` imports it only for
``--ray`` (``pip install "batchrl[tune-ray]"``).
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import cloudpickle
from ray import tune
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.optuna import OptunaSearch

from batchrl import compilation_cache
from batchrl.distributed import cluster
from batchrl.tune import study as studies
from batchrl.tune.optuna_module import require_optuna
from batchrl.tune.parallel import Job
from batchrl.tune.space import Param
from batchrl.tune.trial import TrialFailed, existing_trial, run_trial, suggest

log = logging.getLogger("batchrl")

OBJECTIVE = "objective"  # the metric Ray's searcher reads: the trial's objective at its end
STATE = "batchrl_state"  # how the trial ended: complete, pruned, failed, stopped (Ctrl-C;
# left running in the study); running before
NUMBER = "batchrl_trial"  # the Optuna trial number, in the trial's Ray config
RAY_DIR = "ray"  # a local Ray instance's temp dir (sockets, logs) under the search
RESULTS_DIR = "ray_results"  # Ray Tune's experiment records under the search
STOP_FILE = "stop-requested"  # in RESULTS_DIR: written on Ctrl-C, read by every trial


class DefineByRun:
  """The search space for ``OptunaSearch``: each ``--search`` value drawn from the Optuna
  trial (the same suggest calls as without Ray), and the trial's number passed on in the Ray
  config. A class, not a closure: Ray pickles the searcher with it."""

  def __init__(self, params: tuple[Param, ...]):
    self.params = params

  def __call__(self, trial) -> dict[str, Any]:
    for param in self.params:
      suggest(trial, param)
    return {NUMBER: trial.number}


class StudySearch(OptunaSearch):
  """``OptunaSearch`` whose trials report their evaluations to the study themselves.

  Ray's per-result reports (at iteration numbers) would be a second curve in the same
  Optuna trial, so they are dropped. The trial's last result says how it ended: complete
  (its objective), pruned, or failed (values that cannot train); a trial that Ray gave up
  on is failed. A trial stopped before its end (Ctrl-C) is left running in the study, so
  that resuming the search runs it again with its values; once ``stop_file`` exists no new
  trial starts.
  """

  def __init__(self, *args, stop_file: Path | None = None, **kwargs):
    super().__init__(*args, **kwargs)
    self.stop_file = stop_file

  def suggest(self, trial_id: str):
    if self.stop_file is not None and self.stop_file.exists():
      return self.FINISHED
    return super().suggest(trial_id)

  def on_trial_result(self, trial_id: str, result: dict) -> None:
    del trial_id, result

  def on_trial_complete(self, trial_id: str, result: dict | None = None,
                        error: bool = False) -> None:
    state = (result or {}).get(STATE)
    if error or state == "failed":
      super().on_trial_complete(trial_id, None, error=True)
    elif state in ("complete", "pruned"):
      super().on_trial_complete(trial_id, result)


class _DriverOnly:
  """Pickled empty: Ray Tune pickles its run config (for ``Tuner.restore``, which a search
  does not use: its study resumes it), and these hold the driver's study and Ctrl-C."""

  def __getstate__(self) -> dict:
    return {}


class _LogTrials(_DriverOnly, tune.Callback):
  """The driver's line per finished trial (as without Ray)."""

  def __init__(self, study, log_trial: Callable[[Any, Any], None]):
    self.study, self.log_trial = study, log_trial

  def on_trial_complete(self, iteration, trials, trial, **info) -> None:
    self._log(trial)

  def on_trial_error(self, iteration, trials, trial, **info) -> None:
    # Ray gave up on it (its process failed max_failures + 1 times): say where its error is
    log.warning("Trial %s failed in Ray; its error: %s", trial.config.get(NUMBER),
                trial.error_file or "see the Ray logs under the search's ray/")
    self._log(trial)

  def _log(self, trial) -> None:
    number = trial.config.get(NUMBER)
    frozen = next((t for t in self.study.get_trials(deepcopy=False) if t.number == number),
                  None)
    if frozen is not None and frozen.state.is_finished():
      self.log_trial(self.study, frozen)


class _StopWhen(_DriverOnly, tune.Stopper):
  """When ``stop()`` turns true (Ctrl-C): writes ``stop_file``, on which every trial stops
  after its current update with a checkpoint (and ``StudySearch`` starts no new one). Never
  ends the experiment itself: Ray Tune would kill the trials mid-run; it ends once the
  stopped trials have returned."""

  def __init__(self, stop: Callable[[], bool] | None, stop_file: Path):
    self.stop, self.stop_file = stop, stop_file

  def __call__(self, trial_id, result) -> bool:
    return False

  def stop_all(self) -> bool:
    stop, stop_file = getattr(self, "stop", None), getattr(self, "stop_file", None)
    if stop is not None and stop_file is not None and not stop_file.exists() and stop():
      log.warning("Stopping: each trial under way stops after its current update and saves "
                  "a checkpoint.")
      stop_file.touch()
    return False


def trainable(config: dict, job: bytes) -> None:
  """One trial, in a Ray worker: trains it as ``run_trial`` does without Ray, reporting each
  evaluation to Ray as well, and ends with a result that says how it ended."""
  spec: Job = cloudpickle.loads(job)
  compilation_cache.apply(spec.jax_cache)
  optuna = require_optuna()
  study = optuna.load_study(study_name=spec.study_name,
                            storage=studies.shared_storage(optuna, spec.tune_dir),
                            sampler=optuna.samplers.RandomSampler(), pruner=spec.pruner)
  trial = existing_trial(optuna, study, config[NUMBER])

  def report(step: int, metrics: dict) -> None:
    tune.report({OBJECTIVE: None, STATE: "running", "step": step, **_numbers(metrics)})

  stop_file = Path(spec.tune_dir) / RESULTS_DIR / STOP_FILE
  try:
    value = run_trial(optuna, trial, spec.base, spec.overrides, spec.params, spec.options,
                      spec.tune_dir, stop=stop_file.exists, on_report=report)
  except KeyboardInterrupt:  # the search is stopping: checkpointed, left running in the study
    tune.report({OBJECTIVE: None, STATE: "stopped"})
  except optuna.TrialPruned as e:
    tune.report({OBJECTIVE: None, STATE: "pruned", "reason": str(e)})
  except TrialFailed as e:
    tune.report({OBJECTIVE: None, STATE: "failed", "reason": str(e)})
  else:
    tune.report({OBJECTIVE: value, STATE: "complete"})


def _numbers(metrics: dict) -> dict:
  return {k: float(v) for k, v in metrics.items()
          if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def run_on_ray(study, job: Job, remaining: int, *, sampler, parallel: int,
               address: str | None, max_failures: int,
               log_trial: Callable[[Any, Any], None],
               stop: Callable[[], bool] | None) -> None:
  """Runs ``remaining`` trials of ``study`` as Ray Tune trials, ``parallel`` at a time, on a
  local Ray instance with ``parallel`` CPUs or the cluster at ``address``. Raises
  ``KeyboardInterrupt`` when ``stop()`` ended the search early."""
  optuna = require_optuna()
  tune_dir = Path(job.tune_dir)
  stop_file = tune_dir / RESULTS_DIR / STOP_FILE
  stop_file.parent.mkdir(parents=True, exist_ok=True)
  stop_file.unlink(missing_ok=True)  # an earlier, stopped run of this search left it
  searcher = StudySearch(space=DefineByRun(job.params), metric=OBJECTIVE,
                         mode="max" if study.direction.name == "MAXIMIZE" else "min",
                         sampler=sampler, study_name=job.study_name,
                         storage=studies.shared_storage(optuna, job.tune_dir),
                         stop_file=stop_file)
  trial_fn = tune.with_resources(tune.with_parameters(trainable, job=cloudpickle.dumps(job)),
                                 {"cpu": 1})
  log.info("Running %d trial(s) on Ray Tune, %d at a time.", remaining, parallel)
  # Ctrl-C is ours (batchrl.train.interrupt, through _StopWhen), not Ray Tune's handler;
  # the driver logs a line per trial, so Ray Tune's progress tables stay off
  with _environ(TUNE_DISABLE_SIGINT_HANDLER="1", RAY_AIR_NEW_OUTPUT="0"), \
      cluster.connect(address, tune_dir / RAY_DIR, parallel):
    tuner = tune.Tuner(
        trial_fn,
        tune_config=tune.TuneConfig(search_alg=ConcurrencyLimiter(searcher, parallel),
                                    num_samples=remaining),
        run_config=tune.RunConfig(
            name=time.strftime("%Y%m%d-%H%M%S"), storage_path=str(tune_dir / RESULTS_DIR),
            failure_config=tune.FailureConfig(max_failures=max_failures),
            stop=_StopWhen(stop, stop_file), callbacks=[_LogTrials(study, log_trial)],
            verbose=0))
    tuner.fit()
  if stop_file.exists():
    stop_file.unlink()
    raise KeyboardInterrupt


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
  """``os.environ`` with ``values`` set while the body runs (Ray Tune reads them then)."""
  saved = {key: os.environ.get(key) for key in values}
  os.environ.update(values)
  try:
    yield
  finally:
    for key, value in saved.items():
      if value is None:
        os.environ.pop(key, None)
      else:
        os.environ[key] = value
