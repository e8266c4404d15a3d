"""Distributed benchmark (not a test): the same run locally and on Ray, side by side.

    python benchmarks/distributed.py                       # pendulum (16 envs), cheetah (8)
    python benchmarks/distributed.py --configs pendulum --steps 80000 --repeats 3

Each row is ``batchrl train --config NAME`` as a fresh process, once with the local host
driver (``run.num_workers`` worker processes) and once with ``--ray --runners N`` (a local
Ray instance, N env runners of num_envs / N envs each), the same number of envs. Printed:
steady environment throughput (median of the train reports after the first, which holds
the compilation), start-up (process start to the first report, less the first report's
steps at the steady rate: imports, Ray, runners, compilation), and the Ray / local ratio.
Target (issue 9): Ray throughput >= 0.8x local with 2 runners on this 2-core machine.

    python benchmarks/distributed.py --whole --configs pendulum --steps 100000 --repeats 3

``--whole`` runs the command as a user types it (``batchrl train --config NAME [--ray] --set
steps=STEPS``, the config's own reports, evaluations, checkpoints and TensorBoard) and prints
the Ray / local ratio of whole-process wall time per pair. Target (issue 18): <= 1.3x for
``pendulum`` at 100k steps.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(config: str, steps: int, ray_runners: int | None, whole: bool = False) -> dict:
  """One cold ``batchrl train`` process; its throughput and start-up from metrics.jsonl.
  ``whole``: the config's own cadence and Ray's default runners, as a user runs it."""
  with tempfile.TemporaryDirectory() as tmp:
    cmd = [sys.executable, "-m", "batchrl", "train", "--config", config, "--logdir", tmp,
           "--no-progress", "--set", f"run.steps={steps}"]
    if not whole:
      cmd += ["--no-tensorboard", "--set", f"run.report_every={max(steps // 8, 1)}",
              "--set", "run.eval_every=0", "--set", "run.checkpoint_every=0"]
    if ray_runners:
      cmd += ["--ray"] + ([] if whole else ["--runners", str(ray_runners)])
    env = dict(os.environ, BATCHRL_CACHE_DIR=os.path.join(tmp, "xla"))
    started = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.time() - started
    if proc.returncode != 0:
      raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    path = next(Path(tmp).glob("*/metrics.jsonl"))
    train = [r for r in map(json.loads, path.read_text().splitlines())
             if r["phase"] == "train"]
  rate = statistics.median(r["steps_per_second"] for r in train[1:])
  startup = train[0]["wall_time"] - started - train[0]["step"] / rate
  return {"rate": rate, "startup": startup, "wall": wall}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--configs", default="pendulum,cheetah",
                      help="comma list of host-env named configs")
  parser.add_argument("--steps", type=int, default=80_000, help="env steps per run")
  parser.add_argument("--runners", type=int, default=2)
  parser.add_argument("--repeats", type=int, default=1, help="alternating local/Ray runs")
  parser.add_argument("--whole", action="store_true",
                      help="whole-process wall time of the plain command (issue 18)")
  args = parser.parse_args()
  if importlib.util.find_spec("ray") is None:
    parser.error('Ray is not installed: pip install -e ".[ray]"')
  print(f"{'config':<12} {'mode':<10} {'steps/s':>9} {'start-up s':>11} {'wall s':>8}")
  for config in [c for c in args.configs.split(",") if c]:
    results = {"local": [], "ray": []}
    for _ in range(args.repeats):
      for mode in ("local", "ray"):
        result = run(config, args.steps, args.runners if mode == "ray" else None, args.whole)
        results[mode].append(result)
        print(f"{config:<12} {mode:<10} {result['rate']:>9,.0f} {result['startup']:>11.1f} "
              f"{result['wall']:>8.1f}", flush=True)
    if args.whole:
      ratio = [ray["wall"] / local["wall"] for ray, local in zip(results["ray"], results["local"])]
      print(f"{config:<12} Ray / local whole-process time: {statistics.median(ratio):.2f}x "
            f"(per pair: {', '.join(f'{x:.2f}' for x in ratio)}); target <= 1.3x")
      continue
    ratio = [ray["rate"] / local["rate"] for ray, local in zip(results["ray"], results["local"])]
    print(f"{config:<12} Ray / local throughput: {statistics.median(ratio):.2f}x "
          f"(per pair: {', '.join(f'{x:.2f}' for x in ratio)}); target >= 0.8x")


if __name__ == "__main__":
  main()
