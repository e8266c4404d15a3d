"""Fused-path throughput on whatever JAX backend is present (GPU, or CPU for comparison).

Run by hand (not a test); compare figures within one run, or runs on the same device:

    python benchmarks/gpu.py                       # GPU figures (about 3-5 min on an H100)
    python benchmarks/gpu.py --quick               # CPU smoke run (< 2 min on 2 cores)
    python benchmarks/gpu.py --only chunk --envs 32,4096 --json out.json

Rows:

- chunk: the compiled train chunk of ``cartpole_fused`` (``fused.make_run_chunk``, what
  ``batchrl train`` calls between reports) at several ``num_envs``. The PPO minibatch
  grows with ``num_envs`` so every update keeps the config's number of minibatches (4 of
  the 32 x 128 rollout); the network, epochs and rollout length are the config's.
  ``compile s`` is ``lower(...).compile()`` of one chunk; steps/s is steady state: the
  compiled chunk called back to back, each output sim fed into the next call, until
  ``--seconds`` have passed.
- seeds: the same chunk ``vmap``-ed over ``num_seeds`` independent runs (``--seeds`` of
  ``batchrl train``); steps/s counts every seed's steps.
- process: ``python -m batchrl train --config cartpole_fused`` as a fresh process with an
  empty compilation cache (cold), then again with the cache it left (warm): wall time from
  process start to exit, and the last evaluation's mean score.
- dqn: the train chunk of ``dqn_cartpole_fused`` (8 envs; 128 gradient steps per 256 env
  steps), then its whole process (cold cache).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# JAX on a GPU takes 75% of its memory up front; the process rows start `batchrl train`
# children that need theirs, so this process allocates as it goes (no effect on CPU).
_PREALLOCATE_SET_HERE = "XLA_PYTHON_CLIENT_PREALLOCATE" not in os.environ
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

ROWS = ("chunk", "seeds", "process", "dqn")
FULL = {"envs": "32,64,512,4096,16384", "seeds": "8,64", "iterations": 4, "seconds": 3.0}
QUICK = {"envs": "32,512", "seeds": "8", "iterations": 1, "seconds": 0.5}


# ------------------------------------------------------------------------------ device


def device_line() -> str:
  """Backend, device kind and versions, e.g. ``gpu: NVIDIA H100 80GB HBM3 (jax 0.11.2)``."""
  import jax
  device = jax.devices()[0]
  return (f"{jax.default_backend()}: {device.device_kind} x{jax.device_count()} "
          f"(jax {jax.__version__}, jaxlib {_jaxlib_version()}, {os.cpu_count()} CPUs)")


def _jaxlib_version() -> str:
  try:
    import jaxlib
    return jaxlib.__version__
  except (ImportError, AttributeError):
    return "?"


# ------------------------------------------------------------------------------ chunk


def experiment(name: str, num_envs: int | None = None):
  """Named config ``name``; with ``num_envs``, PPO minibatches scaled to keep their count."""
  from batchrl import configs
  exp = configs.get(name)
  if num_envs is None or num_envs == exp.run.num_envs:
    return exp
  run = dataclasses.replace(exp.run, num_envs=num_envs)
  config = exp.config
  if exp.agent == "ppo" and config.batch_size is not None:
    rollout = exp.run.num_envs * config.rollout_length
    minibatches = max(1, rollout // config.batch_size)
    config = dataclasses.replace(
        config, batch_size=max(1, num_envs * config.rollout_length // minibatches))
  return dataclasses.replace(exp, run=run, config=config)


def time_chunk(exp, *, seeds: int | None, iterations: int, seconds: float) -> dict:
  """Compile time and steady-state env steps/s of ``exp``'s compiled train chunk.

  One chunk is ``iterations`` iterations of ``num_envs * agent.period`` steps (times
  ``seeds`` when vmapped). Returns ``compile_s``, ``steps_per_s``, ``chunk_ms``,
  ``steps_per_chunk`` and ``calls``.
  """
  import jax

  from batchrl import experiment as ex
  from batchrl.train import fused

  env = ex.build_env(exp.run)
  agent = ex.build_model(exp)
  sim = fused.init_sim(env, agent, jax.random.key(exp.run.seed), seeds)
  jax.block_until_ready(sim)
  run_chunk = fused.make_run_chunk(env, agent, num_seeds=seeds)
  start = time.perf_counter()
  compiled = run_chunk.lower(sim, iterations).compile()
  compile_s = time.perf_counter() - start
  sim, infos = compiled(sim)  # warm-up: first call allocates and transfers
  jax.block_until_ready(infos)
  calls, start = 0, time.perf_counter()
  while calls < 2 or time.perf_counter() - start < seconds:
    sim, infos = compiled(sim)
    jax.block_until_ready(infos)
    calls += 1
  elapsed = time.perf_counter() - start
  per_chunk = iterations * exp.run.num_envs * agent.period * (seeds or 1)
  return {"compile_s": compile_s, "steps_per_s": calls * per_chunk / elapsed,
          "chunk_ms": 1e3 * elapsed / calls, "steps_per_chunk": per_chunk, "calls": calls}


def chunk_rows(name: str, sizes: list[int | None], seeds: list[int | None],
               iterations: int, seconds: float) -> list[dict]:
  rows = []
  for num_envs in sizes:
    for num_seeds in seeds:
      exp = experiment(name, num_envs)
      label = f"{name} chunk, {exp.run.num_envs} envs" + (
          f" x {num_seeds} seeds" if num_seeds else "")
      print(f"  {label} ...", flush=True)
      try:
        result = time_chunk(exp, seeds=num_seeds, iterations=iterations, seconds=seconds)
      except Exception as e:  # a failing size is a figure too; the other rows still run
        result = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
      rows.append({"row": label, "config": name, "num_envs": exp.run.num_envs,
                   "seeds": num_seeds, **result})
      print("    " + " | ".join(_cell(rows[-1])), flush=True)
  return rows


# ------------------------------------------------------------------------------ process


def train_process(config: str, cache_dir: str, logdir: str) -> dict:
  """``python -m batchrl train --config CONFIG`` as a fresh process: wall time, last eval."""
  env = dict(os.environ, BATCHRL_CACHE_DIR=cache_dir, PYTHONPATH=os.pathsep.join(
      [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
  if _PREALLOCATE_SET_HERE:  # the child allocates as `batchrl train` does by default
    env.pop("XLA_PYTHON_CLIENT_PREALLOCATE")
  cmd = [sys.executable, "-m", "batchrl", "train", "--config", config, "--logdir", logdir,
         "--no-progress"]
  start = time.perf_counter()
  proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
  wall = time.perf_counter() - start
  if proc.returncode != 0:
    return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}", "wall_s": wall}
  evals = []
  for path in sorted(Path(logdir).glob("*/metrics.jsonl")):
    for line in path.read_text().splitlines():
      record = json.loads(line) if line.strip() else {}
      if record.get("phase") == "eval" and record.get("mean_score") is not None:
        evals.append((record["step"], record["mean_score"]))
  if not evals:
    return {"error": "no evaluation in metrics.jsonl", "wall_s": wall}
  step, score = max(evals)
  return {"wall_s": wall, "steps": step, "final_score": score,
          "best_score": max(s for _, s in evals)}


def process_rows(config: str, warm: bool) -> list[dict]:
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    cache = os.path.join(tmp, "xla")
    for kind in ("cold", "warm") if warm else ("cold",):
      print(f"  {config} process ({kind} cache) ...", flush=True)
      result = train_process(config, cache, os.path.join(tmp, f"runs-{kind}"))
      rows.append({"row": f"`batchrl train --config {config}` ({kind} cache)",
                   "config": config, **result})
      print("    " + " | ".join(_cell(rows[-1])), flush=True)
  return rows


# ------------------------------------------------------------------------------ table


def _cell(row: dict) -> tuple[str, str, str]:
  if "error" in row:
    return "", "", "ERROR " + row["error"].replace("|", "/").replace("\n", " ")
  if "steps_per_s" in row:
    return (f"{row['compile_s']:.1f}", f"{row['steps_per_s']:,.0f}",
            f"{row['chunk_ms']:.1f} ms per chunk of {row['steps_per_chunk']:,} steps")
  return ("", "", f"{row['wall_s']:.1f} s wall for {row['steps']:,} steps, final eval "
          f"{row['final_score']:.1f} (best {row['best_score']:.1f})")


def print_table(rows: list[dict]) -> None:
  print("\n| row | compile s | env steps/s | notes |\n|---|---:|---:|---|")
  for row in rows:
    compile_s, rate, notes = _cell(row)
    print(f"| {row['row']} | {compile_s} | {rate} | {notes} |")


def _ints(text: str) -> list[int]:
  try:
    values = [int(x) for x in text.split(",") if x.strip()]
  except ValueError:
    raise SystemExit(f"expected a comma list of ints, got {text!r}") from None
  if not values or min(values) < 1:
    raise SystemExit(f"expected positive ints, got {text!r}")
  return values


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help=f"small sizes for a CPU check: {QUICK}; process row cold only")
  parser.add_argument("--only", default=",".join(ROWS), help=f"comma list of: {', '.join(ROWS)}")
  parser.add_argument("--envs", help=f"num_envs of the chunk rows (default {FULL['envs']})")
  parser.add_argument("--seeds", help=f"num_seeds of the seeds rows (default {FULL['seeds']})")
  parser.add_argument("--iterations", type=int, help="iterations per compiled chunk")
  parser.add_argument("--seconds", type=float, help="steady-state timing per row")
  parser.add_argument("--json", help="also write the rows as JSON here")
  args = parser.parse_args()
  sizes = QUICK if args.quick else FULL
  only = [x.strip() for x in args.only.split(",") if x.strip()]
  unknown = sorted(set(only) - set(ROWS))
  if unknown:
    raise SystemExit(f"unknown rows {unknown}; valid: {', '.join(ROWS)}")
  iterations = args.iterations or sizes["iterations"]
  seconds = args.seconds if args.seconds is not None else sizes["seconds"]

  print(device_line(), flush=True)
  rows = []
  started = time.perf_counter()
  if "chunk" in only:
    rows += chunk_rows("cartpole_fused", _ints(args.envs or sizes["envs"]), [None],
                       iterations, seconds)
  if "seeds" in only:
    rows += chunk_rows("cartpole_fused", [None], _ints(args.seeds or sizes["seeds"]),
                       iterations, seconds)
  if "process" in only:
    rows += process_rows("cartpole_fused", warm=not args.quick)
  if "dqn" in only:
    rows += chunk_rows("dqn_cartpole_fused", [None], [None], max(1, 8 * iterations), seconds)
    if not args.quick:
      rows += process_rows("dqn_cartpole_fused", warm=False)
  load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
  print(f"\n{device_line()}; load average {load:.2f}; "
        f"benchmark took {time.perf_counter() - started:.0f} s")
  print_table(rows)
  if args.json:
    Path(args.json).write_text(json.dumps({"device": device_line(), "rows": rows}, indent=1))


if __name__ == "__main__":
  main()
