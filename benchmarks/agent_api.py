"""Object-API benchmark (not a test): the cost of ``agent.act`` + ``agent.observe`` and the
TensorForce-style quick start (PPO on CartPole-v1 through ``batchrl.Runner``).

    python benchmarks/agent_api.py                  # per-step costs + quick start (minutes)
    python benchmarks/agent_api.py --skip-learning  # per-step costs only (~1 min)
    python benchmarks/agent_api.py --quick          # fewer steps everywhere

Per-step rows time warm calls only: compilation and the steps that run an update are kept
out (``batch_size`` is larger than all timed steps). Each is the median of several blocks
of steps, as wall time and as CPU time of the calling thread (with JAX's async dispatch off,
as ``Agent`` sets it, the compiled calls run on that thread; CPU time is what other users
of a shared machine disturb least). "fast path" rows are what the agent takes by itself;
the "fused path" row forces the path of models whose ``act`` reads what ``store`` writes
(recurrent policies, observation normalization). The "floor" rows are the JAX dispatch
cost of a donated identity ``jit`` over the same state pytree and of a one-array ``jit``.
Compare ratios within one run; this machine is shared, so absolute numbers drift between
runs (the load average is printed with the table).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from batchrl import Agent  # noqa: E402  (after the path tweak above)

STATES = dict(type="float", shape=(4,))
ACTIONS = dict(type="int", num_values=2)
MLP_64 = [dict(type="dense", size=64), dict(type="dense", size=64)]
UNTIMED_BATCH = 65536  # timesteps per update: larger than any timed run, so no update runs
QUICK_START = dict(batch_size=4096, gae_lambda=0.97, learning_rate=1e-3,
                   entropy_penalty=0.01, epochs=5, optimizer_batch_size=512,
                   loss_clipping=0.2,
                   network=[dict(type="dense", size=32), dict(type="dense", size=32)])
TARGETS = (195.0, 475.0)  # mean return of the last 100 episodes


# ------------------------------------------------------------------------- per step


BLOCKS = 5  # timed blocks per row; rows report the median block


def step_cost(streams: int, steps: int, warmup: int, seed: int = 0,
              fused: bool = False) -> dict:
  """Microseconds per act + observe pair for ``streams`` streams acting in one call.

  Returns ``act_us``, ``observe_us``, ``pair_us`` (per call, wall), ``cpu_us`` (per pair,
  CPU time of this thread) and ``per_stream_us`` (``pair_us / streams``), each the median
  of ``BLOCKS`` blocks; ``leaves``: arrays in the agent's state pytree; ``path``.
  """
  agent = Agent.create("ppo", states=STATES, actions=ACTIONS, network=MLP_64,
                       batch_size=UNTIMED_BATCH, parallel_interactions=streams, seed=seed)
  if fused:
    agent._fast_refusal = "benchmark: the fused path on purpose"
  if warmup + steps > UNTIMED_BATCH // streams:
    raise SystemExit(f"{warmup + steps} steps of {streams} streams would run an update; "
                     f"time fewer steps (at most {UNTIMED_BATCH // streams - warmup}).")
  rng = np.random.default_rng(seed)
  batched = streams > 1
  states = rng.normal(size=(64, streams, 4)).astype(np.float32)
  if not batched:
    states = states[:, 0]
  parallel = list(range(streams)) if batched else None
  rewards = np.ones(streams, np.float32) if batched else 1.0
  terminals = np.zeros(streams, np.int64) if batched else False
  timer = time.perf_counter
  for i in range(warmup):
    agent.act(states[i % 64], parallel=parallel)
    agent.observe(reward=rewards, terminal=terminals, parallel=parallel)
  block = max(steps // BLOCKS, 1)
  rows = []
  for b in range(BLOCKS):
    act_s = observe_s = 0.0
    cpu = time.thread_time()
    for i in range(b * block, (b + 1) * block):
      t0 = timer()
      agent.act(states[i % 64], parallel=parallel)
      t1 = timer()
      agent.observe(reward=rewards, terminal=terminals, parallel=parallel)
      t2 = timer()
      act_s += t1 - t0
      observe_s += t2 - t1
    rows.append((act_s + observe_s, act_s, observe_s, time.thread_time() - cpu))
  if agent.updates:
    raise RuntimeError("an update ran during the timed steps; raise UNTIMED_BATCH")
  pair_s, act_s, observe_s, cpu_s = sorted(rows)[len(rows) // 2]  # the median block
  act_us, observe_us = act_s / block * 1e6, observe_s / block * 1e6
  import jax
  return {"act_us": act_us, "observe_us": observe_us, "pair_us": act_us + observe_us,
          "cpu_us": cpu_s / block * 1e6, "per_stream_us": (act_us + observe_us) / streams,
          "leaves": len(jax.tree.leaves(agent._state)),
          "path": "fast path" if getattr(agent, "_fast", None) is not None else "fused path"}


def dispatch_floor(leaves: int, calls: int) -> dict:
  """Microseconds per call of a donated identity jit over ``leaves`` small arrays, and of a
  jit over one array, each followed by reading one result on the host."""
  import jax
  import jax.numpy as jnp

  def median_of(fn, repeats: int = BLOCKS) -> tuple[float, float]:
    """(wall, CPU) microseconds per call, medians of ``repeats`` blocks."""
    walls, cpus = [], []
    for _ in range(repeats):
      start, cpu = time.perf_counter(), time.thread_time()
      for _ in range(calls):
        fn()
      walls.append((time.perf_counter() - start) / calls * 1e6)
      cpus.append((time.thread_time() - cpu) / calls * 1e6)
    return sorted(walls)[repeats // 2], sorted(cpus)[repeats // 2]

  identity = jax.jit(lambda tree, x: (tree, x + 1), donate_argnums=0)
  box = [[jnp.zeros((8,), jnp.float32) + i for i in range(leaves)]]
  x = np.zeros(4, np.float32)

  def tree_call():
    box[0], y = identity(box[0], x)
    np.asarray(y)

  one = jax.jit(lambda x: x + 1)

  def one_call():
    np.asarray(one(x))

  for fn in (tree_call, one_call):
    fn()
  (tree_us, tree_cpu), (one_us, one_cpu) = median_of(tree_call), median_of(one_call)
  return {"tree_us": tree_us, "tree_cpu_us": tree_cpu, "one_us": one_us,
          "one_cpu_us": one_cpu}


def peer_rows(steps: int) -> list[tuple[str, str]]:
  """SB3 ``model.predict(obs)`` on the same MLP, when stable-baselines3 is installed."""
  try:
    from stable_baselines3 import PPO
  except ImportError:
    return [("SB3 PPO predict(obs), 2x64 MLP", "not installed")]
  import gymnasium as gym
  model = PPO("MlpPolicy", gym.make("CartPole-v1"), policy_kwargs=dict(net_arch=[64, 64]),
              device="cpu", seed=0)
  obs = np.zeros(4, np.float32)
  for _ in range(100):
    model.predict(obs)
  start = time.perf_counter()
  for _ in range(steps):
    model.predict(obs)
  us = (time.perf_counter() - start) / steps * 1e6
  return [("SB3 PPO predict(obs), 2x64 MLP", f"{us:.1f} us per call (act only, no learning)")]


# ---------------------------------------------------------------------- quick start


def quick_start(max_timesteps: int, seed: int = 0) -> dict:
  """PPO on CartPole-v1 with the seed's quick-start settings until the mean return of the
  last 100 episodes reaches each of ``TARGETS`` (or ``max_timesteps``)."""
  agent = Agent.create(agent="ppo", environment="CartPole-v1", seed=seed, **QUICK_START)
  reached: dict[float, tuple[int, int, float]] = {}
  start = time.perf_counter()
  returns: list[float] = []

  def record(episode_return: float, timesteps: int) -> bool:
    returns.append(float(episode_return))
    mean = float(np.mean(returns[-100:]))
    for target in TARGETS:
      if target not in reached and len(returns) >= 100 and mean >= target:
        reached[target] = (len(returns), timesteps, time.perf_counter() - start)
    return len(reached) < len(TARGETS)

  try:
    from batchrl.execution.runner import Runner
  except ImportError:
    Runner = None
  if Runner is not None:
    runner = Runner(agent, environment="CartPole-v1", seed=seed)
    try:
      runner.run(num_timesteps=max_timesteps, progress=False,
                 callback=lambda r: record(r.episode_rewards[-1], agent.timesteps))
    finally:
      runner.close()
    driver = "Runner"
  else:
    _gym_loop(agent, max_timesteps, seed, record)
    driver = "gymnasium loop"
  return {"driver": driver, "reached": reached, "episodes": len(returns),
          "timesteps": agent.timesteps, "wall_s": time.perf_counter() - start,
          "last_mean": float(np.mean(returns[-100:])) if returns else float("nan")}


def _gym_loop(agent, max_timesteps: int, seed: int, record) -> None:
  """The plain act/observe loop: terminal 1 on termination, 2 (with next_states) when the
  time limit cut the episode."""
  import gymnasium as gym
  env = gym.make("CartPole-v1")
  obs, _ = env.reset(seed=seed)
  episode_return = 0.0
  try:
    while agent.timesteps < max_timesteps:
      obs, reward, terminated, truncated, _ = env.step(agent.act(obs))
      episode_return += reward
      if terminated:
        agent.observe(reward=reward, terminal=1)
      elif truncated:
        agent.observe(reward=reward, terminal=2, next_states=obs)
      else:
        agent.observe(reward=reward, terminal=0)
      if terminated or truncated:
        if not record(episode_return, agent.timesteps):
          return
        episode_return = 0.0
        obs, _ = env.reset()
  finally:
    env.close()


# ----------------------------------------------------------------------------- main


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="fewer timed steps, shorter cap")
  parser.add_argument("--skip-learning", action="store_true", help="per-step costs only")
  parser.add_argument("--streams", default="8,64", help="comma list of batched stream counts")
  parser.add_argument("--max-timesteps", type=int, default=None,
                      help="quick-start cap (default 300k, 100k with --quick)")
  args = parser.parse_args()
  steps, warmup = (1000, 100) if args.quick else (5000, 200)
  rows: list[tuple[str, str]] = []

  print("timing act + observe, 1 stream ...", flush=True)
  one = step_cost(1, steps, warmup)
  rows.append((f"PPO 2x64, 1 stream: act + observe ({one['path']})",
               f"{one['pair_us']:.1f} us (act {one['act_us']:.1f}, observe "
               f"{one['observe_us']:.1f}); CPU {one['cpu_us']:.1f} us; state pytree "
               f"{one['leaves']} leaves"))
  print("timing act + observe, 1 stream, fused path ...", flush=True)
  fused = step_cost(1, steps, warmup, fused=True)
  rows.append((f"PPO 2x64, 1 stream: act + observe ({fused['path']})",
               f"{fused['pair_us']:.1f} us (act {fused['act_us']:.1f}, observe "
               f"{fused['observe_us']:.1f}); CPU {fused['cpu_us']:.1f} us"))
  for n in (int(s) for s in args.streams.split(",") if s):
    print(f"timing act + observe, {n} streams ...", flush=True)
    r = step_cost(n, min(steps // 5, UNTIMED_BATCH // n - warmup), warmup)
    rows.append((f"PPO 2x64, {n} streams, one batched call ({r['path']})",
                 f"{r['pair_us']:.1f} us per call, {r['per_stream_us']:.2f} us per "
                 f"stream-step ({one['pair_us'] / r['per_stream_us']:.1f}x 1 stream); "
                 f"CPU {r['cpu_us']:.1f} us per call"))
  floor = dispatch_floor(one["leaves"], 2000 if args.quick else 5000)
  rows.append((f"floor: donated identity jit, {one['leaves']} leaves",
               f"{floor['tree_us']:.1f} us, CPU {floor['tree_cpu_us']:.1f} us"))
  rows.append(("floor: jit of one array + read back",
               f"{floor['one_us']:.1f} us, CPU {floor['one_cpu_us']:.1f} us"))
  rows.append(("1 stream act + observe / floor (one array)",
               f"{one['pair_us'] / floor['one_us']:.1f}x wall, "
               f"{one['cpu_us'] / floor['one_cpu_us']:.1f}x CPU"))
  rows.extend(peer_rows(steps))

  if not args.skip_learning:
    cap = args.max_timesteps or (100_000 if args.quick else 300_000)
    print(f"quick start: PPO on CartPole-v1, up to {cap} timesteps ...", flush=True)
    q = quick_start(cap)
    for target in TARGETS:
      hit = q["reached"].get(target)
      value = (f"episode {hit[0]}, {hit[1]} timesteps, {hit[2]:.1f} s wall (incl. compile)"
               if hit else f"not reached in {q['timesteps']} timesteps "
                           f"(last-100 mean {q['last_mean']:.1f})")
      rows.append((f"quick start ({q['driver']}): mean100 >= {target:g}", value))
    rows.append(("quick start: total", f"{q['episodes']} episodes, {q['timesteps']} "
                                       f"timesteps, {q['wall_s']:.1f} s, "
                                       f"{q['timesteps'] / q['wall_s']:,.0f} steps/s"))

  load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
  dispatch = "on" if jax.config.values.get("jax_cpu_enable_async_dispatch") else "off"
  print(f"\nload average {load:.2f} on {os.cpu_count()} CPUs; JAX CPU async dispatch "
        f"{dispatch}")
  print("| benchmark | result |\n|---|---|")
  for name, value in rows:
    print(f"| {name} | {value} |")


if __name__ == "__main__":
  main()
