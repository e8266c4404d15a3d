"""PQN against DQN (not a test): the named configs as a user types them, in one run.

    python benchmarks/pqn.py                     # CartPole and MinAtar Breakout pairs
    python benchmarks/pqn.py --only cartpole     # a subset

Each row is ``batchrl train --config NAME`` as a fresh process with an empty compilation
cache (``ppo.cold_process``: start-up, imports, compilation, training and evaluations
included), read back from its ``metrics.jsonl``; PQN and DQN run one after the other in the
same invocation, so they see the same machine.

- cartpole: ``pqn_cartpole_fused`` against ``dqn_cartpole_fused`` (gymnax CartPole-v1, one
  compiled program each), cold (empty caches: a user's first run of the config), then again
  with the compilation cache the cold run filled (every later run, ``batchrl train``'s
  default cache). Target: PQN's best evaluation >= 475, its whole process in at
  most 0.5x DQN's.
- minatar: ``pqn_minatar_breakout`` against ``dqn_minatar_breakout`` (gymnax MinAtar
  Breakout). Target: PQN reaches DQN's best evaluation in at most 0.3x the time DQN took to
  reach it (times from process start to the evaluation's record).

Times to a score are from the process start to the ``wall_time`` of the first evaluation
record at or above it, so they include start-up and compilation as the user waits for them.
Each row also says where the time went: its first report (start-up, compiling and the first
train phase), its evaluations in all, and the process's CPU time (on a shared machine, the
steadier figure).
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [BENCHMARKS, os.path.dirname(BENCHMARKS)]
from ppo import TARGET, cold_process  # noqa: E402  (after the path tweak above)

PAIRS = {
    "cartpole": ("pqn_cartpole_fused", "dqn_cartpole_fused"),
    "minatar": ("pqn_minatar_breakout", "dqn_minatar_breakout"),
}


def timed_run(config: str, cache_dir: str | None = None) -> dict:
  """``cold_process`` plus ``evals`` as ``(step, score, seconds from process start)``;
  ``cache_dir``: with that compilation cache instead of an empty one."""
  print(f"  batchrl train --config {config} ...", flush=True)
  start = time.time()
  run = cold_process(config, cache_dir=cache_dir)
  run["timed_evals"] = [(r["step"], r["mean_score"], r["wall_time"] - start)
                        for r in run["records"]
                        if r.get("phase") == "eval" and r.get("mean_score") is not None]
  trains = [r["wall_time"] - start for r in run["records"] if r.get("phase") == "train"]
  # start-up, compiling and the first train phase; then what the evaluations took
  run["first_report_s"] = min(trains)
  run["eval_s"] = sum(r.get("eval_seconds", 0.0) for r in run["records"]
                      if r.get("phase") == "eval")
  return run


def first_at(run: dict, score: float) -> tuple[int, float] | None:
  """``(step, seconds)`` of the first evaluation >= ``score``; None when never."""
  for step, value, seconds in run["timed_evals"]:
    if value >= score:
      return step, seconds
  return None


def describe(name: str, run: dict, score: float) -> str:
  best = max(v for _, v, _ in run["timed_evals"])
  reached = first_at(run, score)
  when = (f"{reached[0]} steps, {reached[1]:.1f} s" if reached else "never")
  return (f"{name}: {run['steps']} steps, whole process {run['wall_s']:.1f} s, final eval "
          f"{run['final_return']:.2f}, best {best:.2f}, >= {score:g} at {when} (first "
          f"report {run['first_report_s']:.1f} s, evaluations {run['eval_s']:.1f} s, CPU "
          f"{run['cpu_s']:.1f} s)")


def cartpole() -> list[str]:
  """Cold processes (empty compilation caches), then each config again with the cache its
  cold run filled: a user's first run of a config, and every later one."""
  pqn_name, dqn_name = PAIRS["cartpole"]
  lines = []
  with tempfile.TemporaryDirectory() as tmp:
    caches = {name: os.path.join(tmp, name) for name in (pqn_name, dqn_name)}
    # the first pair finds each cache empty and fills it for the second
    for label in ("cold", "warm cache"):
      pqn, dqn = (timed_run(name, caches[name]) for name in (pqn_name, dqn_name))
      best = max(v for _, v, _ in pqn["timed_evals"])
      ok = best >= TARGET and pqn["wall_s"] <= 0.5 * dqn["wall_s"]
      lines += [f"{label}: " + describe(pqn_name, pqn, TARGET),
                f"{label}: " + describe(dqn_name, dqn, TARGET),
                f"{label}: whole process PQN / DQN: {pqn['wall_s'] / dqn['wall_s']:.2f}x "
                f"(target: best >= {TARGET:g} and <= 0.5x: {'met' if ok else 'NOT met'})"]
  return lines


def minatar() -> list[str]:
  pqn_name, dqn_name = PAIRS["minatar"]
  dqn, pqn = timed_run(dqn_name), timed_run(pqn_name)
  goal = max(v for _, v, _ in dqn["timed_evals"])
  dqn_at, pqn_at = first_at(dqn, goal), first_at(pqn, goal)
  if pqn_at is None:
    ratio = f"PQN did not reach DQN's best ({goal:.2f}) within its budget"
  else:
    ratio = (f"time to DQN's best ({goal:.2f}) PQN / DQN: {pqn_at[1] / dqn_at[1]:.2f}x "
             f"(target <= 0.3x: {'met' if pqn_at[1] <= 0.3 * dqn_at[1] else 'NOT met'})")
  return [describe(pqn_name, pqn, goal), describe(dqn_name, dqn, goal), ratio,
          f"whole process PQN / DQN: {pqn['wall_s'] / dqn['wall_s']:.2f}x"]


ROWS = {"cartpole": cartpole, "minatar": minatar}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--only", default=",".join(ROWS),
                      help=f"comma-separated rows among {', '.join(ROWS)}")
  args = parser.parse_args()
  names = [n.strip() for n in args.only.split(",") if n.strip()]
  unknown = [n for n in names if n not in ROWS]
  if unknown:
    parser.error(f"unknown rows {unknown}; valid: {', '.join(ROWS)}")
  load = os.getloadavg()[0]
  print(f"{datetime.date.today().isoformat()}, {os.cpu_count()} CPUs, load average "
        f"{load:.1f} at the start", flush=True)
  for name in names:
    print(f"\n[{name}]", flush=True)
    for line in ROWS[name]():
      print(f"  {line}", flush=True)
  print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
  main()
