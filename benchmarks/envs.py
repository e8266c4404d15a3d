"""Environment steps per second with random actions: gymnasium vs batchrl's BatchEnv.

Run by hand (not a test); every figure in one table comes from the same run, so compare
ratios, not absolute numbers taken on different days or machines:

    python benchmarks/envs.py                      # about 3 s per cell after warm-up
    python benchmarks/envs.py --seconds 1 --envs CartPole-v1 --sizes 8
    python benchmarks/envs.py --envs HalfCheetah-v5 --sizes 8 --repeats 5 --wait-idle 60

Rows per environment: one gymnasium env in a loop, gymnasium SyncVectorEnv and
AsyncVectorEnv, BatchEnv in-process, with worker processes, and with this process stepping
one group itself (``step_in_parent``), envpool when installed, and whatever ``extra_rows()``
adds. Ratios are against AsyncVectorEnv / SyncVectorEnv with the same number of envs.
Random actions are sampled once, as a block, before timing.
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
import warnings
from typing import Callable

import gymnasium as gym

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from batchrl.envs.batch import BatchEnv

ACTION_BLOCK = 512  # distinct random actions per run, cycled
SINGLE = "gymnasium single env"
WIDTH = 36  # of the runner column
SYNC, ASYNC = "gymnasium SyncVectorEnv", "gymnasium AsyncVectorEnv"


GYMNAX_ENVS = {"CartPole-v1", "Pendulum-v1"}  # same dynamics as the Gymnasium ids
SIMULATE_ENVS = 1024


def extra_rows(env_id: str, sizes: list[int], seconds: float) -> list[tuple[str, int, float]]:
  """In-graph rows: the gymnax env with random actions through ``batchrl.simulate``.

  Each timed call is one compiled ``lax.scan`` of 1000 fused steps of 1024 envs; only the
  episode statistics leave the program.
  """
  del sizes
  if env_id not in GYMNAX_ENVS:
    return []
  import jax

  from batchrl import simulation
  from batchrl.agents.simple.model import random_agent
  from batchrl.envs.jax_env import make_vec

  env = make_vec(env_id, SIMULATE_ENVS)
  agent = random_agent(env.single_action_space)
  steps = 1000

  def run(sim):
    sim, rollout = simulation.simulate(env, agent, sim, steps, mode="track")
    return sim, simulation.episode_stats(rollout)

  run = jax.jit(run)
  state = {"sim": simulation.init(env, agent, jax.random.key(0))}

  def step(k):
    del k
    state["sim"], stats = run(state["sim"])
    jax.block_until_ready(stats)

  step(0)  # compile outside the timed window
  rate = measure(step, SIMULATE_ENVS * steps, seconds)
  return [("batchrl simulate (gymnax, in-graph)", SIMULATE_ENVS, rate)]


def measure(step: Callable[[int], None], n: int, seconds: float) -> float:
  """Env steps per second of ``step(k)`` (one call = ``n`` env steps), after a short warm-up."""
  warm = time.perf_counter() + min(0.2, seconds / 4)
  k = 0
  while time.perf_counter() < warm:
    step(k)
    k += 1
  calls, start = 0, time.perf_counter()
  deadline = start + seconds
  while True:
    for _ in range(8):  # check the clock every few calls only
      step(k)
      k += 1
    calls += 8
    now = time.perf_counter()
    if now >= deadline:
      return calls * n / (now - start)


class Runner:
  """An open environment under test: ``step(k)`` takes one (batched) step with action k."""

  def __init__(self, env, vector: bool):
    self.env = env
    env.action_space.seed(0)
    self.actions = [env.action_space.sample() for _ in range(ACTION_BLOCK)]
    env.reset(seed=0)
    self.step = self._vector_step if vector else self._single_step

  def _vector_step(self, k: int) -> None:  # vector envs reset themselves
    self.env.step(self.actions[k % ACTION_BLOCK])

  def _single_step(self, k: int) -> None:
    _, _, terminated, truncated, _ = self.env.step(self.actions[k % ACTION_BLOCK])
    if terminated or truncated:
      self.env.reset()

  def close(self) -> None:
    self.env.close()


def envpool_env(env_id: str, n: int):
  try:
    import envpool
  except ImportError:
    return None
  pool_id = env_id.replace("-v5", "-v4")  # envpool ships MuJoCo v4
  if pool_id not in envpool.list_all_envs():
    return None
  return envpool.make_gymnasium(pool_id, num_envs=n, seed=0)


def factories(env_id: str, workers: int) -> dict[str, Callable[[int], object | None]]:
  """Runner name -> function of n building the env (None: not available here)."""
  fns = lambda n: [functools.partial(gym.make, env_id)] * n
  return {
      SINGLE: lambda n: gym.make(env_id),
      SYNC: lambda n: gym.vector.SyncVectorEnv(fns(n)),
      ASYNC: lambda n: gym.vector.AsyncVectorEnv(fns(n)),
      "batchrl BatchEnv in-process": lambda n: BatchEnv.from_id(env_id, num_envs=n, seed=0),
      f"batchrl BatchEnv {workers} workers": lambda n: BatchEnv.from_id(
          env_id, num_envs=n, num_workers=workers, seed=0),
      f"batchrl BatchEnv {workers}, step_in_parent": lambda n: BatchEnv.from_id(
          env_id, num_envs=n, num_workers=workers, seed=0, step_in_parent=True),
      "envpool": lambda n: envpool_env(env_id, n),
  }


def run_size(env_id: str, n: int, args, skip: set[str], with_single: bool):
  """All runners for one (env, n), timed in interleaved rounds; best round per runner.

  Interleaving and best-of-rounds because on a shared or virtual machine interference
  only ever slows a run down, and it comes and goes: slices taken side by side see the
  same conditions, and the best slice is the least disturbed one.
  """
  runners = {}
  for name, make in factories(env_id, args.workers).items():
    if any(word in name for word in skip) or (name == SINGLE and not with_single):
      continue
    env = make(n)
    if env is None:
      print(f"  {env_id} {name}: skipped (not installed)", file=sys.stderr)
      continue
    runners[name] = Runner(env, vector=name != SINGLE)
  rates = {name: [] for name in runners}
  try:
    for _ in range(args.rounds):
      if args.wait_idle:
        wait_for_idle(args.wait_idle)
      for name, runner in runners.items():
        size = 1 if name == SINGLE else n
        rates[name].append(measure(runner.step, size, args.seconds / args.rounds))
  finally:
    for runner in runners.values():
      runner.close()
  rows = [(name, 1 if name == SINGLE else n, max(values)) for name, values in rates.items()]
  for name, size, rate in rows:
    print(f"  {env_id:<16} {name:<{WIDTH}} n={size:<4} {rate:>12,.0f} steps/s", file=sys.stderr)
  return rows


def idle_fraction(seconds: float = 0.3) -> float | None:
  """Share of all CPUs idle over ``seconds`` (Linux /proc/stat; None elsewhere)."""
  def snapshot():
    with open("/proc/stat") as f:
      ticks = [int(x) for x in f.readline().split()[1:]]
    return ticks[3] + ticks[4], sum(ticks)  # idle + iowait, total
  try:
    idle0, total0 = snapshot()
    time.sleep(seconds)
    idle1, total1 = snapshot()
  except OSError:
    return None
  return (idle1 - idle0) / max(1, total1 - total0)


def wait_for_idle(limit: float, threshold: float = 0.85) -> bool:
  """Waits up to ``limit`` seconds for the CPUs to be mostly idle (others' jobs on a shared
  machine take CPUs from parallel runners far more than from serial ones)."""
  deadline = time.monotonic() + limit
  while time.monotonic() < deadline:
    idle = idle_fraction()
    if idle is None or idle >= threshold:
      return True
  print(f"  (CPUs still busy after {limit:g} s; measuring anyway)", file=sys.stderr)
  return False


def run_env(env_id: str, sizes: list[int], args, skip: set[str]) -> list[tuple[str, int, float]]:
  rows = []
  for k, n in enumerate(sizes):
    rows += run_size(env_id, n, args, skip, with_single=k == 0)
  return rows + extra_rows(env_id, sizes, args.seconds)


def format_table(repeats: list[dict[str, list[tuple[str, int, float]]]]) -> str:
  """One row per (env, runner, n): the median over repeats of the rate and of the ratios,
  each ratio taken within one repeat (the same run), never across runs."""
  lines = [f"{'env':<16} {'runner':<{WIDTH}} {'n':>4} {'steps/s':>12} {'x Async':>8} "
           f"{'x Sync':>8}", "-" * (52 + WIDTH)]
  for env_id, first_rows in repeats[0].items():
    for name, n, _ in first_rows:
      rates, to_async, to_sync = [], [], []
      for results in repeats:
        by = {(row[0], row[1]): row[2] for row in results[env_id]}
        rate = by[(name, n)]
        rates.append(rate)
        if by.get((ASYNC, n)):
          to_async.append(rate / by[(ASYNC, n)])
        if by.get((SYNC, n)):
          to_sync.append(rate / by[(SYNC, n)])
      ratio_async = f"{statistics.median(to_async):8.2f}" if to_async else f"{'-':>8}"
      ratio_sync = f"{statistics.median(to_sync):8.2f}" if to_sync else f"{'-':>8}"
      lines.append(f"{env_id:<16} {name:<{WIDTH}} {n:>4} {statistics.median(rates):>12,.0f} "
                   f"{ratio_async} {ratio_sync}")
    lines.append("")
  return "\n".join(lines)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per cell")
  parser.add_argument("--rounds", type=int, default=6,
                      help="each cell's seconds are split into this many interleaved slices")
  parser.add_argument("--envs", default="CartPole-v1,Pendulum-v1,HalfCheetah-v5")
  parser.add_argument("--sizes", default="8,32", help="numbers of envs, comma-separated")
  parser.add_argument("--workers", type=int, default=2, help="BatchEnv worker processes")
  parser.add_argument("--skip", default="",
                      help="comma-separated words; runners whose name contains one are skipped")
  parser.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                      help="before each round, wait up to this long for idle CPUs (shared "
                           "machines: rounds taken while others compute mislead)")
  parser.add_argument("--repeats", type=int, default=1,
                      help="run everything this many times; print medians of rates and of "
                           "the ratios taken within each run (for shared, noisy machines)")
  args = parser.parse_args(argv)
  warnings.filterwarnings("ignore")
  sizes = [int(size) for size in args.sizes.split(",")]
  skip = {word for word in args.skip.split(",") if word}
  print(f"{os.cpu_count()} CPUs, {args.seconds:g} s per cell in {args.rounds} rounds "
        f"(best round reported), {args.repeats} repeat(s) (median reported)", file=sys.stderr)
  repeats = [{env_id: run_env(env_id, sizes, args, skip) for env_id in args.envs.split(",")}
             for _ in range(args.repeats)]
  print(format_table(repeats))


if __name__ == "__main__":
  main()
