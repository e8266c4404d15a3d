"""What every peer script shares: its command line, its clocks and its one JSON line.

Runs inside the peers' venv (``benchmarks/.peers-venv``), so it imports nothing from
batchrl and nothing beyond the standard library at module level.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

SCRIPT_START = time.perf_counter()


def process_seconds() -> float:
  """Seconds since this process started (interpreter start-up and imports included).

  Read from /proc on Linux; elsewhere, since this module was imported.
  """
  try:
    with open("/proc/self/stat") as f:
      start_ticks = float(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
      uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
  except (OSError, ValueError, IndexError):
    return time.perf_counter() - SCRIPT_START


def parser(description: str, *, steps: int, episodes: int, target: float,
           envs: tuple[str, ...] = ()) -> argparse.ArgumentParser:
  """The options every peer script takes; defaults are the peer's published settings."""
  p = argparse.ArgumentParser(description=description)
  p.add_argument("--steps", type=int, default=steps, help=f"training env steps ({steps})")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--episodes", type=int, default=episodes,
                 help=f"deterministic evaluation episodes per evaluation ({episodes})")
  p.add_argument("--eval-every", type=int, default=None,
                 help="training steps between evaluations (default: steps / 10)")
  p.add_argument("--target", type=float, default=target,
                 help=f"mean evaluation return whose first crossing is reported ({target:g})")
  if envs:
    p.add_argument("--env", default=envs[0], choices=envs)
  return p


def eval_every(args) -> int:
  return max(1, args.eval_every or args.steps // 10)


def summarize(evals: list[tuple[int, float, float]], target: float) -> dict:
  """Final/best return and the first evaluated step at or above ``target``.

  ``evals``: (step, mean return, std) of each evaluation, in order; the last one is the
  evaluation after training.
  """
  if not evals:
    raise ValueError("no evaluation ran; the final evaluation must always run")
  reached = next((int(step) for step, mean, _ in evals if mean >= target), None)
  return {"final_return": float(evals[-1][1]), "final_return_std": float(evals[-1][2]),
          "best_return": float(max(mean for _, mean, _ in evals)), "target": target,
          "steps_to_target": reached,
          "evals": [[int(step), round(float(mean), 2)] for step, mean, _ in evals]}


def emit(result: dict) -> None:
  """Print the result as one JSON line on stdout (the last line the script prints)."""
  result = dict(result, process_s=round(process_seconds(), 3),
                python=sys.version.split()[0])
  clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
           for k, v in result.items()}
  sys.stdout.flush()
  print(json.dumps(clean), flush=True)
