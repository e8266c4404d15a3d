"""Hyperparameter search benchmark (not a test): 16 trials of ``cartpole_fused`` in one
compiled program against one ``batchrl train`` of the same config and budget.

    python benchmarks/tune.py                   # 16 trials, 200k steps each
    python benchmarks/tune.py --trials 8 --steps 100000 --sequential
    python benchmarks/tune.py --ray-pendulum [--steps 150000]   # issue 19's --ray target

Every row is a fresh process with an empty compilation cache (start-up, imports,
compilation, training and evaluations included), run one after the other in this
invocation:

- train: ``batchrl train --config cartpole_fused --set steps=STEPS`` (the default config);
- batched: ``batchrl tune --trials N --batch-trials N --search
  'learning_rate=loguniform(1e-4,1e-2)'`` (all trials in one program, vmapped over the
  learning rate);
- sequential (``--sequential``): the same search, trials one after another.

- ray-pendulum (``--ray-pendulum``, instead of the rows above): 4 trials of the host
  ``pendulum`` config with ``--ray --parallel 2`` (a local 2-CPU Ray, the trials 2 at a
  time), reporting the wall time and that all 4 complete.

Issue 19's target: batched <= 4x train's wall time, its best trial within 5% of the
default config's best evaluation. rl-zoo's Optuna search is not measured here.

Measured (2026-11-25, the shared 2-core CPU at load average 12-17 from other jobs, so noisy;
16 trials, 200k steps): train 49.3 / 47.1 / 24.0 s, batched 131 / 254 / 100 s = 2.66x /
5.39x (tests running beside it) / 4.18x; best trial 500 = the default's 500 every time.
--ray-pendulum (2026-11-26, same machine, load average 10-18): 4 trials of 150000 steps (the
config's budget), 2 at a time on a local 2-CPU Ray: all 4 complete in 207 s (best
mean_score -125.9); with --steps 50000, 119 s.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ppo import cold_process  # noqa: E402  (a benchmark script beside this one)

SPACE = "learning_rate=loguniform(1e-4,1e-2)"


def cold_tune(trials: int, steps: int, batch_trials: int) -> dict:
  """``batchrl tune`` as a fresh process with an empty compilation cache."""
  with tempfile.TemporaryDirectory() as tmp:
    env = dict(os.environ, BATCHRL_CACHE_DIR=os.path.join(tmp, "xla"))
    cmd = [sys.executable, "-m", "batchrl", "tune", "--config", "cartpole_fused", "--logdir",
           os.path.join(tmp, "runs"), "--trials", str(trials), "--search", SPACE, "--set",
           f"steps={steps}", "--batch-trials", str(batch_trials), "--seed", "0",
           "--pruner", "none", "--no-tensorboard"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
      raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    best = []
    for path in Path(tmp, "runs").glob("*/trials/*/metrics.jsonl"):
      scores = [json.loads(line).get("mean_score") for line in path.read_text().splitlines()
                if '"phase": "eval"' in line]
      best.append(max(s for s in scores if s is not None))
  return {"wall_s": wall, "best": max(best), "trials": len(best)}


def ray_pendulum(steps: int, trials: int = 4, parallel: int = 2) -> dict:
  """``batchrl tune --config pendulum --ray --parallel 2`` as a fresh process: its wall time
  and the states of its trials."""
  with tempfile.TemporaryDirectory() as tmp:
    env = dict(os.environ, BATCHRL_CACHE_DIR=os.path.join(tmp, "xla"),
               RAY_USAGE_STATS_ENABLED="0")
    cmd = [sys.executable, "-m", "batchrl", "tune", "--config", "pendulum", "--logdir",
           os.path.join(tmp, "runs"), "--trials", str(trials), "--search", SPACE,
           "--set", f"steps={steps}", "--seed", "0", "--pruner", "none", "--no-tensorboard",
           "--ray", "--parallel", str(parallel)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
      raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return {"wall_s": wall, "table": proc.stdout.strip()}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--trials", type=int, default=16)
  parser.add_argument("--steps", type=int, default=200_000)
  parser.add_argument("--sequential", action="store_true", help="also the one-at-a-time search")
  parser.add_argument("--ray-pendulum", action="store_true",
                      help="4 trials of the host pendulum config on Ray, 2 at a time "
                      "(--steps each; the config's budget is 150000)")
  args = parser.parse_args()
  if args.ray_pendulum:
    result = ray_pendulum(args.steps)
    print(f"tune --ray --parallel 2, 4 pendulum trials of {args.steps} steps: "
          f"{result['wall_s']:.1f} s\n{result['table']}")
    return
  train = cold_process("cartpole_fused", [f"steps={args.steps}"])
  default_best = max(score for _, score in train["evals"])
  print(f"train (default config): {train['wall_s']:.1f} s, best eval {default_best:.1f}")
  rows = [("batched", args.trials)] + ([("sequential", 1)] if args.sequential else [])
  for name, batch in rows:
    tune = cold_tune(args.trials, args.steps, batch)
    print(f"tune {name} ({tune['trials']} trials): {tune['wall_s']:.1f} s = "
          f"{tune['wall_s'] / train['wall_s']:.2f}x train (target <= 4x), best trial "
          f"{tune['best']:.1f} ({tune['best'] / default_best:.1%} of the default's)")


if __name__ == "__main__":
  main()
