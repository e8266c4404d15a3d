"""The ``batchrl`` command: ``train``, ``visualize``, ``configs``, ``run`` and ``plot``.

    batchrl train --config pendulum --logdir runs [--timestamp T] [--seed S] [--seeds K]
                  [--set key=value ...] [--ray [--address ADDR] [--runners N]
                  [--envs-per-runner M] [--max-restarts R] [--runner-timeout S]]
    batchrl visualize --logdir runs/<T>-pendulum --outdir videos [--num-episodes N]
                      [--checkpoint PATH] [--allow-untrained]
    batchrl configs [NAME]
    batchrl plot RUN_OR_LOGDIR... [--x steps|time] [--metric mean_score] [--out plot.png]
    batchrl run ENV_ID -a agent.json [-n network.json] [--episodes N] [--timesteps N]
                [--max-episode-timesteps N] [--seed S] [--num-parallel N] [--save DIR]
                [--load DIR] [--deterministic] [--log-every N] [--no-progress]
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from typing import ContextManager

from batchrl.errors import UserInputError

log = logging.getLogger("batchrl")


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="batchrl", description=__doc__.splitlines()[0])
  sub = parser.add_subparsers(dest="command", required=True)

  train = sub.add_parser("train", help="train a named config (resumes an existing run)")
  train.add_argument("--config", required=True, help="named config (see `batchrl configs`)")
  train.add_argument("--logdir", required=True, help="directory holding run directories")
  train.add_argument("--timestamp", help="run directory prefix; an existing run resumes")
  train.add_argument("--seed", type=int, help="shortcut for --set run.seed=S")
  train.add_argument("--seeds", type=int, help="train K agents at once in one compiled "
                     "program (gymnax backend only)")
  train.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE", help="override a config field (repeatable)")
  train.add_argument("--no-progress", action="store_true", help="no progress bar")
  train.add_argument("--no-tensorboard", action="store_true", help="no TensorBoard events")
  _add_ray_arguments(train)

  vis = sub.add_parser("visualize", help="record videos of a trained run's policy")
  vis.add_argument("--logdir", required=True, help="the run directory (<T>-<config>)")
  vis.add_argument("--outdir", required=True, help="where videos and stats are written")
  vis.add_argument("--num-episodes", type=int, default=1)
  vis.add_argument("--checkpoint", help="a checkpoint directory (default: the latest good)")
  vis.add_argument("--allow-untrained", action="store_true",
                   help="record a freshly initialised policy when there is no checkpoint")
  vis.add_argument("--seed", type=int, default=0)

  configs = sub.add_parser("configs", help="list named configs, or show one")
  configs.add_argument("name", nargs="?")
  _add_run_parser(sub)
  plot = sub.add_parser("plot", help="learning curves of runs (eval and train) into an image")
  plot.add_argument("paths", nargs="+", metavar="RUN_OR_LOGDIR")
  plot.add_argument("--x", choices=("steps", "time"), default="steps",
                    help="x axis: environment steps or wall time (default steps)")
  plot.add_argument("--metric", default="mean_score", help="metric to plot (default "
                    "mean_score)")
  plot.add_argument("--out", default="plot.png", help="image file to write (default "
                    "plot.png)")
  return parser


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
  run = sub.add_parser("run", help="run an agent from JSON specs on a Gymnasium env "
                       "(TensorForce's openai_gym.py)")
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


def main(argv: list[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  from batchrl.logging import setup_console_logging
  setup_console_logging()
  from batchrl.checkpoint import CheckpointError
  from batchrl.errors import RunFailure

  try:
    if args.command == "train":
      return _train(args)
    if args.command == "visualize":
      return _visualize(args)
    if args.command == "run":
      return _run(args)
    if args.command == "plot":
      return _plot(args)
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
  except KeyboardInterrupt:
    print(f"batchrl {args.command}: interrupted; the last checkpoint is kept.",
          file=sys.stderr)
    return 130


def _enable_compilation_cache() -> None:
  """Persist compiled programs, so re-runs and resumes skip most of XLA's compile time.

  ``BATCHRL_COMPILATION_CACHE=0`` turns it off; ``BATCHRL_CACHE_DIR`` moves it.
  """
  if os.environ.get("BATCHRL_COMPILATION_CACHE", "1") == "0":
    return
  import jax
  default = os.path.join(os.path.expanduser("~"), ".cache", "batchrl", "xla")
  jax.config.update("jax_compilation_cache_dir", os.environ.get("BATCHRL_CACHE_DIR", default))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def _train(args) -> int:
  from batchrl import configs
  from batchrl.train import build, local, loop, rundir

  _enable_compilation_cache()
  exp = configs.get(args.config)
  ray = _ray_options(args)
  overrides = list(args.overrides) + ([f"run.seed={args.seed}"] if args.seed is not None else [])
  overrides += ray.overrides() if ray else []
  exp = configs.apply_overrides(exp, overrides)
  local.check_seeds(exp, args.seeds)
  if ray:  # before a run directory exists; a resumed run splits its saved num_envs
    from batchrl import distributed
    distributed.preflight(exp, ray, args.seeds)
  build.check_env(exp.run)
  run_dir = rundir.run_directory(args.logdir, exp.name, args.timestamp)
  existed = run_dir.exists()
  exp, resumed = rundir.prepare_run(run_dir, exp, overrides if args.timestamp else [])
  log.info("%s run %s", "Resuming" if resumed else "Starting", run_dir)
  try:
    with _trainer(exp, run_dir, args.seeds, ray) as trainer:
      result = loop.run(trainer, progress=not args.no_progress and sys.stderr.isatty(),
                        use_tensorboard=not args.no_tensorboard)
  except UserInputError:
    if not existed:
      rundir.remove_new_run(run_dir)
    raise
  if result:
    log.info("Done: %s (final eval score %s)", run_dir, result.get("mean_score"))
  return 0


def _trainer(exp, run_dir, seeds: int | None, ray) -> ContextManager:
  """The run's ``Trainer``, closed on exit: the Ray learner with ``--ray`` (``ray``: its
  ``RayOptions``), else the local one."""
  if ray is None:
    from batchrl.train.local import LocalTrainer
    return contextlib.closing(LocalTrainer(exp, run_dir, seeds=seeds))
  from batchrl import distributed
  return distributed.trainer_on_ray(exp, run_dir, ray, seeds)


def _visualize(args) -> int:
  os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering, no display needed
  os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
  os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
  from batchrl import visualize

  result = visualize.visualize(args.logdir, args.outdir, num_episodes=args.num_episodes,
                               checkpoint_path=args.checkpoint,
                               allow_untrained=args.allow_untrained, seed=args.seed)
  for episode in result["episodes"]:
    log.info("Episode %d: return %.2f, length %d -> %s", episode["index"], episode["return"],
             episode["length"], episode["video"])
  return 0


def _plot(args) -> int:
  from batchrl import plot
  path = plot.plot(args.paths, args.out, metric=args.metric, x=args.x)
  print(f"Wrote {path}")
  return 0


def _configs(args) -> int:
  from batchrl import configs
  from batchrl.configclass import describe

  if args.name is None:
    print(configs.REGISTRY.table())
    print(f"\nagents (Agent.create, batchrl run -a):\n{_agents_table()}")
    return 0
  exp = configs.get(args.name)
  print(f"{exp.name}\n\n[run]\n{describe(exp.run)}\n\n[{exp.agent}]\n"
        f"{describe(exp.config)}")
  return 0


def _agents_table() -> str:
  """Every agent name of the family list, with its family and description."""
  from batchrl.agents.families import FAMILIES
  rows = [(t.name, f.name, t.description) for f in FAMILIES for t in f.api_types]
  width = [max(len(r[i]) for r in rows) for i in range(2)]
  return "\n".join(f"{a.ljust(width[0])}  {b.ljust(width[1])}  {c}" for a, b, c in rows)


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
  if args.save:
    print(f"Saved the agent to {agent.save(args.save)}")
  agent.close()
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
