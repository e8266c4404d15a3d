"""The ``batchrl`` command: ``train``, ``visualize``, ``export``, ``configs``, ``run``, ``plot``,
``tune`` and ``bench``.

    batchrl train --config pendulum --logdir runs [--timestamp T] [--seed S] [--seeds K]
                  [--set key=value ...] [--track] [--ray [--address ADDR] [--runners N]
                  [--envs-per-runner M] [--max-restarts R] [--runner-timeout S]]
    batchrl visualize RUN --outdir videos [--num-episodes N] [--checkpoint PATH]
                      [--allow-untrained]
    batchrl export RUN --out policy.onnx [--checkpoint STEP] [--format onnx|jax]
    batchrl configs [NAME]
    batchrl tune --config NAME --logdir runs --trials N --search KEY=EXPR [--search ...]
                 [--set key=value ...] [--timestamp T] [--metric mean_score]
                 [--direction maximize|minimize] [--objective best|last]
                 [--sampler tpe|random|grid] [--pruner median|hyperband|none] [--seed S]
                 [--seeds-per-trial K] [--batch-trials auto|B] [--parallel P]
                 [--ray [--address ADDR] [--max-failures F] | --runners N [--address ADDR]]
                 [--no-tensorboard]
    batchrl plot RUN... [--x steps|time] [--metric mean_score] [--out plot.png]
    batchrl bench --suite NAME --logdir DIR [--jobs K] [--seeds S] [--lanes] [--only ITEMS]
                  [--report FILE.md] [--report-only] | --list | --write-docs
    batchrl run ENV_ID -a agent.json [-n network.json] [--episodes N] [--timesteps N]
                [--max-episode-timesteps N] [--seed S] [--num-parallel N] [--save DIR]
                [--load DIR] [--deterministic] [--log-every N] [--no-progress]

--logdir is always the directory that holds runs: train writes each run into
LOGDIR/<T>-<config>, tune its search into LOGDIR/<T>-<config>-tune, bench a suite's runs
into LOGDIR/runs. RUN is one run directory, LOGDIR/<T>-<config>: visualize, export and plot
take it as an argument or as --run RUN (plot takes several; a directory of runs stands for
every run in it).
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import shutil
import sys
from typing import ContextManager

from batchrl.errors import CheckpointError, RunFailure, UserInputError

log = logging.getLogger("batchrl")


RUN_HELP = "a run directory written by batchrl train (LOGDIR/<T>-<config>)"
# each command's line in `batchrl --help`, in the order a newcomer meets them
COMMANDS = {
    "train": "train a named config; the same command resumes it",
    "configs": "list the named configs and agents, or show one",
    "plot": "draw runs' learning curves into an image",
    "visualize": "record videos of a trained run's policy",
    "export": "write a run's policy to ONNX or StableHLO",
    "tune": "search a config's hyperparameters with Optuna",
    "bench": "train a benchmark suite and write its table",
    "run": "run an agent from JSON specs on a Gymnasium env",
}


def _description() -> str:
  """What ``batchrl --help`` opens with: plain text, one line per command."""
  width = max(map(len, COMMANDS))
  lines = [f"  {name.ljust(width)}  {summary}" for name, summary in COMMANDS.items()]
  return "\n".join(["Batched reinforcement learning on JAX.", "", "commands:", *lines, "",
                    "batchrl COMMAND --help shows a command's options."])


def _parser() -> argparse.ArgumentParser:
  # the module doc's first line is reStructuredText for the API pages: the help says its own
  parser = argparse.ArgumentParser(prog="batchrl", usage="%(prog)s [-h] COMMAND ...",
                                   description=_description(),
                                   epilog=__doc__.rsplit("\n\n", 1)[1],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  # the description lists the commands: argparse's own list wraps names and help texts
  sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                              help=argparse.SUPPRESS, prog="batchrl")

  train = _command(sub, "train",
                   "Train a named config (or a config file) into LOGDIR/<T>-<config>; "
                   "run with the same --timestamp, it resumes. Ctrl-C, or SIGTERM (kill "
                   "PID: a background job ignores Ctrl-C), stops with a checkpoint.")
  train.add_argument("--config", required=True, help="named config (see `batchrl configs`) "
                     "or a config file (a run's config.yaml, a search's best.yaml)")
  train.add_argument("--logdir", required=True, help="directory holding run directories")
  train.add_argument("--timestamp", help="run directory prefix; an existing run resumes")
  train.add_argument("--seed", type=int, help="shortcut for --set run.seed=S")
  train.add_argument("--seeds", type=int, help="train K agents at once in one compiled "
                     "program (gymnax envs, or host gymnasium envs stepped together)")
  train.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE", help="override a config field (repeatable)")
  train.add_argument("--no-progress", action="store_true", help="no progress bar")
  train.add_argument("--no-tensorboard", action="store_true", help="no TensorBoard events")
  train.add_argument("--track", action="store_true", help="also log the config and metrics "
                     "to Weights & Biases (pip install \"batchrl[track]\"; WANDB_MODE=offline "
                     "keeps the run on disk for `wandb sync`); as --set run.track=true, but not "
                     "part of the run's config, so a resumed run may add it")
  _add_ray_arguments(train)

  vis = _command(sub, "visualize")
  _add_run_arguments(vis)
  vis.add_argument("--outdir", required=True, help="where videos and stats are written")
  vis.add_argument("--num-episodes", type=int, default=1)
  vis.add_argument("--checkpoint", help="a checkpoint directory (default: the latest good)")
  vis.add_argument("--allow-untrained", action="store_true",
                   help="record a freshly initialised policy when there is no checkpoint")
  vis.add_argument("--seed", type=int, default=0)

  export = _command(sub, "export",
                    "Write a run's policy as a file that runs without batchrl (ONNX, or "
                    "jax.export StableHLO).")
  _add_run_arguments(export)
  export.add_argument("--checkpoint", type=int, metavar="STEP",
                      help="the checkpoint's step (default: the latest good one)")
  export.add_argument("--seed-index", type=int, metavar="I",
                      help="a run trained with --seeds K holds K agents: export the one at "
                      "index I, 0 to K-1 (default: 0)")
  export.add_argument("--out", required=True, help="file to write, e.g. policy.onnx")
  export.add_argument("--format", default="onnx", help="onnx (default; needs "
                      "pip install \"batchrl[export]\") or jax")

  configs = _command(sub, "configs")
  configs.add_argument("name", nargs="?", metavar="NAME", help="a named config: show its "
                       "fields, their values and what they do")
  _add_run_parser(sub)
  _add_tune_parser(sub)
  _add_bench_parser(sub)
  plot = _command(sub, "plot",
                  "Draw the learning curves (eval and train) of runs into an image.")
  _add_run_arguments(plot, several=True)
  plot.add_argument("--x", choices=("steps", "time"), default="steps",
                    help="x axis: environment steps, or minutes since the run started "
                    "(start-up and compiling included; default steps)")
  plot.add_argument("--metric", default="mean_score", help="metric to plot (default "
                    "mean_score)")
  plot.add_argument("--out", default="plot.png", help="image file to write (default "
                    "plot.png)")
  return parser


def _command(sub, name: str, description: str | None = None):
  """The subcommand ``name``: its line of ``COMMANDS`` is its help, and ``description`` (by
  default that line) opens its own ``--help``."""
  summary = COMMANDS[name]
  return sub.add_parser(name, help=summary,
                        description=description or f"{summary[:1].upper()}{summary[1:]}.")


def _add_run_arguments(command, several: bool = False) -> None:
  """The run a command reads: ``RUN`` or ``--run RUN`` (``several``: one or more of either;
  a directory of runs stands for its runs). ``--logdir RUN``, the old spelling of a single
  run, still works (``_take_run`` warns)."""
  if several:
    command.add_argument("runs", nargs="*", metavar="RUN", help=f"{RUN_HELP}, or a "
                         "directory of runs (every run in it)")
    command.add_argument("--run", dest="run_options", action="append", metavar="RUN",
                         help="the same as RUN (repeatable)")
  else:
    command.add_argument("run", nargs="?", metavar="RUN", help=RUN_HELP)
    command.add_argument("--run", dest="run_option", metavar="RUN", help="the same as RUN")
    command.add_argument("--logdir", dest="old_logdir", help=argparse.SUPPRESS)
  command.set_defaults(command_parser=command)


def _take_run(args) -> None:
  """Puts the run(s) given as ``RUN``, ``--run RUN`` or the old ``--logdir RUN`` into
  ``args.run`` (``args.runs`` for plot); giving none, or more than one spelling, is a usage
  error. The old spelling gets one warning on stderr."""
  parser = args.command_parser
  if args.command == "plot":
    if args.runs and args.run_options:
      parser.error("give the runs either as RUN... or as --run RUN, not both")
    args.runs = args.runs or args.run_options
    if not args.runs:
      parser.error("give one or more runs: RUN... or --run RUN (a run directory, "
                   "LOGDIR/<T>-<config>, or a directory of runs)")
    return
  given = [(how, value) for how, value in (("RUN", args.run), ("--run", args.run_option),
                                           ("--logdir", args.old_logdir)) if value is not None]
  if not given:
    parser.error("give the run directory (LOGDIR/<T>-<config>) as RUN or --run RUN")
  if len(given) > 1:
    parser.error("give the run directory once, as RUN or --run RUN; got "
                 f"{' and '.join(f'{how} {value!r}' for how, value in given)}")
  (how, args.run), = given
  if how == "--logdir":
    print(f"batchrl {args.command}: warning: --logdir RUN is the old spelling here; give the "
          f"run directory as RUN or --run RUN (--logdir is where train and tune put runs)",
          file=sys.stderr)


def _add_ray_arguments(train) -> None:
  ray = train.add_argument_group("distributed training on Ray (pip install \"batchrl[ray]\")")
  ray.add_argument("--ray", action="store_true", help="step the envs in Ray actors (env "
                   "runners); this process learns")
  ray.add_argument("--address", help="join the Ray cluster whose head is at HOST:PORT (or "
                   "'auto'); default: a local Ray instance under the run directory")
  ray.add_argument("--runners", type=int, help="env runners (default 2)")
  ray.add_argument("--envs-per-runner", type=int, metavar="M", help="envs per runner; the "
                   "run then has runners x M envs (default: run.num_envs / runners)")
  ray.add_argument("--max-restarts", type=int, help="runner replacements allowed "
                   "before the run stops (default 5)")
  ray.add_argument("--runner-timeout", type=float, metavar="SECONDS",
                   help="a runner silent this long in one call is replaced (default 300)")


def _ray_options(args):
  """``RayOptions`` from the command line (its defaults where a flag is not given), or None
  without ``--ray``."""
  given = {name: value for name, value in (
      ("address", args.address), ("runners", args.runners),
      ("envs_per_runner", args.envs_per_runner), ("max_restarts", args.max_restarts),
      ("runner_timeout", args.runner_timeout)) if value is not None}
  if not args.ray:
    if given:
      raise UserInputError(f"--{next(iter(given)).replace('_', '-')} only applies with --ray")
    return None
  from batchrl.distributed import RayOptions
  return RayOptions(**given)


def _add_run_parser(sub) -> None:
  run = _command(sub, "run",
                 "Run an agent from JSON specs on a Gymnasium env (TensorForce's "
                 "openai_gym.py).")
  run.add_argument("env_id", metavar="ENV_ID", help="a Gymnasium id, e.g. CartPole-v1")
  run.add_argument("-a", "--agent", help="agent spec: a JSON file (or an agent name)")
  run.add_argument("-n", "--network", help="network spec JSON file (default: auto)")
  run.add_argument("--episodes", type=int, help="stop after N episodes")
  run.add_argument("--timesteps", type=int, help="stop after N timesteps")
  run.add_argument("--max-episode-timesteps", type=int, help="cut episodes at N timesteps")
  run.add_argument("--seed", type=int, help="seeds the agent and the environments")
  run.add_argument("--num-parallel", type=int, help="N environments stepped as one batch "
                   "(default 1, or the loaded agent's parallel_interactions)")
  run.add_argument("--save", metavar="DIR", help="save the agent here after the run")
  run.add_argument("--load", metavar="DIR", help="run the agent saved here (no -a/-n)")
  run.add_argument("--deterministic", action="store_true",
                   help="act without exploration or sampling")
  run.add_argument("--log-every", type=int, default=100, metavar="N",
                   help="log a line every N episodes (default 100)")
  run.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_bench_parser(sub) -> None:
  bench = _command(sub, "bench",
                   "Train a benchmark suite (configs x envs x seeds; resumes where it "
                   "stopped) and write its table.")
  bench.add_argument("--suite", help="the suite to run (see --list)")
  bench.add_argument("--logdir", help="the suite's directory: its runs, logs and state; "
                     "the same --logdir resumes it")
  bench.add_argument("--jobs", type=int, default=1, metavar="K",
                     help="runs at once, each pinned to its share of the cores (default 1)")
  bench.add_argument("--seeds", type=int, metavar="S",
                     help="seeds 0 to S-1 of every entry (default: the suite's, 3 for most)")
  bench.add_argument("--lanes", action="store_true", help="train each entry's seeds in one "
                     "run (batchrl train --seeds S: one program, their environments stepped "
                     "together), for a GPU, where processes sharing it add up to little; "
                     "give it to --report too")
  bench.add_argument("--only", metavar="ITEMS", help="train only these entries: "
                     "comma-separated configs, environments or CONFIG:ENV (e.g. td3_mujoco, "
                     "sac_mujoco:Ant-v5); the report still covers every run that exists")
  bench.add_argument("--report", metavar="FILE.md", help="write the suite's table (scores, "
                     "wall times, published references, curves) to this Markdown file")
  bench.add_argument("--report-only", action="store_true", help="write --report from the "
                     "runs that exist, training nothing")
  bench.add_argument("--list", action="store_true", help="list the suites")
  bench.add_argument("--write-docs", action="store_true", help="rewrite the results tables "
                     "of docs/benchmarks.md, and their curves, from benchmarks/records/ (in "
                     "a clone of the repository)")


def main(argv: list[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  if args.command in ("visualize", "export", "plot"):
    _take_run(args)
  if os.getcwd() not in sys.path and "" not in sys.path:
    # a `module:EnvId` env in the working directory imports as under `python -m batchrl`
    # (a console script leaves it off sys.path); appended, it shadows no installed module
    sys.path.append(os.getcwd())
  from batchrl.logging import setup_console_logging
  setup_console_logging()

  try:
    if args.command == "train":
      return _train(args)
    if args.command == "visualize":
      return _visualize(args)
    if args.command == "run":
      return _run(args)
    if args.command == "plot":
      return _plot(args)
    if args.command == "export":
      return _export(args)
    if args.command == "tune":
      return _tune(args)
    if args.command == "bench":
      return _bench(args)
    return _configs(args)
  except (UserInputError, CheckpointError, FileNotFoundError) as e:
    # A mistake in what the user gave: one line, no traceback. Anything else is a bug and
    # keeps its traceback.
    print(f"batchrl {args.command}: error: {e}", file=sys.stderr)
    return 2
  except RunFailure as e:  # the run could not go on (e.g. env runners kept failing)
    print(f"batchrl {args.command}: error: {e}", file=sys.stderr)
    return 1
  except BrokenPipeError:  # output piped into e.g. `head`, which closed early
    sys.stderr.close()
    return 0
  except KeyboardInterrupt:  # (`batchrl train` says itself what a stopped run kept)
    print(f"batchrl {args.command}: interrupted.", file=sys.stderr)
    return 130


def _train(args) -> int:
  # the config, its overrides and a `module:EnvId` env's module are checked before anything
  # imports JAX, so that a mistake in them is an error at once
  from batchrl import configs
  from batchrl.envs.core import import_env_module

  named = configs.load(args.config)
  ray = _ray_options(args)
  overrides = list(args.overrides) + ([f"run.seed={args.seed}"] if args.seed is not None else [])
  overrides += ray.overrides() if ray else []
  exp = configs.apply_overrides(named, overrides)
  if exp.run.backend == "gymnasium":
    import_env_module(exp.run.env)
  from batchrl import compilation_cache
  from batchrl.train import build, interrupt, local, loop, rundir, track

  compilation_cache.enable_from_environment()
  if args.track or exp.run.track:  # the optional extra, before anything runs
    track.require_wandb()
  local.check_seeds(exp, args.seeds)
  if ray:  # before a run directory exists; a resumed run splits its saved num_envs
    from batchrl import distributed
    distributed.preflight(exp, ray, args.seeds)
  build.check_env(exp.run, exp)  # the env, its preprocessing and the agent's networks
  run_dir = rundir.named_run_directory(args.logdir, exp.name, exp.run.env,
                                       configs.own_env(named), args.timestamp)
  resume = _resume_command(args, timestamp=args.timestamp or run_dir.name.partition("-")[0])
  existed = run_dir.exists()
  exp, resumed = rundir.prepare_run(run_dir, exp, overrides if args.timestamp else [])
  ctrl_c = interrupt.CtrlC("stopping after the update under way (in a fused run, the "
                           "updates of about half a second), then saving a checkpoint "
                           "(Ctrl-C or SIGTERM again stops at once).",
                           kept=lambda: _kept(run_dir, resume, at_once=True))
  try:
    with ctrl_c:
      log.info(_with_note(rundir.start_message(run_dir, resumed),
                          ctrl_c.background_note("which saves a checkpoint first")))
      with _trainer(exp, run_dir, args.seeds, ray) as trainer:
        result = loop.run(trainer, progress=not args.no_progress and sys.stderr.isatty(),
                          use_tensorboard=not args.no_tensorboard,
                          stop=lambda: ctrl_c.requested, track=args.track or None)
        stopped = trainer.iteration < trainer.plan["total"]
  except UserInputError:
    if not existed:
      rundir.remove_new_run(run_dir)
    raise
  except KeyboardInterrupt:  # the second Ctrl-C
    log.warning(_kept(run_dir, resume, at_once=True))
    return interrupt.EXIT_CODE
  if stopped:  # the first Ctrl-C: the loop checkpointed and returned
    log.warning(_kept(run_dir, resume, at_once=False))
    return interrupt.EXIT_CODE
  if result:
    log.info("Done: %s (final eval score %s)", run_dir, result.get("mean_score"))
  return 0


def _with_note(line: str, note: str | None) -> str:
  return f"{line}. {note}" if note else line


def _resume_command(args, timestamp: str) -> str:
  """The ``batchrl train`` command that resumes this run: its flags, and its timestamp."""
  argv = ["batchrl", "train", "--config", args.config, "--logdir", args.logdir,
          "--timestamp", timestamp]
  for flag, value in (("--seed", args.seed), ("--seeds", args.seeds)):
    argv += [flag, str(value)] if value is not None else []
  for override in args.overrides:
    argv += ["--set", override]
  argv += ["--no-progress"] * args.no_progress + ["--no-tensorboard"] * args.no_tensorboard
  argv += ["--track"] * args.track
  argv += ["--ray"] * args.ray
  for flag, value in (("--address", args.address), ("--runners", args.runners),
                      ("--envs-per-runner", args.envs_per_runner),
                      ("--max-restarts", args.max_restarts),
                      ("--runner-timeout", args.runner_timeout)):
    argv += [flag, str(value)] if value is not None else []
  return shlex.join(argv)


def _kept(run_dir, resume: str, *, at_once: bool) -> str:
  """What a run stopped by Ctrl-C keeps, and how to go on."""
  from batchrl.train import rundir
  step = rundir.kept_step(run_dir)
  how = "Stopped at once" if at_once else "Stopped"
  if step is None:
    return (f"{how}: no checkpoint was written; this command starts the run again from "
            f"step 0:\n  {resume}")
  return (f"{how}: the checkpoint at step {step} is kept in {run_dir}/checkpoints. "
          f"Resume with:\n  {resume}")


def _trainer(exp, run_dir, seeds: int | None, ray) -> ContextManager:
  """The run's ``Trainer``, closed on exit: the Ray learner with ``--ray`` (``ray``: its
  ``RayOptions``), else the local one."""
  if ray is None:
    from batchrl.train.local import LocalTrainer
    return contextlib.closing(LocalTrainer(exp, run_dir, seeds=seeds))
  from batchrl import distributed
  return distributed.trainer_on_ray(exp, run_dir, ray, seeds)


def _add_tune_parser(sub) -> None:
  tune = _command(sub, "tune",
                  "Search hyperparameters of a config with Optuna (pip install "
                  "\"batchrl[tune]\"); each trial is a run directory.")
  tune.add_argument("--config", required=True, help="named config or a config file")
  tune.add_argument("--logdir", required=True, help="the search goes to "
                    "LOGDIR/<timestamp>-<config>-tune (study.db, trials/<n>/, best.yaml)")
  tune.add_argument("--timestamp", help="search directory prefix; an existing search resumes")
  tune.add_argument("--trials", type=int, required=True,
                    help="trials the study holds when done (a resumed search runs the rest)")
  tune.add_argument("--search", action="append", required=True, metavar="KEY=EXPR",
                    help="a searched key (repeatable): KEY=loguniform(LOW,HIGH), "
                    "uniform(LOW,HIGH), int(LOW,HIGH) or choice(A,B,...)")
  tune.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="KEY=VALUE", help="override a config field in every trial")
  tune.add_argument("--metric", default="mean_score", help="evaluation metric a trial is "
                    "judged by (default mean_score)")
  tune.add_argument("--direction", choices=("maximize", "minimize"), default="maximize")
  tune.add_argument("--objective", choices=("best", "last"), default="best",
                    help="a trial's best evaluation of the metric, or its last (trials "
                    "that tie are ranked by the mean of their evaluations)")
  tune.add_argument("--sampler", choices=("tpe", "random", "grid"), default="tpe")
  tune.add_argument("--pruner", choices=("median", "hyperband", "none"), default="median",
                    help="stops trials whose evaluations are hopeless (default median)")
  tune.add_argument("--seed", type=int, help="seeds the sampler and every trial (run.seed)")
  tune.add_argument("--seeds-per-trial", type=int, default=1, metavar="K",
                    help="seeds per trial; the objective is their mean (default 1)")
  tune.add_argument("--batch-trials", type=_batch_trials, default=None, metavar="B",
                    help="train up to B trials side by side in one compiled program, "
                    "vmapped over their float values (gymnax configs); 1: one at a time; "
                    "default auto: side by side, as many as memory allows (at most 16), "
                    "where the config and the searched values allow it, else one at a time "
                    "(the search says which, and why)")
  tune.add_argument("--parallel", type=int, default=1, metavar="P",
                    help="run P trials at a time, each in its own worker process (or, with "
                    "--ray, as P concurrent Ray Tune trials; default 1)")
  tune.add_argument("--no-tensorboard", action="store_true", help="no TensorBoard events")
  ray = tune.add_argument_group("trials on Ray Tune (pip install \"batchrl[tune-ray]\")")
  ray.add_argument("--ray", action="store_true", help="run the trials as Ray Tune trials, "
                   "Optuna picking their values (the same study.db); a local Ray instance "
                   "with P CPUs unless --address")
  ray.add_argument("--address", help="(with --ray) the Ray cluster whose head is at "
                   "HOST:PORT (or 'auto'); its nodes must see --logdir at the same path")
  ray.add_argument("--max-failures", type=int, metavar="F",
                   help="(with --ray) times Ray restarts a trial whose process failed; it "
                   "resumes from its last checkpoint (default 2)")
  ray.add_argument("--runners", type=int, metavar="N",
                   help="(host configs, without --ray) trials one after another, each "
                   "stepping its run.num_envs envs in N Ray env runners, as batchrl train "
                   "--ray --runners N; on one local Ray instance unless --address")


def _batch_trials(text: str) -> int | None:
  """``--batch-trials``: ``auto`` (None) or an integer >= 1."""
  if text.strip().lower() == "auto":
    return None
  try:
    value = int(text)
  except ValueError:
    value = 0
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected 'auto' or an integer >= 1, got {text!r}")
  return value


def _tune(args) -> int:
  from batchrl import compilation_cache, tune
  from batchrl.train import interrupt

  compilation_cache.enable_from_environment()
  ctrl_c = interrupt.CtrlC(
      "the trials under way stop after their current update (a trial trained alone saves a "
      "checkpoint; trials side by side start again on resume); the same command (with its "
      "--timestamp) resumes the search. Ctrl-C or SIGTERM again stops at once.",
      kept=lambda: "Stopped at once; the same command (with its --timestamp) resumes the "
      "search from the trials' last checkpoints.")
  with ctrl_c:
    note = ctrl_c.background_note("which stops the trials as Ctrl-C does")
    if note:
      log.info(note)
    study = _search(args, tune, stop=lambda: ctrl_c.requested)
  print(tune.table(study))
  return 0


def _search(args, tune, stop):
  """``batchrl.tune.search`` with the command line's values."""
  if args.max_failures is not None and not args.ray:
    raise UserInputError("--max-failures only applies with --ray (the restarts Ray Tune "
                         "gives a failed trial).")
  restarts = {} if args.max_failures is None else {"max_failures": args.max_failures}
  return tune.search(args.config, args.search, trials=args.trials, logdir=args.logdir,
                     timestamp=args.timestamp, overrides=args.overrides,
                     sampler=args.sampler, pruner=args.pruner, metric=args.metric,
                     direction=args.direction, objective=args.objective, seed=args.seed,
                     seeds_per_trial=args.seeds_per_trial, batch_trials=args.batch_trials,
                     parallel=args.parallel, ray=args.ray, address=args.address,
                     runners=args.runners, tensorboard=not args.no_tensorboard, **restarts,
                     stop=stop)


def _bench(args) -> int:
  from batchrl.bench import docs, report, runs, suites
  if args.list:
    print(suites.table())
    return 0
  if args.write_docs:
    changed = docs.write()
    print(f"Wrote {docs.PAGE}: {', '.join(changed) or 'no table'} changed")
    return 0
  if not args.suite or not args.logdir:
    raise UserInputError("give --suite NAME and --logdir DIR (the suites: batchrl bench "
                         "--list)")
  if args.report_only and not args.report:
    raise UserInputError("--report-only writes the table: give --report FILE.md too")
  suite = suites.suite(args.suite)
  trained = suites.select(suite, args.only)
  seeds = suite.seeds if args.seeds is None else args.seeds
  result = {"failed": [], "stopped": False}
  if not args.report_only:
    runs.plan(trained, seeds, args.lanes)  # bad configs or seeds fail before anything runs
    result = runs.run_suite(trained, args.logdir, seeds=seeds, jobs=args.jobs,
                            lanes=args.lanes)
    log.info("bench %s: %d runs trained, %d finished earlier, %d failed%s", suite.name,
             len(result["ran"]), len(result["skipped"]), len(result["failed"]),
             "; stopped: the same command resumes" if result["stopped"] else "")
  if args.report:
    command = shlex.join(["batchrl", "bench", "--suite", suite.name, "--logdir", args.logdir,
                          "--seeds", str(seeds), "--jobs", str(args.jobs)]
                         + (["--lanes"] if args.lanes else []))
    written = report.write_report(suite, args.logdir, args.report, seeds, command, args.lanes)
    print(f"Wrote {written}")
  if result["stopped"]:
    return 130
  if result["failed"]:
    raise RunFailure(f"{len(result['failed'])} runs failed: {', '.join(result['failed'])}; "
                     f"their output is in {os.path.join(args.logdir, 'logs')}")
  return 0


def _visualize(args) -> int:
  os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering, no display needed
  os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
  os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
  from batchrl import visualize

  result = visualize.visualize(args.run, args.outdir, num_episodes=args.num_episodes,
                               checkpoint_path=args.checkpoint,
                               allow_untrained=args.allow_untrained, seed=args.seed)
  for episode in result["episodes"]:
    log.info("Episode %d: return %.2f, length %d -> %s", episode["index"], episode["return"],
             episode["length"], episode["video"])
  return 0


def _export(args) -> int:
  from batchrl.export_run import export_run
  path, source = export_run(args.run, args.out, step=args.checkpoint, format=args.format,
                            seed_index=args.seed_index)
  print(f"Wrote {path} ({args.format}, checkpoint {source})")
  return 0


def _plot(args) -> int:
  from batchrl import plot
  path = plot.plot(args.runs, args.out, metric=args.metric, x=args.x)
  print(f"Wrote {path}")
  return 0


def _configs(args) -> int:
  from batchrl import configs
  from batchrl.configclass import describe

  if args.name is None:
    width = shutil.get_terminal_size().columns
    print(configs.REGISTRY.table(width))
    print(f"\nagents (Agent.create, batchrl run -a):\n{_agents_table(width)}")
    return 0
  exp = configs.get(args.name)
  print(f"{exp.name}\n\n[run]\n{describe(exp.run)}\n\n[{exp.agent}]\n"
        f"{describe(exp.config)}")
  return 0


def _agents_table(width: int | None = None) -> str:
  """Every agent name of the family list, with its family and description."""
  from batchrl.agents.catalog import ENTRIES
  from batchrl.configclass import format_table
  rows = [[name, e.name, description] for e in ENTRIES for name, description in e.agents.items()]
  return format_table(["agent", "family", "description"], rows, width)


def _run_agent(args):
  """The agent of ``batchrl run``: loaded from --load, or created from -a/-n."""
  from batchrl import Agent
  if args.load:
    if args.agent or args.network:
      raise UserInputError("--load runs a saved agent with its own spec; leave out "
                           "-a/--agent and -n/--network")
    return Agent.load(args.load)
  if not args.agent:
    raise UserInputError("give the agent spec with -a agent.json (or --load DIR for a saved "
                         "agent)")
  return Agent.create(agent=args.agent, environment=args.env_id,
                      network=args.network or "auto", seed=args.seed,
                      parallel_interactions=args.num_parallel or 1)


def _no_update_line(agent, timesteps: int) -> str | None:
  """Why a run of ``timesteps`` never updated the agent, and what one update needs; None
  for agents that never learn (random, constant)."""
  from batchrl.agents.families import family_of_type
  if family_of_type(agent.spec["type"]).config_class is None:
    return None
  needed = agent.timesteps_per_update
  if needed is not None:
    return (f"No update ran: this {agent.spec['type']} agent updates every {needed} "
            f"timesteps and the run took {timesteps}; give --timesteps {needed} or more "
            "(or more --episodes), or a smaller batch in the agent spec.")
  return (f"No update learned in {timesteps} timesteps: this {agent.spec['type']} agent "
          "first learns once enough experience is stored (first_update for replay agents, "
          "whole episodes for some); give more --timesteps or --episodes.")


def _run(args) -> int:
  from batchrl.execution import Runner

  if args.episodes is None and args.timesteps is None:
    raise UserInputError("give --episodes N and/or --timesteps N")
  if args.log_every < 1:
    raise UserInputError(f"--log-every must be >= 1, got {args.log_every}")
  agent = _run_agent(args)
  num_parallel = args.num_parallel or agent.parallel_interactions

  def report(runner) -> bool:
    if runner.episode % args.log_every == 0:
      log.info("Episode %d, timestep %d: reward %.2f, mean of the last 100 %.2f",
               runner.episode, runner.timestep, runner.episode_rewards[-1],
               runner.mean_reward(100))
    return True

  with Runner(agent, environment=args.env_id, num_parallel=num_parallel,
              max_episode_timesteps=args.max_episode_timesteps, seed=args.seed) as runner:
    runner.run(num_episodes=args.episodes, num_timesteps=args.timesteps,
               deterministic=args.deterministic, callback=report,
               progress=False if args.no_progress else None)
  if runner.episode:
    print(f"Mean reward of the last {min(runner.episode, 100)} episodes: "
          f"{runner.mean_reward(100):.2f} ({runner.episode} episodes, "
          f"{runner.timestep} timesteps)")
  else:
    print(f"No episode finished in {runner.timestep} timesteps.")
  if not args.deterministic and agent.updates == 0:
    line = _no_update_line(agent, runner.timestep)
    if line:
      print(line)
  if args.save:
    print(f"Saved the agent to {agent.save(args.save)}")
  agent.close()
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
