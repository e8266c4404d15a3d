"""Policy-gradient benchmark (not a test): VPG and TRPO against sb3-contrib in the same run.

    python benchmarks/pg.py                     # TRPO CartPole + Pendulum, VPG fused CartPole
    python benchmarks/pg.py --only cheetah      # TRPO HalfCheetah-v5, 1M steps (long)
    python benchmarks/pg.py --no-peers          # ours only, recorded peer figures

Each of our rows is ``batchrl train --config NAME`` as a fresh process (compilation cache
empty), read back from its ``metrics.jsonl``; sb3-contrib's TRPO runs with the rl-zoo
settings in the peers' own venv (``python benchmarks/peers/setup.py``), in the same run.
Targets (issue 7): TRPO CartPole >= 475 within 100k steps in at most half sb3-contrib's
wall time; TRPO Pendulum >= -200 within 200k; TRPO HalfCheetah >= 1800 at 1M in at most
half sb3-contrib's time; VPG fused CartPole >= 475 within 500k.
"""
from __future__ import annotations

import argparse
import os
import sys

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [BENCHMARKS, os.path.dirname(BENCHMARKS)]
from ppo import _ratio, add_row_arguments, chosen_rows, peer, run_ours  # noqa: E402  (after the path tweak above)

# name -> (our config, overrides, steps, target, sb3-contrib peer or None)
ROWS = {
    "trpo_cartpole": ("trpo_cartpole", ["steps=100000", "eval_every=10000"], 100_000, 475.0,
                      "trpo_cartpole"),
    "trpo_pendulum": ("trpo_pendulum_fused", ["steps=200000", "eval_every=20000"], 200_000,
                      -200.0, None),
    "vpg_cartpole": ("vpg_cartpole_fused", ["steps=500000", "eval_every=50000"], 500_000,
                     475.0, None),
    "cheetah": ("trpo_cheetah", ["steps=1000000", "eval_every=100000"], 1_000_000, 1800.0,
                "trpo_halfcheetah"),
}


def row(name: str, use_peers: bool) -> tuple[str, str, str, str]:
  config, overrides, steps, target, peer_name = ROWS[name]
  ours, value = run_ours(config, overrides, target)
  theirs = peer(peer_name, use_peers, steps=steps, target=target) if peer_name else None
  if theirs is None:
    how = "no peer in this run" if peer_name else "(no peer row)"
    return (f"{config}", value, how, "n/a")
  how = (f"sb3-contrib TRPO rl-zoo, same run: {theirs['steps']} steps, whole process "
         f"{theirs['subprocess_s']:.1f} s, return {theirs['final_return']:.1f}, >= {target:g} "
         f"at {theirs['steps_to_target']} steps")
  return (f"{config}", value, how, _ratio(ours["wall_s"], theirs["subprocess_s"]))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  add_row_arguments(parser, ROWS, default="trpo_cartpole,trpo_pendulum,vpg_cartpole")
  args = parser.parse_args()
  names = chosen_rows(parser, args, ROWS)
  rows = [row(name, not args.no_peers) for name in names]
  print(f"\n{'row':<22} {'batchrl':<70} ratio (ours/peer wall time)")
  for name, ours, how, ratio in rows:
    print(f"{name:<22} {ours:<70} {ratio}\n{'':<22} peer: {how}")


if __name__ == "__main__":
  main()
