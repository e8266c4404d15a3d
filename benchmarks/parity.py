"""Learning parity: batchrl's SAC/TD3/TQC beside sbx's (and optionally SB3's or
sb3-contrib's) with the same values, the same budget and the same seeds, on MuJoCo v5 tasks.
Resumable.

    python benchmarks/parity.py --algos sac --envs Hopper-v5 Walker2d-v5 --seeds 0 1 2
    python benchmarks/parity.py --algos tqc --envs HalfCheetah-v5 --seeds 0
    python benchmarks/parity.py --table-only          # the table from what has finished

Each run is a subprocess: batchrl's is ``batchrl train --config {algo}_mujoco`` with
``--set env=... steps=... eval_every=...`` (its named configs: the values the SAC/TD3/TQC
papers, CleanRL, rl-zoo and sb3-contrib share), the peer's is
``benchmarks/peers/sbx_train.py`` in the peers' venv with the same values (see its
docstring; ``--libraries sb3`` is SB3's SAC/TD3 and sb3-contrib's TQC), starting as our
config does: uniform random actions until learning starts where the config has
``start_steps`` (TD3), else the untrained policy from the first step (SAC, TQC). Runs go
under ``--results`` (default ``benchmarks/results/parity``); a run killed mid-way continues
from its last checkpoint (batchrl: exactly; the peer: from its last saved chunk) when the
same command is given again, and finished runs are skipped, so the benchmark can run
across several sittings.
Runs are taken seed by seed (every task's seed 0 first), so a partial table has one seed
everywhere before it has three anywhere.

``--libraries batchrl sbx sbx-paper``: also sbx's TD3 with the paper's actor objective and
target steps where sbx departs from them (``benchmarks/peers/sbx_train.py --paper-td3``), to
tell those two choices from the rest of the implementations (TD3 only). ``batchrl-sbx`` is
the mirror image: our TD3 with sbx's two choices (``--set actor_q=min --set
targets_with_actor=false``), its runs in ``batchrl/sbx-td3-...``. ``batchrl-clip`` is our
SAC, TQC or CrossQ with sbx's log-std head (``--set log_std_head=clip``: clipped to [-20,
2] instead of a tanh into [-5, 2]), its runs in ``batchrl/clip-tqc-...``: whether the head
explains a gap to sbx. ``sbx-tanh`` is its mirror: sbx's SAC or TQC with our head
(``benchmarks/peers/sbx_train.py --batchrl-head``), its runs in ``sbx-tanh-tqc-...``.

The table: best and final greedy evaluation (mean of ``--episodes`` episodes) per run, the
mean over finished seeds (of the best, of the evaluations after learning starts, of the
final), and batchrl's mean best as a ratio of the peer's. The best counts the
evaluations after the first gradient step only (our config's ``first_update``, the peer's
``learning_starts``): before it both evaluate an untrained network, and on Ant-v5 that
network, standing still, scores ~840 for its healthy reward, more than TD3 at 100k.
Evaluations happen every ``--eval-every`` steps on a separate env in both libraries.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from batchrl import configs  # noqa: E402  (after the path tweak above)
from batchrl.bench.machine import machine  # noqa: E402  (after the path tweak above)
from batchrl.files import write_atomic  # noqa: E402  (after the path tweak above)
from batchrl.logging import read_metrics  # noqa: E402  (after the path tweak above)
from batchrl.train import rundir  # noqa: E402  (after the path tweak above)
from peers.run import installed, parse_result, peer_env, python_path  # noqa: E402  (after the path tweak above)

ALGOS = ("sac", "td3", "tqc", "crossq")
ENVS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5")
PEER_SCRIPT = os.path.join(HERE, "peers", "sbx_train.py")
LIBRARIES = ("batchrl", "sbx", "sb3", "sbx-paper", "batchrl-sbx", "batchrl-clip", "sbx-tanh")
# a variant: (the library it runs, its options, the algorithms it applies to); a peer's
# options go to sbx_train.py, ours are ``--set`` overrides of the named config
VARIANTS = {"sbx-paper": ("sbx", ["--paper-td3"], ("td3",)),
            "batchrl-sbx": ("batchrl", ["actor_q=min", "targets_with_actor=false"], ("td3",)),
            "batchrl-clip": ("batchrl", ["log_std_head=clip"], ("sac", "tqc", "crossq")),
            "sbx-tanh": ("sbx", ["--batchrl-head"], ("sac", "tqc"))}


def run_name(library: str, algo: str, env: str, seed: int) -> str:
  return f"{library}-{algo}-{env}-s{seed}"


def variant(library: str) -> tuple[str, list[str], tuple[str, ...]]:
  """(the library it runs, its options, its algorithms) of a name in ``LIBRARIES``: a plain
  library runs itself with no options, every algorithm."""
  return VARIANTS.get(library, (library, [], ALGOS))


def runs(library: str) -> str:
  """The library a name (or a variant's name) runs: batchrl, sbx or sb3."""
  return variant(library)[0]


def ours_stamp(library: str, algo: str, env: str, seed: int) -> str:
  return run_name(library, algo, env, seed).removeprefix("batchrl-")


def ours_command(algo: str, env: str, seed: int, args, library: str = "batchrl") -> list[str]:
  """``batchrl train`` with the named config (and a variant's overrides); the same
  timestamp resumes the run."""
  sets = dict(env=env, steps=args.steps, eval_every=args.eval_every,
              eval_episodes=args.episodes, eval_steps=args.episodes * 1000,
              checkpoint_every=args.eval_every, keep_checkpoints=1)
  cmd = [sys.executable, "-m", "batchrl", "train", "--config", f"{algo}_mujoco",
         "--logdir", os.path.join(args.results, "batchrl"),
         "--timestamp", ours_stamp(library, algo, env, seed), "--seed", str(seed)]
  _, variant_sets, _ = variant(library)
  for override in [f"{key}={value}" for key, value in sets.items()] + variant_sets:
    cmd += ["--set", override]
  return cmd


def ours_dir(algo: str, env: str, seed: int, args, library: str = "batchrl") -> str:
  """Where ``batchrl train`` put the run: named as it names runs (the env added where it is
  not the config's own; a run an earlier release named without it is found too)."""
  config = f"{algo}_mujoco"
  return str(rundir.named_run_directory(
      os.path.join(args.results, "batchrl"), config, env, configs.own_env(configs.get(config)),
      ours_stamp(library, algo, env, seed)))


def ours_evals(run_dir: str) -> list[tuple[int, float]]:
  """(step, mean greedy return) of every evaluation in a batchrl run's metrics."""
  try:
    rows = read_metrics(run_dir)
  except FileNotFoundError:
    return []
  return [(int(r["step"]), float(r["mean_score"])) for r in rows if r.get("phase") == "eval"]


def ours_seconds(run_dir: str) -> float:
  """The seconds a batchrl run trained, over all its sittings: each report's steps over its
  steps per second (a run resumed from a checkpoint is not timed by its last sitting)."""
  reports = sorted((r for r in read_metrics(run_dir)
                    if r.get("phase") == "train" and r.get("steps_per_second")),
                   key=lambda r: r["step"])
  steps = [0] + [int(r["step"]) for r in reports]
  return sum((b - a) / r["steps_per_second"] for a, b, r in zip(steps, steps[1:], reports))


def starts_uniform(algo: str) -> bool:
  """Whether our named config acts uniformly before learning starts (``start_steps``, TD3's
  25000, the peer's ``learning_starts``): the peer then does too, its own way; else the
  peer's untrained policy acts from the first step, as ours."""
  return configs.get(f"{algo}_mujoco").config.start_steps > 0


def learning_starts(algo: str) -> int:
  """The step of the first gradient step, in our named config and (the same value) the peer's."""
  return configs.get(f"{algo}_mujoco").config.first_update


def learned_evals(result: dict, algo: str) -> list[float]:
  """The evaluations after learning started (none for a result recorded without them)."""
  return [m for step, m in result.get("evals", ()) if step > learning_starts(algo)]


def best_learned(result: dict, algo: str) -> float:
  """The best evaluation after learning started (a result without its evaluations: its
  recorded best)."""
  evals = learned_evals(result, algo)
  return max(evals) if evals else result["best_return"]


def mean_learned(results: list[dict], algo: str) -> str:
  """The mean over runs of each run's mean evaluation after learning started: steadier
  than the best, which one lucky evaluation sets. Blank where a run lacks its evaluations."""
  per_run = [learned_evals(r, algo) for r in results]
  if not all(per_run):
    return ""
  return f"{sum(sum(e) / len(e) for e in per_run) / len(per_run):.0f}"


def peer_command(library: str, algo: str, env: str, seed: int, args) -> list[str]:
  _, options, _ = variant(library)
  options = options + (["--uniform-start"] if starts_uniform(algo) else [])
  return [python_path(), PEER_SCRIPT, "--library", runs(library), *options, "--algo", algo,
          "--env", env, "--seed", str(seed), "--steps", str(args.steps), "--eval-every",
          str(args.eval_every), "--episodes", str(args.episodes), "--save-dir",
          os.path.join(args.results, run_name(library, algo, env, seed))]


def applies(library: str, algo: str) -> bool:
  return algo in variant(library)[2]


def result_path(library: str, algo: str, env: str, seed: int, args) -> str:
  return os.path.join(args.results, run_name(library, algo, env, seed) + ".json")


def load_result(library: str, algo: str, env: str, seed: int, args) -> dict | None:
  path = result_path(library, algo, env, seed, args)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def write_result(path: str, result: dict) -> None:
  """Writes a finished run's result with the day and the machine it ran on, which the
  table of docs/benchmarks.md names (``batchrl bench --write-docs``)."""
  result = {**result, "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": machine()}
  write_atomic(path, json.dumps(result))


def run_ours(library: str, algo: str, env: str, seed: int, args) -> dict:
  start = time.perf_counter()
  cmd = ours_command(algo, env, seed, args, library)
  log = os.path.join(args.results, run_name(library, algo, env, seed) + ".log")
  with open(log, "a") as f:  # its log lines (the run folder keeps its metrics)
    proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
  if proc.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed (exit code {proc.returncode}): see {log}")
  run_dir = ours_dir(algo, env, seed, args, library)
  evals = ours_evals(run_dir)
  if not evals:
    raise RuntimeError(f"{' '.join(cmd)} finished, but {run_dir} has no evaluation in its "
                       f"metrics: see {log}")
  return {"library": library, "algo": algo, "env": env, "seed": seed, "steps": args.steps,
          "evals": evals, "best_return": max(m for _, m in evals),
          "final_return": evals[-1][1], "sitting_s": round(time.perf_counter() - start, 1),
          "run_s": round(ours_seconds(run_dir), 1),
          "command": " ".join(cmd)}


def run_peer(library: str, algo: str, env: str, seed: int, args) -> dict:
  cmd = peer_command(library, algo, env, seed, args)
  proc = subprocess.run(cmd, capture_output=True, text=True, env=peer_env())
  result = parse_result(proc.stdout)
  if proc.returncode != 0 or result is None:
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-20:])
    raise RuntimeError(f"{' '.join(cmd)} failed (exit code {proc.returncode}):\n{tail}")
  result["evals"] = [tuple(e) for e in result["evals"]]
  result["library"], result["command"] = library, " ".join(cmd)
  return result


def jobs(args):
  """(library, algo, env, seed) in the order they run: seed-major."""
  for seed in args.seeds:
    for algo in args.algos:
      for env in args.envs:
        for library in args.libraries:
          if applies(library, algo):
            yield library, algo, env, seed


def summary_rows(args) -> list[str]:
  """Markdown rows: per (algo, env), each library's runs and the mean ratio."""
  lines = ["| algo | env | library | seeds done | best (per seed) | mean best | "
           "mean after start | mean final | batchrl / peer (best) |",
           "|---|---|---|---|---|---|---|---|---|"]
  for algo in args.algos:
    for env in args.envs:
      means = {}
      for library in (lib for lib in args.libraries if applies(lib, algo)):
        done = [r for r in (load_result(library, algo, env, s, args) for s in args.seeds) if r]
        if not done:
          lines.append(f"| {algo} | {env} | {library} | 0/{len(args.seeds)} | pending | | | | |")
          continue
        best = [best_learned(r, algo) for r in done]
        final = [r["final_return"] for r in done]
        means[library] = sum(best) / len(best)
        ratio = ""
        if runs(library) != "batchrl" and "batchrl" in means and means[library] > 0:
          ratio = f"{means['batchrl'] / means[library]:.2f}"
        lines.append(f"| {algo} | {env} | {library} | {len(done)}/{len(args.seeds)} | "
                     f"{', '.join(f'{b:.0f}' for b in best)} | {means[library]:.0f} | "
                     f"{mean_learned(done, algo)} | {sum(final) / len(final):.0f} | {ratio} |")
  return lines


def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--algos", nargs="+", choices=ALGOS, default=["sac"])
  p.add_argument("--envs", nargs="+", choices=ENVS, default=["Hopper-v5", "Walker2d-v5"])
  p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
  p.add_argument("--libraries", nargs="+", choices=LIBRARIES,
                 default=["batchrl", "sbx"])
  p.add_argument("--steps", type=int, default=100_000)
  p.add_argument("--eval-every", type=int, default=10_000)
  p.add_argument("--episodes", type=int, default=5, help="greedy episodes per evaluation")
  p.add_argument("--results", default=os.path.join(HERE, "results", "parity"))
  p.add_argument("--table-only", action="store_true", help="print the table, run nothing")
  args = p.parse_args(argv)
  os.makedirs(args.results, exist_ok=True)
  if not args.table_only:
    if any(runs(lib) != "batchrl" for lib in args.libraries) and not installed():
      raise SystemExit("the peers' venv is not installed: python benchmarks/peers/setup.py")
    for library, algo, env, seed in jobs(args):
      if load_result(library, algo, env, seed, args):
        continue  # finished in an earlier sitting
      print(f"{time.strftime('%H:%M:%S')} {run_name(library, algo, env, seed)} ...",
            flush=True)
      result = (run_ours(library, algo, env, seed, args) if runs(library) == "batchrl"
                else run_peer(library, algo, env, seed, args))
      write_result(result_path(library, algo, env, seed, args), result)
      print(f"  best {best_learned(result, algo):.0f}, final {result['final_return']:.0f}",
            flush=True)
  print(f"{args.steps} steps, greedy evaluation of {args.episodes} episodes every "
        f"{args.eval_every} steps; results in {args.results}")
  print("\n".join(summary_rows(args)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
