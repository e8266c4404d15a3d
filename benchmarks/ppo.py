"""PPO benchmark (not a test): batchrl and its peers timed side by side in one run.

    python benchmarks/ppo.py                          # cartpole + pendulum, peers alongside
    python benchmarks/ppo.py --only cartpole --repeats 3   # alternate ours/rejax 3 times
    python benchmarks/ppo.py --only cheetah           # HalfCheetah-v5, 1M steps (minutes)
    python benchmarks/ppo.py --only gpu --envs 2048   # fused CartPole throughput (GPU)
    python benchmarks/ppo.py --no-peers               # recorded peer figures only

Absolute times on this shared 2-core machine drift by 2x between hours, so each peer runs
in the same benchmark run, right next to ours, in its own venv (``python
benchmarks/peers/setup.py`` builds it; see ``benchmarks/peers/run.py``). Without that venv
the table falls back to the figures recorded in ``reference/peers.md`` and says so.

Rows (ratios are ours / peer's time: below 1 means batchrl is faster):

- cartpole: ``batchrl train --config cartpole_fused`` as a fresh process with an empty
  compilation cache, against rejax's PPO (its published CartPole config) at the same
  budget, evaluation schedule and episode count, also a fresh process: whole-process
  wall times, start-up, imports and compilation included, and the processes' CPU time
  (user + system; steadier than wall time when other work shares the cores). With
  ``--repeats N`` the two alternate N times and the row gives medians and the median of
  the N side-by-side ratios. Then compile and train apart, in-process, against rejax's own
  compile/train split.
- pendulum: host Gymnasium Pendulum (``pendulum`` config, worker processes) against
  Stable-Baselines3 PPO with rl-baselines3-zoo's settings (gSDE, 100k steps): time to a
  mean evaluation return of -200 (construction + training, compilation included,
  evaluation time excluded on both sides), and SB3's whole 100k-step process.
- cheetah: recorded peer figures only (no PPO HalfCheetah peer script yet).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [BENCHMARKS, os.path.dirname(BENCHMARKS)]
from peers.run import PeerError, manifest, recorded, run_peer  # noqa: E402  (after the path tweak above)

TARGET = 475.0  # CartPole-v1 evaluation return counted as solved (issue 10 item 5)
RECORDED_CHEETAH = "SB3 PPO (defaults): ~10 min per 1M steps (peers.md, recorded)"


# ------------------------------------------------------------------------------ ours


def reached(evals, target: float) -> int | None:
  """The first evaluated step whose score is >= target (None: never)."""
  return next((step for step, score in evals if score >= target), None)


def run_ours(config: str, overrides: list[str], target: float) -> tuple[dict, str]:
  """``cold_process`` with a progress line; returns it and its table cell."""
  print(f"  batchrl train --config {config} {' '.join(overrides)} (cold process) ...",
        flush=True)
  ours = cold_process(config, overrides)
  best = max(score for _, score in ours["evals"])
  value = (f"{ours['steps']} steps, whole process {ours['wall_s']:.1f} s, final eval "
           f"{ours['final_return']:.1f}, best {best:.1f}, >= {target:g} at "
           f"{reached(ours['evals'], target)} steps")
  return ours, value


def cold_process(config: str, overrides: list[str] = (), cache_dir: str | None = None) -> dict:
  """``batchrl train --config CONFIG`` as a fresh process with an empty compilation cache
  (``cache_dir``: that cache instead, e.g. one an earlier run of the config filled, as a
  user's second run finds it).

  Returns ``wall_s`` (process creation to exit), ``cpu_s`` (its user + system time),
  ``steps``, ``final_return``, ``evals`` (``[(step, mean return), ...]``) and ``records``
  (every ``metrics.jsonl`` record, for where the time went).
  """
  with tempfile.TemporaryDirectory() as tmp:
    env = dict(os.environ, BATCHRL_CACHE_DIR=cache_dir or os.path.join(tmp, "xla"))
    cmd = [sys.executable, "-m", "batchrl", "train", "--config", config, "--logdir",
           os.path.join(tmp, "runs"), "--no-progress"]
    for item in overrides:
      cmd += ["--set", item]
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
      raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    records = []
    for path in Path(tmp, "runs").glob("*/metrics.jsonl"):
      records += [json.loads(line) for line in path.read_text().splitlines() if line]
  evals = [(r["step"], r["mean_score"]) for r in records
           if r.get("phase") == "eval" and r.get("mean_score") is not None]
  if not evals:
    raise RuntimeError(f"{' '.join(cmd)} wrote no evaluation to metrics.jsonl")
  return {"wall_s": wall, "cpu_s": cpu, "steps": evals[-1][0], "final_return": evals[-1][1],
          "evals": evals, "records": records}


def _children_cpu() -> float:
  """User + system seconds of this process's finished children."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def fused_cartpole(num_envs: int | None = None, steps: int = 500_000) -> dict:
  """The whole training run as one compiled program; compile timed apart from training."""
  import jax

  from batchrl import configs, experiment, programs
  from batchrl.train import fused

  exp = configs.get("cartpole_fused")
  if num_envs is not None:
    exp = configs.apply_overrides(exp, [f"num_envs={num_envs}", "batch_size=null"])
  env = experiment.build_env(exp.run)
  agent = experiment.build_model(exp)
  per_iteration = exp.run.num_envs * agent.period
  iterations = math.ceil(steps / per_iteration)
  start = time.perf_counter()
  compiled = programs.jit(lambda key: _train_body(env, agent, key, iterations), "loop").lower(
      jax.random.key(0)).compile()
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  sim, infos = compiled(jax.random.key(0))
  jax.block_until_ready(sim)
  train_s = time.perf_counter() - start
  evaluate = programs.jit(fused.make_evaluate(env, agent, 500), "once")
  score = float(evaluate(sim)["mean_score"])
  return {"steps": iterations * per_iteration, "compile_s": compile_s, "train_s": train_s,
          "total_s": compile_s + train_s,
          "steps_per_s": iterations * per_iteration / train_s, "return": score,
          "device": jax.devices()[0].platform}


def _train_body(env, agent, key, iterations):
  """What ``fused.train`` compiles, kept apart so compile and run can be timed separately."""
  import jax

  from batchrl.simulation import init
  from batchrl.train import fused
  sim = init(env, agent, key)
  iteration = fused.make_iteration(env, agent)
  return jax.lax.scan(lambda s, _: iteration(s), sim, None, length=iterations)


def host_pendulum(target: float = -200.0, max_steps: int = 200_000) -> dict:
  """Host Gymnasium Pendulum in worker processes: steps and time to ``target``.

  ``to_target_s``: construction + training phases (compilation included) until the
  evaluation that first reached ``target``; evaluation time is left out, as for the peer.
  """
  from batchrl import configs
  from batchrl.train.local import LocalTrainer

  exp = configs.get("pendulum")
  exp = dataclasses.replace(exp, run=dataclasses.replace(exp.run, steps=max_steps))
  start = time.perf_counter()
  eval_s, reached, score = 0.0, None, math.nan
  with tempfile.TemporaryDirectory() as tmp:
    trainer = LocalTrainer(exp, Path(tmp))
    report = trainer.plan["report"]
    try:
      while trainer.iteration < trainer.plan["total"]:
        trainer.train_phase(report)
        trainer.iteration += report
        eval_start = time.perf_counter()
        score = trainer.eval_phase()["mean_score"]
        eval_s += time.perf_counter() - eval_start
        if score >= target:
          reached = trainer.step
          break
    finally:
      trainer.close()
  wall = time.perf_counter() - start
  return {"steps": trainer.step, "wall_s": wall, "eval_s": eval_s, "reached_at": reached,
          "to_target_s": wall - eval_s if reached else None, "return": score}


def host_cheetah(steps: int = 1_000_000) -> dict:
  from batchrl import configs
  from batchrl.train.local import LocalTrainer

  exp = configs.get("cheetah")
  exp = dataclasses.replace(exp, run=dataclasses.replace(
      exp.run, steps=steps, report_every=steps // 10))
  with tempfile.TemporaryDirectory() as tmp:
    trainer = LocalTrainer(exp, Path(tmp))
    start = time.perf_counter()
    try:
      while trainer.iteration < trainer.plan["total"]:
        trainer.train_phase(trainer.plan["report"])
        trainer.iteration += trainer.plan["report"]
      score = trainer.eval_phase()["mean_score"]
    finally:
      trainer.close()
  return {"steps": trainer.step, "wall_s": time.perf_counter() - start, "return": score}


# ----------------------------------------------------------------------------- peers


def peer(name: str, use_peers: bool, **args) -> dict | None:
  """The peer's result from this run, or None (not installed, --no-peers, or it failed)."""
  if not use_peers:
    return None
  print(f"  peer {name} {args or ''} ...", flush=True)
  try:
    return run_peer(name, **args)
  except PeerError as e:
    print(f"  peer {name} failed; using recorded figures:\n{e}", file=sys.stderr)
    return None


def _ratio(ours: float | None, theirs: float | None) -> str:
  return f"{ours / theirs:.2f}x" if ours and theirs else "n/a"


def cartpole_rows(use_peers: bool, repeats: int) -> list[tuple[str, str, str, str]]:
  from batchrl import configs

  run = configs.get("cartpole_fused").run
  args = dict(steps=run.steps, eval_every=run.eval_every, episodes=run.num_envs)
  ours, theirs, pairs, cpus = [], [], [], []  # pairs: ours / theirs in the same round
  for _ in range(repeats):  # alternated, so both see the same machine conditions
    print("  batchrl train --config cartpole_fused (cold process) ...", flush=True)
    ours.append(cold_process("cartpole_fused"))
    cpu = _children_cpu()
    result = peer("rejax_ppo_cartpole", use_peers, target=TARGET, **args)
    if result is not None:
      theirs.append(dict(result, cpu_s=_children_cpu() - cpu))
      pairs.append(ours[-1]["wall_s"] / theirs[-1]["subprocess_s"])
      cpus.append(ours[-1]["cpu_s"] / theirs[-1]["cpu_s"])
    print(f"    ours {ours[-1]['wall_s']:.1f} s (cpu {ours[-1]['cpu_s']:.1f} s)" + (
        f", rejax {result['subprocess_s']:.1f} s (cpu {theirs[-1]['cpu_s']:.1f} s)"
        if result else ""), flush=True)
  wall, cpu = (statistics.median(r[k] for r in ours) for k in ("wall_s", "cpu_s"))
  last = ours[-1]
  runs = f"median of {repeats}: " if repeats > 1 else ""
  value = (f"{last['steps']} steps, {runs}whole process {wall:.1f} s (cpu {cpu:.1f} s), "
           f"return {last['final_return']:.1f}, >= {TARGET:g} at "
           f"{reached(last['evals'], TARGET)} steps")
  split = fused_cartpole(steps=run.steps)
  split_value = (f"compile {split['compile_s']:.1f} s + train {split['train_s']:.1f} s, "
                 f"{split['steps_per_s']:,.0f} steps/s, return {split['return']:.1f}")
  if theirs:
    rj = theirs[-1]
    rj_wall, rj_cpu = (statistics.median(r[k] for r in theirs)
                       for k in ("subprocess_s", "cpu_s"))
    how = (f"rejax PPO, same run: {rj['steps']} steps, {runs}whole process {rj_wall:.1f} s "
           f"(cpu {rj_cpu:.1f} s), return {rj['final_return']:.1f}, >= {TARGET:g} at "
           f"{rj['steps_to_target']} steps")
    ratio = f"{statistics.median(pairs):.2f}x (cpu {statistics.median(cpus):.2f}x)"
    if repeats > 1:
      ratio += f"; pairs {', '.join(f'{x:.2f}' for x in pairs)}"
    return [("cartpole cold process", value, how, ratio),
            ("cartpole compile / train", split_value,
             f"rejax, same run: compile {rj['compile_s']:.1f} s + train {rj['train_s']:.1f} s",
             f"{_ratio(split['compile_s'], rj['compile_s'])} / "
             f"{_ratio(split['train_s'], rj['train_s'])}")]
  rec = recorded("rejax_ppo_cartpole")
  how = (f"RECORDED (peers.md, not this run): rejax compile {rec['compile_s']} s + train "
         f"{rec['train_s']} s = {rec['total_s']} s in-process")
  return [("cartpole cold process", value, "no peer in this run", "n/a"),
          ("cartpole compile + train", split_value, how,
           _ratio(split["total_s"], rec["total_s"]))]


def pendulum_rows(use_peers: bool) -> list[tuple[str, str, str, str]]:
  target = -200.0
  print("  batchrl pendulum (host envs) ...", flush=True)
  ours = host_pendulum(target)
  where = (f"{target:g} at {ours['reached_at']} steps in {ours['to_target_s']:.1f} s"
           if ours["reached_at"] else f"{target:g} not reached in {ours['steps']} steps")
  value = f"{where}; last eval {ours['return']:.1f}"
  sb3 = peer("sb3_ppo_pendulum", use_peers, target=target)
  if sb3 is not None:
    to_target = (sb3["setup_s"] + sb3["train_s_to_target"]
                 if sb3["train_s_to_target"] is not None else None)
    where = (f"{target:g} at {sb3['steps_to_target']} steps in {to_target:.1f} s"
             if to_target else f"{target:g} not reached in {sb3['steps']} steps")
    how = (f"SB3 PPO rl-zoo, same run: {where}; {sb3['steps']} steps, whole process "
           f"{sb3['subprocess_s']:.1f} s, return {sb3['final_return']:.1f}")
    return [("pendulum time to -200", value, how, _ratio(ours["to_target_s"], to_target))]
  rec = recorded("sb3_ppo_pendulum")
  how = (f"RECORDED (peers.md, not this run): SB3 {rec['steps']} steps in "
         f"{rec['total_s']} s, return {rec['final_return']}")
  return [("pendulum time to -200 vs SB3 100k run", value, how,
           _ratio(ours["to_target_s"], rec["total_s"]))]


# ------------------------------------------------------------------------------ main


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--only", default="cartpole,pendulum",
                      help="comma list of: cartpole, pendulum, cheetah, gpu")
  parser.add_argument("--envs", type=int, default=2048, help="envs for the 'gpu' row")
  parser.add_argument("--repeats", type=int, default=1,
                      help="cartpole: alternate ours and rejax this many times; medians")
  parser.add_argument("--no-peers", action="store_true",
                      help="do not run peers; use the recorded figures")
  args = parser.parse_args()
  use_peers = not args.no_peers
  rows = []
  for name in args.only.split(","):
    print(f"running {name} ...", flush=True)
    if name == "cartpole":
      rows += cartpole_rows(use_peers, args.repeats)
    elif name == "pendulum":
      rows += pendulum_rows(use_peers)
    elif name == "cheetah":
      r = host_cheetah()
      rows.append((name, f"{r['steps']} steps in {r['wall_s']:.0f} s, return {r['return']:.0f}",
                   RECORDED_CHEETAH, _ratio(r["wall_s"], 600.0)))
    elif name == "gpu":
      r = fused_cartpole(num_envs=args.envs, steps=2_000_000)
      rows.append((f"cartpole x{args.envs} ({r['device']})",
                   f"{r['steps_per_s']:,.0f} steps/s (compile {r['compile_s']:.1f} s), "
                   f"return {r['return']:.1f}", "", ""))
    else:
      raise SystemExit(f"unknown benchmark {name!r}; valid: cartpole, pendulum, cheetah, gpu")
  print_table(rows, use_peers, "ours / peer time")


def add_row_arguments(parser, rows, default: str | None = None,
                      no_peers_help: str = "ours only") -> None:
  """``--only`` (a comma list of ``rows``; all by default) and ``--no-peers``."""
  parser.add_argument("--only", default=default or ",".join(rows),
                      help=f"comma list of: {', '.join(rows)}")
  parser.add_argument("--no-peers", action="store_true", help=no_peers_help)


def chosen_rows(parser, args, rows) -> list[str]:
  """The rows ``--only`` names, in its order; an unknown one is a usage error."""
  names = [n.strip() for n in args.only.split(",") if n.strip()]
  unknown = [n for n in names if n not in rows]
  if unknown:
    parser.error(f"unknown rows {unknown}; valid: {', '.join(rows)}")
  return names


def run_rows(names: list[str], make_row, use_peers: bool) -> list:
  """``make_row(name, use_peers)`` for each chosen row, saying which one runs."""
  rows = []
  for name in names:
    print(f"running {name} ...", flush=True)
    rows.append(make_row(name, use_peers))
  return rows


def print_table(rows: list[tuple[str, str, str, str]], use_peers: bool, ratio_header: str) -> None:
  """The load, the peers' versions, and one markdown row per (name, ours, peer, ratio)."""
  state = manifest()
  load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
  print(f"\nload average {load:.2f} on {os.cpu_count()} CPUs; peers: "
        + (", ".join(f"{k} {v}" for k, v in state["versions"].items() if v)
           if state and use_peers else "not run (recorded figures)"))
  print(f"\n| benchmark | batchrl | peer | {ratio_header} |\n|---|---|---|---|")
  for name, value, how, ratio in rows:
    print(f"| {name} | {value} | {how} | {ratio} |")


if __name__ == "__main__":
  main()
