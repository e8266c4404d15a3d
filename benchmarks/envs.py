"""Environment steps per second with random actions: gymnasium vs batchrl's BatchEnv.

Run by hand (not a test); every figure in one table comes from the same run, so compare
ratios, not absolute numbers taken on different days or machines:

    python benchmarks/envs.py                      # about 3 s per cell after warm-up
    python benchmarks/envs.py --seconds 1 --envs CartPole-v1 --sizes 8

Rows per environment: one gymnasium env in a loop, gymnasium SyncVectorEnv and
AsyncVectorEnv, BatchEnv in-process and with worker processes, envpool when installed, and
whatever ``extra_rows()`` adds. Ratios are against AsyncVectorEnv / SyncVectorEnv with the
same number of envs. Random actions are sampled once, as a block, before timing.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import warnings
from typing import Callable

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from batchrl.envs.batch import BatchEnv  # noqa: E402  (after the path tweak above)

ACTION_BLOCK = 512  # distinct random actions per run, cycled


def extra_rows(env_id: str, sizes: list[int], seconds: float) -> list[tuple[str, int, float]]:
  """HOOK for more rows (e.g. gymnax / batchrl.simulate): returns [(runner, n, steps/s)]."""
  return []


def measure(step: Callable[[int], None], n: int, seconds: float) -> float:
  """Env steps per second of ``step(k)`` (one call = ``n`` env steps), after a warm-up."""
  warm = time.perf_counter() + min(0.5, seconds / 4)
  k = 0
  while time.perf_counter() < warm:
    step(k)
    k += 1
  calls, start = 0, time.perf_counter()
  deadline = start + seconds
  while True:
    for _ in range(16):  # check the clock every few calls only
      step(k)
      k += 1
    calls += 16
    now = time.perf_counter()
    if now >= deadline:
      return calls * n / (now - start)


def bench_single(env_id: str, n: int, seconds: float) -> float:
  env = gym.make(env_id)
  env.action_space.seed(0)
  actions = [env.action_space.sample() for _ in range(ACTION_BLOCK)]
  env.reset(seed=0)

  def step(k):
    _, _, terminated, truncated, _ = env.step(actions[k % ACTION_BLOCK])
    if terminated or truncated:
      env.reset()
  try:
    return measure(step, 1, seconds)
  finally:
    env.close()


def bench_vector(make_env: Callable[[], object], n: int, seconds: float) -> float:
  """Any env with the gymnasium vector API (it auto-resets itself)."""
  env = make_env()
  try:
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(ACTION_BLOCK)]
    env.reset(seed=0)
    return measure(lambda k: env.step(actions[k % ACTION_BLOCK]), n, seconds)
  finally:
    env.close()


def bench_envpool(env_id: str, n: int, seconds: float) -> float | None:
  try:
    import envpool
  except ImportError:
    return None
  pool_id = env_id.replace("-v5", "-v4")  # envpool ships MuJoCo v4
  if pool_id not in envpool.list_all_envs():
    return None
  return bench_vector(lambda: envpool.make_gymnasium(pool_id, num_envs=n, seed=0), n, seconds)


def runners(workers: int) -> dict[str, Callable[[str, int, float], float | None]]:
  def gym_vec(cls):
    return lambda env_id, n, s: bench_vector(
        lambda: cls([functools.partial(gym.make, env_id)] * n), n, s)

  def batch(num_workers):
    return lambda env_id, n, s: bench_vector(
        lambda: BatchEnv.from_id(env_id, num_envs=n, num_workers=num_workers, seed=0), n, s)

  return {
      "gymnasium single env": bench_single,
      "gymnasium SyncVectorEnv": gym_vec(gym.vector.SyncVectorEnv),
      "gymnasium AsyncVectorEnv": gym_vec(gym.vector.AsyncVectorEnv),
      "batchrl BatchEnv in-process": batch(0),
      f"batchrl BatchEnv {workers} workers": batch(workers),
      "envpool": bench_envpool,
  }


def run_env(env_id: str, sizes: list[int], seconds: float, workers: int,
            skip: set[str]) -> list[tuple[str, int, float]]:
  rows = []
  for name, bench in runners(workers).items():
    if any(word in name for word in skip):
      continue
    for n in ([1] if name == "gymnasium single env" else sizes):
      print(f"  {env_id:<16} {name:<30} n={n:<4}", end="", file=sys.stderr, flush=True)
      rate = bench(env_id, n, seconds)
      print("skipped (not installed)" if rate is None else f"{rate:>12,.0f} steps/s",
            file=sys.stderr, flush=True)
      if rate is not None:
        rows.append((name, n, rate))
  return rows + extra_rows(env_id, sizes, seconds)


def format_table(results: dict[str, list[tuple[str, int, float]]]) -> str:
  lines = [f"{'env':<16} {'runner':<30} {'n':>4} {'steps/s':>12} {'x Async':>8} {'x Sync':>8}",
           "-" * 82]
  for env_id, rows in results.items():
    by = {(name, n): rate for name, n, rate in rows}
    for name, n, rate in rows:
      base_async = by.get(("gymnasium AsyncVectorEnv", n))
      base_sync = by.get(("gymnasium SyncVectorEnv", n))
      ratio_async = f"{rate / base_async:8.2f}" if base_async else f"{'-':>8}"
      ratio_sync = f"{rate / base_sync:8.2f}" if base_sync else f"{'-':>8}"
      lines.append(f"{env_id:<16} {name:<30} {n:>4} {rate:>12,.0f} {ratio_async} {ratio_sync}")
    lines.append("")
  return "\n".join(lines)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per cell")
  parser.add_argument("--envs", default="CartPole-v1,Pendulum-v1,HalfCheetah-v5")
  parser.add_argument("--sizes", default="8,32", help="numbers of envs, comma-separated")
  parser.add_argument("--workers", type=int, default=2, help="BatchEnv worker processes")
  parser.add_argument("--skip", default="", help="comma-separated words; runners naming one are skipped")
  args = parser.parse_args(argv)
  warnings.filterwarnings("ignore")
  sizes = [int(size) for size in args.sizes.split(",")]
  skip = {word for word in args.skip.split(",") if word}
  print(f"{os.cpu_count()} CPUs, {args.seconds:g} s per cell", file=sys.stderr)
  results = {env_id: run_env(env_id, sizes, args.seconds, args.workers, skip)
             for env_id in args.envs.split(",")}
  print(format_table(results))


if __name__ == "__main__":
  main()
