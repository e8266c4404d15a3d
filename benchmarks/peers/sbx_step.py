"""Time per learning step of sbx's (or SB3's / sb3-contrib's) SAC, TD3 or TQC on a MuJoCo
task: one env, one gradient step per env step, the values ``sbx_train.py`` uses (batchrl's
``mujoco_sac`` / ``mujoco_td3`` / ``mujoco_tqc``).

Runs in the peers' venv; prints one JSON line (``benchmarks/sac_step.py`` runs it):

    benchmarks/.peers-venv/bin/python benchmarks/peers/sbx_step.py --steps 2000

Learning starts after ``--learning-starts`` steps; a first ``learn`` of ``--warmup`` steps
past that compiles (sbx) and fills the caches, then ``learn`` over ``--steps`` more steps
(``reset_num_timesteps=False``) is timed: wall and CPU time of this process per step.
"""
from __future__ import annotations

import time

import _common
import sbx_train


def main() -> None:
  p = _common.parser(__doc__.splitlines()[0], steps=2_000, episodes=0, target=float("nan"),
                     envs=sbx_train.ENVS)
  p.add_argument("--library", choices=("sbx", "sb3"), default="sbx")
  p.add_argument("--algo", choices=tuple(sbx_train.VALUES), default="sac")
  p.add_argument("--learning-starts", type=int, default=300)
  p.add_argument("--warmup", type=int, default=200, help="learning steps before the timing")
  args = p.parse_args()

  from importlib.metadata import version

  import gymnasium as gym
  sbx_train.patch_start_sampling()
  if args.library == "sb3":
    import torch
    torch.set_num_threads(1)  # as benchmarks/peers runs SB3: its default spins when busy
  env = gym.make(args.env)
  model = sbx_train.build(args.library, args.algo, env, args.seed, uniform_start=False)
  model.learning_starts = args.learning_starts
  model.learn(total_timesteps=args.learning_starts + args.warmup)
  start, cpu = time.perf_counter(), time.process_time()
  model.learn(total_timesteps=args.steps, reset_num_timesteps=False)
  wall, cpu = time.perf_counter() - start, time.process_time() - cpu
  dist = sbx_train.distribution(args.library, args.algo)
  _common.emit({"peer": f"{args.library}_{args.algo}_step",
                "library": f"{args.library} {version(dist)}",
                "env": args.env, "steps": args.steps, "step_ms": wall / args.steps * 1e3,
                "cpu_ms": cpu / args.steps * 1e3})


if __name__ == "__main__":
  main()
