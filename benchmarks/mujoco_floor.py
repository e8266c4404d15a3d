"""MuJoCo training against the simulator's floor (not a test): issue 18's ratio per config.

    python benchmarks/mujoco_floor.py                              # 20k steps each
    python benchmarks/mujoco_floor.py --configs ppo_mujoco --steps 300000   # the PPO target

For each named config, in one run: ``batchrl train --config NAME --set steps=STEPS`` as a
fresh process with an empty compilation cache (start-up, compilation, evaluations and
checkpoints included: the whole process a user waits for), and right before it the raw
Gymnasium env of that config stepped STEPS times with random actions in one process (no
wrappers of ours; resets where episodes end). Printed: both times and their ratio, and the
training run's steady rate (its reports after the first) against the raw env's.

Issue 18's target for ``ppo_mujoco`` at 300k steps: whole process <= 1.5x the raw env's
time. For ``sac_mujoco`` and ``td3_mujoco`` the floor is the gradient step (one per env
step, 2x256 MLPs, batch 256), not the env; pass ``--set`` overrides as arguments to shorten
their warm-up, e.g. ``first_update=1000`` (both).

Measured (2026-11-26, this 2-core CPU, load average 1.5-3 from another job): ``ppo_mujoco``
300k steps: raw env 12.5 s, whole training process 41.6 s = 3.32x (issue 18's target 1.5x),
steady 8,593 steps/s against the raw env's 23,938 (0.36). ``trpo_cheetah`` 20k steps: 17x
(start-up dominates such a short run; its 1M-step run takes 192 s, about 4.6x the raw env's
time at this rate). ``sac_mujoco`` / ``td3_mujoco``, 3k steps with ``first_update=1000``:
33.0 s / 47.4 s for 0.1 s of env steps: 2000 gradient steps of 2x256 MLPs at batch 256,
roughly 10-20 ms each on this CPU, are the floor there, 200-400x the env's time.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ppo import cold_process

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from batchrl import configs


def raw_env_seconds(env_id: str, steps: int, seed: int = 0) -> float:
  """Seconds to step ``env_id`` ``steps`` times with random actions in this process."""
  env = gym.make(env_id)
  env.action_space.seed(seed)
  actions = [env.action_space.sample() for _ in range(1000)]
  env.reset(seed=seed)
  start = time.perf_counter()
  for t in range(steps):
    _, _, terminated, truncated, _ = env.step(actions[t % len(actions)])
    if terminated or truncated:
      env.reset()
  seconds = time.perf_counter() - start
  env.close()
  return seconds


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--configs", default="ppo_mujoco,trpo_cheetah,sac_mujoco,td3_mujoco")
  parser.add_argument("--steps", type=int, default=20_000)
  parser.add_argument("--backends", default="gymnasium",
                      help="run.backend values to train each config on, e.g. "
                      "gymnasium,envpool (envpool: pip install \"batchrl[envpool]\")")
  parser.add_argument("sets", nargs="*", help="extra --set overrides for every config")
  args = parser.parse_args()
  print(f"{'config':<14}{'backend':>10}{'steps':>9}{'raw env s':>11}{'train s':>10}"
        f"{'x raw':>8}{'steady steps/s':>16}{'raw steps/s':>13}", flush=True)
  for name in [c for c in args.configs.split(",") if c]:
    exp = configs.get(name)
    raw = raw_env_seconds(exp.run.env, args.steps)
    for backend in args.backends.split(","):
      run = cold_process(name, [f"steps={args.steps}", f"backend={backend}", *args.sets])
      rates = [r["steps_per_second"] for r in run["records"]
               if r.get("phase") == "train" and "steps_per_second" in r][1:]
      steady = statistics.median(rates) if rates else float("nan")
      print(f"{name:<14}{backend:>10}{args.steps:>9,}{raw:>11.1f}{run['wall_s']:>10.1f}"
            f"{run['wall_s'] / raw:>8.2f}{steady:>16,.0f}{args.steps / raw:>13,.0f}",
            flush=True)


if __name__ == "__main__":
  main()
