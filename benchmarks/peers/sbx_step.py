"""Time per learning step of sbx's (or SB3's / sb3-contrib's) SAC, TD3 or TQC on a MuJoCo
task: one env, one gradient step per env step, the values ``sbx_train.py`` uses (batchrl's
``mujoco_sac`` / ``mujoco_td3`` / ``mujoco_tqc``).

Runs in the peers' venv; prints one JSON line (``benchmarks/sac_step.py`` runs it):

    benchmarks/.peers-venv/bin/python benchmarks/peers/sbx_step.py --steps 2000

Learning starts after ``--learning-starts`` steps; a first ``learn`` of ``--warmup`` steps
past that compiles (sbx) and fills the caches, then ``learn`` over ``--steps`` more steps
(``reset_num_timesteps=False``) is timed: wall and CPU time of this process per step.

For sbx it also gives the arithmetic of its update: XLA's cost analysis of the ``_train``
programs its learning steps ran (it compiles one per place in the policy delay, the actor's
step in one of them), as ``update_gflop`` (their mean: an average gradient step) and
``update_gflop_max``.
"""
from __future__ import annotations

import inspect
import time

import _common
import sbx_train


def update_gflops(model) -> list[float]:
  """GFLOP of each ``_train`` program sbx's ``model`` runs over one policy delay's learning
  steps (one program per ``policy_delay_offset``), by XLA's cost analysis; it learns those
  steps to see the programs' arguments."""
  cls = type(model)
  original = inspect.getattr_static(cls, "_train")
  jitted = original.__func__
  signature, calls = inspect.signature(jitted), {}

  def spy(klass, *args):
    offset = signature.bind(klass, *args).arguments["policy_delay_offset"]
    calls.setdefault(offset, args)
    return jitted(klass, *args)

  cls._train = classmethod(spy)
  try:
    model.learn(total_timesteps=getattr(model, "policy_delay", 1), reset_num_timesteps=False)
  finally:
    cls._train = original
  flops = []
  for args in calls.values():
    cost = jitted.lower(cls, *args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops.append(cost["flops"] / 1e9)
  return flops


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
  result = {"peer": f"{args.library}_{args.algo}_step",
            "library": f"{args.library} {version(dist)}",
            "env": args.env, "steps": args.steps, "step_ms": wall / args.steps * 1e3,
            "cpu_ms": cpu / args.steps * 1e3}
  if args.library == "sbx":
    flops = update_gflops(model)
    result.update(update_gflop=sum(flops) / len(flops), update_gflop_max=max(flops))
  _common.emit(result)


if __name__ == "__main__":
  main()
