"""``search``: a hyperparameter search over a config, every trial a normal training run.

    study = batchrl.tune.search("cartpole_fused", {"learning_rate": "loguniform(1e-4,1e-2)"},
                                trials=16, logdir="runs", overrides=["steps=200000"])

Everything the user gave is checked before anything is written (config, keys, bounds,
options, environment); a search whose directory this call created and that then fails on
bad input leaves nothing behind. See ``batchrl.tune.study`` for the directory and resume.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from batchrl import compilation_cache, configs, distributed
from batchrl.configclass import ConfigError
from batchrl.configs import Experiment, apply_overrides
from batchrl.distributed import RayOptions
from batchrl.distributed import cluster as ray_cluster
from batchrl.errors import UserInputError, missing_extra
from batchrl.files import write_atomic
from batchrl.train.build import check_env
from batchrl.tune import study as studies
from batchrl.tune.batched import Batching, batching, check_batching, run_groups, trials_text
from batchrl.tune.options import TuneOptions
from batchrl.tune.optuna_module import require_optuna
from batchrl.tune.parallel import Job, run_parallel, samplers_for
from batchrl.tune.space import Param, check_space, parse_space
from batchrl.tune.trial import TrialFailed, run_trial

log = logging.getLogger("batchrl")

DIRECTORY = "batchrl_directory"  # study attribute: where the search ran last


def search(config: str | Experiment, space: Iterable[str] | Mapping[str, str], *,
           trials: int, logdir="runs", timestamp: str | None = None,
           overrides: Iterable[str] = (), sampler: Any = "tpe", pruner: Any = "median",
           directory=None, batch_trials: int | None = None, parallel: int = 1,
           ray: bool = False, address: str | None = None, max_failures: int = 2,
           runners: int | RayOptions | None = None,
           stop: Callable[[], bool] | None = None, **options):
  """Runs (or resumes) a search; returns the Optuna study.

  Args:
    config: a named config, a config file, or an ``Experiment``.
    space: ``["learning_rate=loguniform(1e-4,1e-2)", ...]`` or ``{key: expression}``
      (``batchrl.tune.space``).
    trials: trials the study holds when done (a resumed search runs the rest).
    logdir: the search goes to ``logdir/<timestamp>-<config>-tune``; an existing one
      resumes. ``directory`` names it outright instead.
    timestamp: the search folder's prefix (now's time when not given).
    overrides: ``--set`` items applied to every trial.
    sampler: a name (``TuneOptions``) or an Optuna sampler object.
    pruner: a name (``TuneOptions``) or an Optuna pruner object.
    batch_trials: train up to this many trials side by side in one compiled program
      (gymnax configs; ``batchrl.tune.batched``); 1 trains them one after another. None
      (auto): side by side, as many per program as memory allows (at most 16), where the
      config and the searched values allow it (``batched.batching`` says when), else one
      after another; one after another with ``parallel``, ``ray`` or ``runners``.
    parallel: run this many trials at a time, each in its own worker process
      (``batchrl.tune.parallel``), or with ``ray`` as concurrent Ray Tune trials.
    ray: run the trials as Ray Tune trials, Optuna picking their values
      (``batchrl.tune.ray_tune``; ``pip install "batchrl[tune-ray]"``), on a local Ray
      instance or the cluster at ``address``; Ray restarts a failed trial up to
      ``max_failures`` times.
    runners: each trial steps its envs in this many Ray runner actors (or as the given
      ``batchrl.distributed.RayOptions`` say), as ``batchrl train --ray --runners N`` does;
      host configs, trials one after another, on one Ray instance for the whole search (a
      local one under the search's ``ray/``, or the cluster at ``address``). Not with
      ``ray``, ``parallel`` or ``batch_trials`` (``check_launch`` says why).
    stop: checked after every training phase; when true, the trial under way saves a
      checkpoint and the search ends with ``KeyboardInterrupt`` (``batchrl tune``: Ctrl-C).
      Running it again resumes that trial.
    **options: the other fields of ``TuneOptions`` (metric, direction, objective, seed,
      seeds_per_trial, tensorboard).
  """
  optuna = require_optuna()
  names = {k: v for k, v in (("sampler", sampler), ("pruner", pruner)) if isinstance(v, str)}
  opts = TuneOptions(trials=trials, **names, **options)
  base = configs.load(config) if isinstance(config, str) else config
  runners = runner_options(runners, address)
  fixed = list(overrides) + (runners.overrides() if runners else [])
  overrides = fixed + ([f"run.seed={opts.seed}"] if opts.seed is not None else [])
  exp = apply_overrides(base, overrides)
  params = parse_space(space)
  check_space(base, params, fixed, seed=opts.seed)
  if opts.sampler == "grid" and isinstance(sampler, str):
    _check_grid(params, opts)
  check_batching(exp, opts, batch_trials)
  check_launch(batch_trials, parallel, ray, address, max_failures, runners is not None)
  if runners is not None:  # host envs that split over the runners; Ray; the cluster
    try:
      distributed.preflight(exp, runners)
    except ConfigError as e:
      raise ConfigError(f"--runners {runners.runners}: {e}") from None
  check_env(exp.run, exp)  # the env, and that the agent fits it
  tune_dir = Path(directory) if directory else studies.tune_directory(logdir, exp.name,
                                                                      timestamp)
  made_directory = not tune_dir.exists()
  study = _open(optuna, tune_dir, studies.identity(exp, params, opts))
  # seeded past the trials the study holds, so a resumed search does not replay them
  seed = (exp.run.seed if opts.seed is None else opts.seed) + len(study.trials)
  study.sampler = (studies.make_sampler(optuna, sampler, params, seed)
                   if isinstance(sampler, str) else sampler)
  study.pruner = studies.make_pruner(optuna, pruner, exp) if isinstance(pruner, str) else pruner
  study.set_user_attr(DIRECTORY, str(tune_dir))
  launch = Launch(batch_trials, parallel, ray, address, max_failures, sampler, seed, runners)
  try:
    _optimize(optuna, study, base, overrides, params, opts, tune_dir, launch, stop)
  except UserInputError:
    if made_directory:  # a new search that failed on bad input leaves nothing behind
      shutil.rmtree(tune_dir, ignore_errors=True)
    raise
  write_best(study, tune_dir)
  return study


def _open(optuna, tune_dir: Path, ident: dict):
  """The study of ``tune_dir``: resumed when its ``study.db`` exists (and searches the same
  thing), else new."""
  if (tune_dir / studies.STUDY_FILE).exists():
    return studies.load(optuna, tune_dir, ident)
  _make_directory(tune_dir)
  return studies.create(optuna, tune_dir, ident)


@dataclasses.dataclass(frozen=True)
class Launch:
  """How the trials run (``search``'s arguments of the same names); ``sampler`` is the
  sampler's name or object, ``seed`` the seed of a named one."""

  batch_trials: int | None
  parallel: int
  ray: bool
  address: str | None
  max_failures: int
  sampler: Any
  seed: int
  runners: RayOptions | None = None


def runner_options(runners: int | RayOptions | None, address: str | None) -> RayOptions | None:
  """``search``'s ``runners`` as ``RayOptions`` (an int is the number of runners; the
  search's ``address`` is theirs)."""
  if runners is None or isinstance(runners, RayOptions):
    return runners
  if isinstance(runners, bool) or not isinstance(runners, int) or runners < 1:
    raise UserInputError(f"--runners must be an integer >= 1, got {runners!r}.")
  return RayOptions(address=address, runners=runners)


def check_launch(batch_trials: int | None, parallel: int, ray: bool, address: str | None,
                 max_failures: int, runners: bool = False) -> None:
  """``--parallel``/``--ray``/``--address``/``--runners`` checked before anything is
  written (Ray Tune installed, the cluster reachable). ``batch_trials`` None (auto) goes
  with any of them: it comes to 1 there (``_batching``)."""
  batch_trials = 1 if batch_trials is None else batch_trials
  if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
    raise UserInputError(f"--parallel must be an integer >= 1, got {parallel!r}.")
  if max_failures < 0:
    raise UserInputError(f"--max-failures must be >= 0, got {max_failures}.")
  if address is not None and not (ray or runners):
    raise UserInputError("--address only applies with --ray or --runners (the Ray cluster "
                         "the trials or their env runners run on).")
  if runners and ray:
    # A Ray Tune trial holds its CPU while its runners ask the same instance for theirs: on
    # a local instance (--parallel CPUs) they never start, and the search hangs.
    raise UserInputError("--runners cannot be combined with --ray: a Ray Tune trial's env "
                         "runners would wait for the CPUs the concurrent trials hold, so the "
                         "search can hang. Give --runners N without --ray (trials one after "
                         "another, each stepping its envs in N Ray runners), or --ray "
                         "without --runners (each trial steps its envs in its own process).")
  if runners and (parallel > 1 or batch_trials > 1):
    flag = "--parallel" if parallel > 1 else "--batch-trials"
    raise UserInputError(f"--runners runs the trials one after another, each on Ray env "
                         f"runners; {flag} runs several at a time: give one of the two.")
  if batch_trials > 1 and (parallel > 1 or ray):
    flag = "--ray" if ray else "--parallel"
    raise UserInputError(f"{flag} runs trials in separate processes and --batch-trials "
                         f"{batch_trials} trains them in one compiled program: give one of "
                         "the two.")
  if ray:
    _ray_tune()
    if address is not None:
      ray_cluster.check_address(address)


def _batching(exp: Experiment, opts: TuneOptions, params: tuple[Param, ...], launch: Launch,
              remaining: int) -> Batching:
  """``launch.batch_trials`` resolved for ``remaining`` trials: auto is one at a time for a
  single trial, and where ``--parallel``, ``--ray`` or ``--runners`` run the trials."""
  if launch.batch_trials is None and (remaining == 1 or launch.parallel > 1 or launch.ray
                                      or launch.runners is not None):
    return Batching(1, auto=True)
  return batching(exp, opts, params, launch.batch_trials)


def _mode(launch: Launch, batch: Batching, remaining: int) -> str:
  """The line saying how the search runs its ``remaining`` trials."""
  if launch.ray:
    return (f"tune: {trials_text(remaining)} as Ray Tune trials, up to {launch.parallel} at "
            "a time (--ray)")
  if launch.parallel > 1:
    return (f"tune: {trials_text(remaining)}, {min(launch.parallel, remaining)} at a time "
            f"in worker processes (--parallel {launch.parallel})")
  if launch.runners is not None:
    return (f"tune: {trials_text(remaining)}, one at a time, each on "
            f"{launch.runners.runners} Ray env runners (--runners)")
  return batch.line(remaining)


def _ray_tune():
  """``batchrl.tune.ray_tune``, which imports Ray Tune (the optional extra
  ``batchrl[tune-ray]``), or the one-line error naming the extra."""
  try:
    from batchrl.tune import ray_tune
  except ImportError as e:
    raise missing_extra("batchrl tune --ray", "tune-ray", e) from None
  return ray_tune


def _optimize(optuna, study, base: Experiment, overrides: list[str],
              params: tuple[Param, ...], opts: TuneOptions, tune_dir: Path,
              launch: Launch, stop: Callable[[], bool] | None) -> None:
  requeued = studies.requeue_interrupted(optuna, study)
  if requeued:
    log.info("Resuming %s: interrupted trial(s) %s run again with the same values.",
             tune_dir, ", ".join(map(str, requeued)))
  remaining = opts.trials - studies.done_trials(optuna, study)
  if remaining <= 0:
    log.info("%s already holds %d finished trials; nothing to run.", tune_dir, opts.trials)
    return
  log.info("Search %s: %d trial(s) to run (%d done).", tune_dir, remaining,
           opts.trials - remaining)
  batch = _batching(apply_overrides(base, overrides), opts, params, launch, remaining)
  log.info("%s", _mode(launch, batch, remaining))

  size = batch.size(remaining)
  if size > 1:
    run_groups(optuna, study, remaining, base, overrides, params, opts, tune_dir, size,
               _log_trial(optuna, opts), stop)
    return
  if launch.ray or launch.parallel > 1:
    workers = 1 if launch.ray else min(launch.parallel, remaining)
    job = Job(base, overrides, params, opts, Path(tune_dir).resolve(), study.study_name,
              samplers_for(optuna, launch.sampler, params, launch.seed, workers),
              study.pruner, compilation_cache.settings())
    if launch.ray:
      _ray_tune().run_on_ray(study, job, remaining, sampler=job.samplers[0],
                             parallel=launch.parallel, address=launch.address,
                             max_failures=launch.max_failures,
                             log_trial=_log_trial(optuna, opts), stop=stop)
    else:
      run_parallel(study, job, remaining, launch.parallel, _log_trial(optuna, opts), stop)
    return

  def objective(trial) -> float:
    return run_trial(optuna, trial, base, overrides, params, opts, tune_dir, stop,
                     runners=launch.runners)

  with _runner_cluster(launch.runners, tune_dir):
    study.optimize(objective, n_trials=remaining, catch=(TrialFailed,),
                   callbacks=[_log_trial(optuna, opts)])


def _runner_cluster(runners: RayOptions | None, tune_dir: Path):
  """With ``runners``: connected to Ray for the whole search (each trial's runners start and
  stop on it), a local instance under ``<search>/ray`` unless ``runners.address``; else
  nothing."""
  if runners is None:
    return contextlib.nullcontext()
  return ray_cluster.connect(runners.address, Path(tune_dir) / "ray", runners.instance_cpus())


def _log_trial(optuna, opts: TuneOptions):
  def callback(study, trial) -> None:
    states = optuna.trial.TrialState
    values = ", ".join(f"{k}={_short(v)}" for k, v in trial.params.items())
    if trial.state == states.COMPLETE:
      ranked = completed(study)
      tie = tie_note(ranked)
      log.info("Trial %d: %s %s %.6g (%s); best so far: trial %d, %.6g%s", trial.number,
               opts.objective, opts.metric, trial.value, values, ranked[0].number,
               ranked[0].value, f" ({tie})" if tie else "")
    elif trial.state == states.PRUNED:
      log.info("Trial %d pruned (%s).", trial.number, values)
    else:
      log.warning("Trial %d failed (%s): %s", trial.number, values,
                  trial.user_attrs.get(studies.FAILED, "see the log above"))

  return callback


def _check_grid(params: tuple[Param, ...], opts: TuneOptions) -> None:
  size = studies.grid_size(params)  # also refuses continuous ranges
  if opts.trials > size:
    raise UserInputError(f"--sampler grid has {size} combinations; give --trials {size} or "
                         "fewer.")


def _make_directory(tune_dir: Path) -> None:
  if tune_dir.exists() and not tune_dir.is_dir():
    raise UserInputError(f"{tune_dir} exists and is not a directory.")
  try:
    (tune_dir / studies.TRIALS_DIR).mkdir(parents=True, exist_ok=True)
  except OSError as e:
    raise UserInputError(f"cannot write the search directory {tune_dir}: {e.strerror}; give "
                         "a --logdir you can write to.") from None


def completed(study) -> list:
  """Finished trials, best first: by their objective (the study's value, which Optuna
  optimizes), and where objectives tie (a score that caps, as CartPole's 500 does: every
  good trial reaches it) by the mean of their evaluations (``studies.CURVE``), so the trial
  that got there sooner comes first; one without it (an older search's) comes last."""
  done = [t for t in study.trials if t.state.name == "COMPLETE" and t.value is not None]
  sign = -1.0 if study.direction.name == "MAXIMIZE" else 1.0

  def key(t):
    curve = t.user_attrs.get(studies.CURVE)
    return sign * t.value, math.inf if curve is None else sign * curve

  return sorted(done, key=key)


def tie_note(ranked: list) -> str:
  """Says how the best of ``ranked`` (``completed``) was picked when others tie with its
  objective; empty when none does."""
  tied = [t for t in ranked if t.value == ranked[0].value] if ranked else []
  if len(tied) < 2:
    return ""
  return (f"{len(tied)} trials tie at {ranked[0].value:.6g}: ranked by the mean of their "
          "evaluations, the area under the curve (the sooner a trial got there, the better)")


def write_best(study, tune_dir: Path) -> Path | None:
  """``best.yaml``: the config of the best finished trial (its run's ``config.yaml``), a
  file ``batchrl train --config`` takes; None when no trial finished."""
  ranked = completed(study)
  if not ranked:
    return None
  best = ranked[0]
  run_dir = Path(tune_dir) / best.user_attrs.get(studies.RUN_DIR,
                                                 f"{studies.TRIALS_DIR}/{best.number}")
  values = yaml.safe_load((run_dir / "config.yaml").read_text()) if (
      run_dir / "config.yaml").is_file() else None
  if values is None:  # several seeds on host envs: one run per seed; the first seed's config
    values = yaml.safe_load((run_dir / "seed0" / "config.yaml").read_text())
  tie = tie_note(ranked)
  header = (f"# batchrl tune: trial {best.number} of {Path(tune_dir).name}, "
            f"objective {best.value:.6g}\n" + (f"# {tie}\n" if tie else "") + "# values: "
            f"{', '.join(f'{k}={_short(v)}' for k, v in best.params.items())}\n"
            f"# train it: batchrl train --config {Path(tune_dir) / studies.BEST_FILE} "
            "--logdir runs\n")
  path = Path(tune_dir) / studies.BEST_FILE
  write_atomic(path, header + yaml.safe_dump(values, sort_keys=False))
  return path


def table(study, top: int = 5) -> str:
  """The best finished trials, and the counts of pruned and failed ones."""
  everything = completed(study)
  ranked = everything[:top]
  keys = list(dict.fromkeys(k for t in ranked for k in t.params))
  metric = f"{study.user_attrs.get('objective', 'best')} {study.user_attrs.get('metric', '')}"
  rows = [["trial", metric.strip(), "mean of evals", *keys]] + [
      [str(t.number), f"{t.value:.6g}", _short(t.user_attrs.get(studies.CURVE, "-")),
       *(_short(t.params.get(k)) for k in keys)]
      for t in ranked]
  widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
  lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
  counts = {}
  for t in study.trials:
    counts[t.state.name.lower()] = counts.get(t.state.name.lower(), 0) + 1
  summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
  if not ranked:
    return f"No trial finished ({summary or 'no trials'})."
  best_file = Path(study.user_attrs.get(DIRECTORY, ".")) / studies.BEST_FILE
  tie = tie_note(everything)
  return "\n".join([f"Best trials ({summary}):", *lines, *([f"{tie[:1].upper()}{tie[1:]}."]
                    if tie else []), f"Best config: {best_file}"])


def _short(value) -> str:
  if isinstance(value, float) and math.isfinite(value):
    return f"{value:.4g}"
  return str(value)
