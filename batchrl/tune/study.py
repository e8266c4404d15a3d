"""The study of a search: its directory, its SQLite file, what it searches, and resume.

A search lives in ``<logdir>/<timestamp>-<config>-tune/``::

    study.db       the Optuna study (RDB storage on SQLite; optuna-dashboard reads it)
    trials/<n>/    trial n's run directory (config.yaml, metrics.jsonl, TensorBoard, checkpoints)
    best.yaml      the best trial's config: ``batchrl train --config .../best.yaml``

The study remembers what it searches (``identity``: the config with its ``--set`` values,
the space, the metric...) so that running the same command again resumes it, and a
different search is refused instead of being mixed into it. A trial cut short (Ctrl-C, a
killed process) is run again on resume with the same values, from its last checkpoint.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from batchrl.configs import Experiment
from batchrl.errors import UserInputError
from batchrl.train.rundir import run_directory
from batchrl.tune.options import TuneOptions
from batchrl.tune.space import Param

log = logging.getLogger("batchrl")

STUDY_FILE = "study.db"
TRIALS_DIR = "trials"
BEST_FILE = "best.yaml"
# user attributes of trials
FAILED = "batchrl_failed"  # a trial that cannot run (e.g. values that clash): never rerun
RESUMES = "batchrl_resumes"  # the number of the interrupted trial this one continues
RUN_DIR = "batchrl_run_dir"
# the mean of a finished trial's evaluations of the metric: what breaks a tie of objectives
# (``optimize.completed``); the study's value stays the objective, which Optuna optimizes
CURVE = "batchrl_curve"


def tune_directory(logdir, name: str, timestamp: str | None) -> Path:
  """``logdir/<timestamp>-<name>-tune`` (the timestamp is now's when not given)."""
  return run_directory(logdir, f"{name}-tune", timestamp)


def identity(exp: Experiment, params: tuple[Param, ...], options: TuneOptions) -> dict[str, Any]:
  """What makes a search this search (stored in the study; compared on resume)."""
  return {"config": exp.name, "experiment": exp.to_dict(), "space": [p.text for p in params],
          "metric": options.metric, "direction": options.direction,
          "objective": options.objective, "seeds_per_trial": options.seeds_per_trial}


def storage_url(tune_dir: Path) -> str:
  return f"sqlite:///{Path(tune_dir).resolve() / STUDY_FILE}"


def shared_storage(optuna, tune_dir: Path):
  """The study's storage for a process that shares it with others (``--parallel`` workers,
  ``--ray`` trials and Ray's searcher): SQLite waits up to a minute for another writer's lock
  instead of its default 5 s."""
  return optuna.storages.RDBStorage(storage_url(tune_dir),
                                    engine_kwargs={"connect_args": {"timeout": 60}})


def create(optuna, tune_dir: Path, ident: dict):
  """A new study in ``tune_dir/study.db`` holding ``ident`` (the caller sets its sampler and
  pruner)."""
  study = optuna.create_study(storage=storage_url(tune_dir), study_name=Path(tune_dir).name,
                              direction=ident["direction"])
  for key, value in ident.items():
    study.set_user_attr(key, value)
  return study


def load(optuna, tune_dir: Path, ident: dict):
  """The study of ``tune_dir``; refused (naming the difference) when it searches something
  else than ``ident``."""
  url = storage_url(tune_dir)
  names = optuna.get_all_study_names(storage=url)
  if len(names) != 1:
    raise UserInputError(f"{Path(tune_dir) / STUDY_FILE} holds {len(names)} studies; a "
                         "batchrl search holds one. Start a new search (another --timestamp).")
  study = optuna.load_study(study_name=names[0], storage=url)
  check_identity(Path(tune_dir) / STUDY_FILE, study.user_attrs, ident)
  return study


def check_identity(path: Path, saved: dict, ident: dict) -> None:
  if saved.get("config") != ident["config"]:
    raise UserInputError(f"{path} is a search of config {saved.get('config')!r}, not "
                         f"{ident['config']!r}; give --config {saved.get('config')} to resume "
                         "it, or another --timestamp for a new search.")
  changed = [f"{key} ({_difference(saved.get(key), ident[key])})"
             for key in ident if saved.get(key) != ident[key]]
  if changed:
    raise UserInputError(f"{path} is a search of {ident['config']!r} with other settings: "
                         f"{'; '.join(changed)}. Resume it with the same command, or start a "
                         "new search (another --timestamp).")


def _difference(saved, given, path: str = "") -> str:
  """The first place where two plain values differ: ``run.steps: 4096 saved, 8192 given``."""
  if isinstance(saved, dict) and isinstance(given, dict):
    for key in list(saved) + [k for k in given if k not in saved]:
      if saved.get(key) != given.get(key):
        return _difference(saved.get(key), given.get(key), f"{path}{key}.")
  return f"{path.rstrip('.') + ': ' if path else ''}{saved!r} saved, {given!r} given"


def make_sampler(optuna, name: str, params: tuple[Param, ...], seed: int):
  if name == "grid":
    return optuna.samplers.GridSampler({p.key: p.grid() for p in params}, seed=seed)
  if name == "random":
    return optuna.samplers.RandomSampler(seed=seed)
  # constant_liar: trials asked while others run (a program's trials, asked together; the
  # workers of --parallel/--ray) count those as bad, so TPE spreads them instead of
  # proposing one point many times (8 asked together after 8 told, on a toy objective: the
  # standard deviation of their log10 learning rates 0.03 without, 0.3 with). Trials asked
  # one at a time get the same values either way.
  return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


def grid_size(params: tuple[Param, ...]) -> int:
  size = 1
  for p in params:
    size *= len(p.grid())
  return size


def make_pruner(optuna, name: str, exp: Experiment):
  """``name``'s pruner. Intermediate values are reported at env steps, so Hyperband's
  resource runs from the first evaluation to the budget."""
  if name == "median":
    return optuna.pruners.MedianPruner()
  if name == "hyperband":
    first = exp.run.eval_every or exp.run.steps
    return optuna.pruners.HyperbandPruner(min_resource=first, max_resource=exp.run.steps)
  return optuna.pruners.NopPruner()


def done_trials(optuna, study) -> int:
  """Trials that count towards ``--trials``: finished, pruned, or failed for good."""
  states = optuna.trial.TrialState
  return sum(1 for t in study.get_trials(deepcopy=False)
             if t.state in (states.COMPLETE, states.PRUNED)
             or (t.state == states.FAIL and FAILED in t.user_attrs))


def requeue_interrupted(optuna, study) -> list[int]:
  """Trials cut short by a stopped search (still RUNNING in the file, or FAIL without a
  reason of ours) are queued again with their values, once each; returns their numbers.

  The new trial takes over the old one's run directory and continues from its checkpoint.
  """
  states = optuna.trial.TrialState
  trials = study.get_trials(deepcopy=False)
  taken = {t.user_attrs.get(RESUMES) for t in trials}
  requeued = []
  for t in trials:
    interrupted = t.state == states.RUNNING or (t.state == states.FAIL and
                                                FAILED not in t.user_attrs)
    if not interrupted or t.number in taken:
      continue
    if t.state == states.RUNNING:  # its process is gone: Optuna never heard the end
      study.tell(t.number, state=states.FAIL)
    study.enqueue_trial(t.params, user_attrs={RESUMES: t.number})
    requeued.append(t.number)
  return requeued
