"""``ppo_atari`` against SB3's PPO on Breakout: whole-process time for the same agent steps.

The target (issue 53): ``batchrl train --config ppo_atari --set steps=20000``, the command
as a user types it (its default final evaluation included), in at most 0.75x the
whole-process time of SB3's PPO with the rl-zoo Atari settings (8 envs, Nature CNN, 128
steps, 4 epochs of 256, frame stack 4, the standard Atari wrappers) for the same steps,
measured in the same run::

    nice -n 10 python benchmarks/atari.py                # both, then the ratio
    nice -n 10 python benchmarks/atari.py --only ours    # or --only sb3
    python benchmarks/atari.py --sb3 --steps 20000       # the SB3 job itself (peers venv)

SB3 runs in the peers' venv (``benchmarks/peers/setup.py``; it needs ``ale-py`` there too:
``benchmarks/.peers-venv/bin/pip install ale-py``). Both jobs are timed from process start
(interpreter start-up, imports, compilation and env start-up included) to the process's
end; ours includes the final evaluation every run ends with (SB3's ``learn`` has none).
Each job's CPU seconds (its worker processes included) are printed too: on a machine shared
with other jobs they vary less than wall time. Our job is the CLI itself, in a temporary
log directory, with nothing set but the budget.

Measured 2026-11-26 on the idle 2-core machine, one invocation each (ours, then SB3 2.9.2),
with our evaluation cut to one step per env (the default evaluation then ran the whole
episode limit, 10k steps per env, and took longer than the training): 20480 steps, ours
95.7 s, SB3 65.9 s: 1.45x (CPU time 1.30x); with ``--set backend=envpool`` 88.2 s against
SB3's 75.1 s, 1.17x. Figures as typed since: docs/benchmarks.md and docs/environments.md (Atari).
Why 0.33x (an earlier target) is out of reach on a CPU: ``batchrl/configs/atari.py``.

Measured 2026-12-07 13:59 UTC on the idle 2-core machine (this command, both jobs, as
typed): ours 111.7 s (187.8 CPU-s), SB3 77.6 s (141.1 CPU-s): **1.44x** (CPU 1.33x). Per
1024-step iteration ours takes about 4.2-4.5 s: the 16 gradient steps 2.06 s (129 ms each;
torch's 119 ms), the values of the rollout 0.35 s, preparing, batching and finishing 0.3 s,
the rollout about 1.6 s; SB3 about 3.6 s. Why 0.75x is out of reach on 2 cores:
``batchrl/configs/atari.py``.

Imports nothing beyond the standard library at module level: the SB3 mode runs in the
peers' interpreter.

Measured 2026-11-26 on the idle 2-core machine, one invocation each (ours, then SB3 2.9.2):
20480 steps, ours 95.7 s, SB3 65.9 s: **1.45x** (CPU time 1.30x); 4096 steps, 31.6 s against
16.8 s: 1.88x (start-up weighs more). With ``--set backend=envpool`` (EnvPool's C++ games
inside the compiled rollout), 20480 steps: ours 88.2 s, SB3 75.1 s, 1.17x; in another
run the gymnasium backend took 101.0 s against SB3's 73.4 s (1.38x). Before that day's work
the 4096-step figure was 42.7 s
against 20.8 s (2.05x); the earlier "0.8-1.2x" had been read under load 3-4, where SB3's
two torch threads lost more than we did. Why 0.33x is out of reach on a CPU, and what made
ours faster: ``batchrl/configs/atari.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "peers")
GAME = "BreakoutNoFrameskip-v4"


def sb3_main(steps: int, seed: int) -> None:
  """SB3 PPO with rl-zoo's ``atari`` hyper-parameters (runs in the peers' venv)."""
  sys.path.insert(0, PEERS)
  # the clock before the libraries below: off Linux it counts from its own import
  from _common import process_seconds  # the peers' clock (process start = 0)
  # isort: split

  import ale_py
  import gymnasium as gym
  from stable_baselines3 import PPO
  from stable_baselines3.common.env_util import make_atari_env
  from stable_baselines3.common.vec_env import VecFrameStack

  gym.register_envs(ale_py)
  env = VecFrameStack(make_atari_env(GAME, n_envs=8, seed=seed), n_stack=4)
  linear = lambda start: (lambda progress: progress * start)  # rl-zoo's lin_
  model = PPO("CnnPolicy", env, n_steps=128, n_epochs=4, batch_size=256,
              learning_rate=linear(2.5e-4), clip_range=linear(0.1), vf_coef=0.5,
              ent_coef=0.01, seed=seed, verbose=0)
  start = process_seconds()
  model.learn(total_timesteps=steps)
  end = process_seconds()
  print(json.dumps({"peer": "sb3_ppo_atari", "steps": steps, "startup_s": round(start, 2),
                    "train_s": round(end - start, 2), "total_s": round(end, 2)}), flush=True)


def last_json(stdout: str) -> dict:
  for line in reversed(stdout.splitlines()):
    if line.strip().startswith("{"):
      return json.loads(line)
  raise RuntimeError(f"no JSON result in:\n{stdout[-2000:]}")


def timed(cmd: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, float, float]:
  """Runs ``cmd``; its wall seconds and CPU seconds (user + system, its waited-for worker
  processes included: on a shared machine the CPU time is the steadier figure)."""
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
  wall = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  return proc, wall, cpu


def run_sb3(steps: int, seed: int) -> dict:
  python = os.path.join(HERE, ".peers-venv", "bin", "python")
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
  proc, wall, cpu = timed([python, os.path.abspath(__file__), "--sb3", "--steps", str(steps),
                           "--seed", str(seed)], env=env)
  if proc.returncode:
    raise RuntimeError(f"SB3 job failed:\n{proc.stderr[-3000:]}")
  return dict(last_json(proc.stdout), wall_s=round(wall, 2), cpu_s=round(cpu, 2))


def run_ours(steps: int, seed: int, extra: list[str]) -> dict:
  """``batchrl train --config ppo_atari`` as its own process; wall time from its start."""
  with tempfile.TemporaryDirectory() as logdir:
    cmd = [sys.executable, "-m", "batchrl", "train", "--config", "ppo_atari", "--logdir",
           logdir, "--seed", str(seed), "--no-progress", "--set", f"steps={steps}", *extra]
    proc, wall, cpu = timed(cmd)
  if proc.returncode:
    raise RuntimeError(f"batchrl job failed:\n{proc.stderr[-3000:]}")
  return {"name": "batchrl_ppo_atari", "steps": steps, "total_s": round(wall, 2),
          "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--steps", type=int, default=20_000, help="agent steps (default 20000)")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--only", choices=("ours", "sb3"), default=None)
  p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                 help="extra --set for our run (e.g. ppo.update_loop=scan)")
  p.add_argument("--sb3", action="store_true", help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if args.sb3:
    sb3_main(args.steps, args.seed)
    return 0
  extra = [x for value in args.set for x in ("--set", value)]
  results = {}
  if args.only in (None, "ours"):
    results["ours"] = run_ours(args.steps, args.seed, extra)
    print(json.dumps(results["ours"]), flush=True)
  if args.only in (None, "sb3"):
    results["sb3"] = run_sb3(args.steps, args.seed)
    print(json.dumps(results["sb3"]), flush=True)
  for name, result in results.items():
    print(f"{name:5s} {result['steps']} agent steps: {result['wall_s']:.1f} s whole process "
          f"({result['steps'] / result['wall_s']:.1f} agent steps/s), {result['cpu_s']:.1f} "
          "CPU-s")
  if len(results) == 2:
    ours, sb3 = results["ours"], results["sb3"]
    print(f"ours / SB3 whole-process time: {ours['wall_s'] / sb3['wall_s']:.2f} (target <= "
          f"0.75); CPU time: {ours['cpu_s'] / sb3['cpu_s']:.2f}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
