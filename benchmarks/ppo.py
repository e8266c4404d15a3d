"""PPO benchmark (not a test): wall time, throughput and returns against peer figures.

    python benchmarks/ppo.py                       # fused CartPole + host Pendulum
    python benchmarks/ppo.py --only cheetah        # HalfCheetah-v5, 1M steps (minutes)
    python benchmarks/ppo.py --only gpu --envs 2048  # fused CartPole throughput (GPU)

Peer figures are from ``reference/peers.md`` (2-core CPU machine, no GPU); compare ratios,
not absolute times taken on other days.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from batchrl import configs, experiment
from batchrl.train import fused

PEERS = {
    "cartpole": "rejax PPO: 4.6 s compile + 3.6 s train = 8.2 s, return 500",
    "pendulum": "SB3 PPO (rl-zoo, gSDE): 100k steps in 34 s, return -131",
    "cheetah": "SB3 PPO: ~10 min per 1M steps; CleanRL 1443 / Tianshou 5784 at 1M",
}


def fused_cartpole(num_envs: int | None = None, steps: int = 500_000) -> dict:
  """The whole training run as one compiled program; compile timed apart from training."""
  exp = configs.get("cartpole_fused")
  if num_envs is not None:
    exp = configs.apply_overrides(exp, [f"num_envs={num_envs}", "batch_size=null"])
  env = experiment.build_env(exp.run)
  agent = experiment.build_agent(exp)
  per_iteration = exp.run.num_envs * agent.period
  iterations = math.ceil(steps / per_iteration)
  start = time.perf_counter()
  compiled = jax.jit(lambda key: _train_body(env, agent, key, iterations)).lower(
      jax.random.key(0)).compile()
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  sim, infos = compiled(jax.random.key(0))
  jax.block_until_ready(sim)
  train_s = time.perf_counter() - start
  evaluate = jax.jit(fused.make_evaluate(env, agent, 500))
  score = float(evaluate(sim)["mean_score"])
  return {"steps": iterations * per_iteration, "compile_s": compile_s, "train_s": train_s,
          "total_s": compile_s + train_s,
          "steps_per_s": iterations * per_iteration / train_s, "return": score,
          "device": jax.devices()[0].platform}


def _train_body(env, agent, key, iterations):
  """What ``fused.train`` compiles, kept apart so compile and run can be timed separately."""
  from batchrl.simulation import init
  sim = init(env, agent, key)
  iteration = fused.make_iteration(env, agent)
  return jax.lax.scan(lambda s, _: iteration(s), sim, None, length=iterations)


def host_pendulum(target: float = -200.0, max_steps: int = 200_000) -> dict:
  """Host Gymnasium Pendulum in worker processes: steps and wall time to ``target``."""
  exp = configs.get("pendulum")
  exp = dataclasses.replace(exp, run=dataclasses.replace(exp.run, steps=max_steps))
  with tempfile.TemporaryDirectory() as tmp:
    trainer = experiment.Trainer(exp, Path(tmp))
    report = trainer.plan["report"]
    start, reached, score = time.perf_counter(), None, math.nan
    try:
      while trainer.iteration < trainer.plan["total"]:
        trainer.train_phase(report)
        trainer.iteration += report
        score = trainer.eval_phase()["mean_score"]
        if score >= target:
          reached = trainer.step
          break
    finally:
      trainer.close()
  return {"steps": trainer.step, "wall_s": time.perf_counter() - start,
          "reached_at": reached, "return": score}


def host_cheetah(steps: int = 1_000_000) -> dict:
  exp = configs.get("cheetah")
  exp = dataclasses.replace(exp, run=dataclasses.replace(
      exp.run, steps=steps, report_every=steps // 10))
  with tempfile.TemporaryDirectory() as tmp:
    trainer = experiment.Trainer(exp, Path(tmp))
    start = time.perf_counter()
    try:
      while trainer.iteration < trainer.plan["total"]:
        trainer.train_phase(trainer.plan["report"])
        trainer.iteration += trainer.plan["report"]
      score = trainer.eval_phase()["mean_score"]
    finally:
      trainer.close()
  return {"steps": trainer.step, "wall_s": time.perf_counter() - start, "return": score}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--only", default="cartpole,pendulum",
                      help="comma list of: cartpole, pendulum, cheetah, gpu")
  parser.add_argument("--envs", type=int, default=2048, help="envs for the 'gpu' row")
  args = parser.parse_args()
  rows = []
  for name in args.only.split(","):
    print(f"running {name} ...", flush=True)
    if name == "cartpole":
      r = fused_cartpole()
      rows.append((name, f"{r['steps']} steps: compile {r['compile_s']:.1f} s + train "
                         f"{r['train_s']:.1f} s = {r['total_s']:.1f} s, "
                         f"{r['steps_per_s']:,.0f} steps/s, return {r['return']:.1f}",
                   f"{8.2 / r['total_s']:.2f}x rejax total time"))
    elif name == "pendulum":
      r = host_pendulum()
      where = f"-200 reached at {r['reached_at']} steps" if r["reached_at"] else "not reached"
      rows.append((name, f"{where}, {r['wall_s']:.1f} s, last eval {r['return']:.1f}",
                   f"{34.0 / r['wall_s']:.2f}x SB3 time (SB3: 100k steps)"))
    elif name == "cheetah":
      r = host_cheetah()
      rows.append((name, f"{r['steps']} steps in {r['wall_s']:.0f} s, return {r['return']:.0f}",
                   f"{600 / r['wall_s']:.2f}x SB3 time"))
    elif name == "gpu":
      r = fused_cartpole(num_envs=args.envs, steps=2_000_000)
      rows.append((f"cartpole x{args.envs} ({r['device']})",
                   f"{r['steps_per_s']:,.0f} steps/s (compile {r['compile_s']:.1f} s), "
                   f"return {r['return']:.1f}", ""))
    else:
      raise SystemExit(f"unknown benchmark {name!r}; valid: cartpole, pendulum, cheetah, gpu")
  print("\n| benchmark | batchrl | vs peer | peer figure |\n|---|---|---|---|")
  for name, value, ratio in rows:
    print(f"| {name} | {value} | {ratio} | {PEERS.get(name.split(' ')[0], '')} |")


if __name__ == "__main__":
  main()
