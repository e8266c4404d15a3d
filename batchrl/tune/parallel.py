"""``--parallel P``: P trials at a time on this machine, in P worker processes.

Optuna's multi-process pattern on RDB storage: every worker opens the search's ``study.db``
and runs trials (``study.optimize``, one trial per call) while trials are left to run. The
count is exact: this process hands out one ticket per trial still to run (a shared counter),
so P workers never start more trials than ``--trials`` asks for. Workers start with the
``spawn`` method (a fork after JAX started its threads can deadlock), each with its own
sampler seed (the same seed in every worker would draw the same values), and the pruner
compares each trial with every trial in the file, whichever worker ran it.

This process stays the driver: it logs a line per finished trial (as the one-at-a-time
search does), and stops the workers on Ctrl-C. Workers ignore SIGINT themselves: the first
Ctrl-C sets an event on which each trial under way stops after its current update with a
checkpoint; the second ends the workers at once. Either way the interrupted trials stay in
the study as interrupted and run again, from their checkpoints, when the same command
resumes the search. A worker that fails (a bug, or killed) is reported with its traceback
or exit code; the others go on, and the search then ends with a ``RunFailure``.
"""
from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import queue
import signal
import traceback
from pathlib import Path
from typing import Any, Callable

import cloudpickle

from batchrl import compilation_cache
from batchrl.configs import Experiment
from batchrl.errors import RunFailure
from batchrl.tune import study as studies
from batchrl.tune.options import TuneOptions
from batchrl.tune.optuna_module import require_optuna
from batchrl.tune.space import Param
from batchrl.tune.trial import TrialFailed, run_trial

log = logging.getLogger("batchrl")

POLL_SECONDS = 0.2
# sampler seeds of workers k > 0 are offset by k times this (distinct streams of values)
SEED_STRIDE = 1_000_003


@dataclasses.dataclass(frozen=True)
class Job:
  """What a worker needs to run trials of the search (sent pickled by cloudpickle, so
  configs with env constructors defined in ``__main__`` travel too)."""

  base: Experiment
  overrides: list[str]
  params: tuple[Param, ...]
  options: TuneOptions
  tune_dir: Path
  study_name: str
  samplers: tuple[Any, ...]  # one per worker
  pruner: Any
  jax_cache: compilation_cache.Settings  # the driver's, for the workers


def samplers_for(optuna, sampler: Any, params: tuple[Param, ...], seed: int,
                 workers: int) -> tuple[Any, ...]:
  """One sampler per worker: a named one seeded ``seed + k * SEED_STRIDE``; an Optuna
  sampler object copied, and reseeded (at random) in workers after the first."""
  if isinstance(sampler, str):
    return tuple(studies.make_sampler(optuna, sampler, params, seed + k * SEED_STRIDE)
                 for k in range(workers))
  copies = tuple(cloudpickle.loads(cloudpickle.dumps(sampler)) for _ in range(workers))
  for copy in copies[1:]:
    copy.reseed_rng()
  return copies


def run_parallel(study, job: Job, remaining: int, parallel: int,
                 log_trial: Callable[[Any, Any], None],
                 stop: Callable[[], bool] | None) -> None:
  """Runs ``remaining`` trials of ``study`` in ``min(parallel, remaining)`` workers.

  Raises ``KeyboardInterrupt`` after ``stop()`` turned true and the workers stopped (their
  trials checkpointed), and ``RunFailure`` when a worker failed.
  """
  ctx = multiprocessing.get_context("spawn")
  workers = min(parallel, remaining)
  tickets = ctx.Value("i", remaining)
  stop_event, messages = ctx.Event(), ctx.Queue()
  payload = cloudpickle.dumps(job)
  procs = [ctx.Process(target=_worker, name=f"batchrl-tune-{k}",
                       args=(k, payload, tickets, stop_event, messages, os.getpid()))
           for k in range(workers)]
  log.info("Running %d trial(s), %d at a time, in worker processes.", remaining, workers)
  failures: list[str] = []
  try:
    for proc in procs:
      proc.start()
    _drive(study, procs, messages, stop_event, log_trial, stop, failures)
  except BaseException:  # the second Ctrl-C (or a bug here): end the workers at once
    stop_event.set()
    _end(procs)
    raise
  finally:
    messages.close()
  if failures:
    raise RunFailure(f"{'; '.join(failures)}. Its trial runs again (from its last "
                     "checkpoint) when the same command resumes the search.")
  if stop_event.is_set():
    raise KeyboardInterrupt


def _drive(study, procs, messages, stop_event, log_trial, stop, failures: list[str]) -> None:
  """Logs the workers' trials as they finish until every worker has exited."""
  running: dict[int, int | None] = {k: None for k in range(len(procs))}
  errors: dict[int, str] = {}
  ended: set[int] = set()
  while len(ended) < len(procs):
    _handle(_next(messages), study, running, errors, log_trial)
    if stop is not None and not stop_event.is_set() and stop():
      stop_event.set()
      log.warning("Stopping: each trial under way stops after its current update and saves "
                  "a checkpoint.")
    for k, proc in enumerate(procs):
      if k not in ended and not proc.is_alive():
        proc.join()
        ended.add(k)
  while (message := _next(messages, timeout=0.5)) is not None:  # the last words
    _handle(message, study, running, errors, log_trial)
  for k, proc in enumerate(procs):
    if proc.exitcode != 0 or k in errors:
      where = f" in trial {running[k]}" if running[k] is not None else ""
      why = errors[k].strip().splitlines()[-1] if k in errors else _exit_reason(proc.exitcode)
      failures.append(f"trial worker {k} failed{where}: {why}")
      if k in errors:
        log.error("Trial worker %d failed%s:\n%s", k, where, errors[k].rstrip())
      else:
        log.error("Trial worker %d failed%s: %s", k, where, why)


def _next(messages, timeout: float = POLL_SECONDS):
  try:
    return messages.get(timeout=timeout)
  except queue.Empty:
    return None


def _handle(message, study, running: dict, errors: dict, log_trial) -> None:
  if message is None:
    return
  kind, worker, value = message
  if kind == "start":
    running[worker] = value
  elif kind == "done":
    running[worker] = None
    trial = next(t for t in study.get_trials(deepcopy=False) if t.number == value)
    log_trial(study, trial)
  elif kind == "error":
    errors[worker] = value


def _exit_reason(code: int | None) -> str:
  if code is not None and code < 0:
    return f"ended by signal {signal.Signals(-code).name}"
  return f"exit code {code}"


def _end(procs) -> None:
  for proc in procs:
    if proc.is_alive():
      proc.terminate()
  for proc in procs:
    proc.join(timeout=10)
    if proc.is_alive():
      proc.kill()
      proc.join()


# --------------------------------------------------------------------------- in a worker


def _worker(index: int, payload: bytes, tickets, stop_event, messages, parent: int) -> None:
  """A worker process: runs trials while tickets are left and no stop is asked."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides what Ctrl-C does
  try:
    job: Job = cloudpickle.loads(payload)
    _configure(index, job)
    optuna = require_optuna()
    # the driver reports every trial (and this worker's errors, with their traceback)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name=job.study_name,
                              storage=studies.shared_storage(optuna, job.tune_dir),
                              sampler=job.samplers[index], pruner=job.pruner)

    def stopped() -> bool:  # asked, or the driver is gone
      return stop_event.is_set() or os.getppid() != parent

    while not stopped():
      trial = _claim(study, tickets)
      if trial is None:
        break
      messages.put(("start", index, trial.number))
      _run_and_tell(optuna, study, trial, lambda: run_trial(
          optuna, trial, job.base, job.overrides, job.params, job.options, job.tune_dir,
          stopped))
      messages.put(("done", index, trial.number))
  except KeyboardInterrupt:  # stopped() turned true: the trial checkpointed
    return
  except BaseException:
    messages.put(("error", index, traceback.format_exc()))
    raise SystemExit(1) from None


def _claim(study, tickets):
  """A ticket and the trial it runs (a resumed one the search enqueued, else a new one), or
  None when no ticket is left. Both under the tickets' lock: SQLite has no row locks, so two
  workers asking at once could both pop the same enqueued trial (seen once, on resume:
  "Cannot tell a COMPLETE trial")."""
  with tickets.get_lock():
    if tickets.value <= 0:
      return None
    tickets.value -= 1
    return study.ask()


def _run_and_tell(optuna, study, trial, run: Callable[[], float]) -> None:
  """Runs one trial and tells the study how it ended, as ``study.optimize`` does: its value,
  PRUNED, or FAIL (``TrialFailed`` is caught; any other error, ``KeyboardInterrupt`` too,
  is told as FAIL and raised)."""
  states = optuna.trial.TrialState
  try:
    value = run()
  except optuna.TrialPruned:
    study.tell(trial, state=states.PRUNED)
  except TrialFailed:
    study.tell(trial, state=states.FAIL)
  except BaseException:
    study.tell(trial, state=states.FAIL)
    raise
  else:
    study.tell(trial, value)


def _configure(index: int, job: Job) -> None:
  """The worker's logging (warnings, marked with the worker) and the driver's compilation
  cache (a spawned process starts with JAX's defaults)."""
  handler = logging.StreamHandler()
  handler.setFormatter(logging.Formatter(f"[trial worker {index}] %(levelname)s %(message)s"))
  log.addHandler(handler)
  log.setLevel(logging.WARNING)
  log.propagate = False
  compilation_cache.apply(job.jax_cache)
