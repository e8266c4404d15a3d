"""TD3's named configs (``batchrl train``): its config class is ``batchrl.agents.td3.TD3Config``,
its recipes ``batchrl.agents.td3.recipes``. The runs it shares with the other actor-critic
agents and the table of their named configs are in ``batchrl.configs.actor_critic``; the
measured figures are in each factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.td3.recipes import mujoco_td3, pendulum_td3
from batchrl.configs.actor_critic import (
  NARROW,
  PER_STEP,
  mujoco_run,
  pendulum_fused_run,
  pendulum_run,
)
from batchrl.configs.run import Experiment


def td3_pendulum():
  """Gymnasium Pendulum-v1, TD3 with 2x64 MLPs, 20k steps.

  Measured with 2x64 (seed 0, ``benchmarks/actor_critic.py``, greedy evaluation of 4
  episodes every 2k steps): >= -200 from 6k on, best -61, -206 at 20k; 74.6 s whole process
  at load 10-13, against SB3's TD3 (rl-zoo: 400x300, learning from 10k) 1077 s in the same
  run: 0.07x (target 0.2x).

  Before, with 2x256 MLPs:
  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1630 at 2k, -525 at 6k, -243 at 8k, -121 at 10k, best -61 at 12k, -206 at 20k; 93 s
  whole run on 2 shared CPU cores (another run beside it)."""
  return Experiment("td3_pendulum", pendulum_run(20_000), pendulum_td3(**PER_STEP, **NARROW),
                    agent="td3")


def td3_pendulum_fused():
  """gymnax Pendulum-v1, TD3, 20k steps; the run is one compiled program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 1k steps):
  -1615 at 1k, -1244 at 4k, -303 at 5k, -230 at 7k, then between -686 and -96 up to 12k,
  -96 at 12k, -94 at 15k, best -90 at 20k; 90 s whole run, compilation included, on 2
  shared CPU cores (the host DDPG run beside it for its first minute)."""
  return Experiment("td3_pendulum_fused", pendulum_fused_run(20_000), pendulum_td3(**PER_STEP),
                    agent="td3")


def td3_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """TD3 on a MuJoCo task (HalfCheetah-v5; any other with ``--set env=Hopper-v5``) with the
  values the published TD3 implementations share (``batchrl.agents.td3.recipes.mujoco_td3``),
  1M steps of 1 env, one gradient step per env step from 25k steps on, a greedy evaluation
  episode every 50k steps.

  Published (CleanRL's TD3 on v4 at 1M): HalfCheetah about 9000-10000. Like them, it acts
  uniformly at random until learning starts (``start_steps``; before 2026-11-29 the
  untrained actor plus its noise acted there). Not yet run to 1M here. Learning on 2 idle
  CPU cores: 6.1 ms per step (``benchmarks/sac_step.py --algo td3``; the actor learns on
  every second gradient step), so 1M steps take about 1.7 h; a checkpoint holds the 1M
  memory in its newest copy only (162 MB on HalfCheetah).
  Side by side with sbx 0.28 at 100k steps (mean of the best greedy evaluations after
  learning starts, the published start on both sides; docs/benchmarks.md): Walker2d-v5 470
  against 482 (0.97x, seeds 0-2), HalfCheetah-v5 3822 against 4020 (0.95x, seeds 0-2),
  Hopper-v5 402 against 648 (0.62x, seeds 0-4) and Ant-v5 537 against 663 (0.81x, seeds
  0-2). On Hopper and Ant the gap is sbx's two TD3 choices, its targets moving on every
  gradient step and its actor climbing min(Q1, Q2): with ``--set actor_q=min --set
  targets_with_actor=false`` ours reaches 697 on Hopper (1.08x) and 709 on Ant (1.07x).
  This config keeps the paper's choices, which CleanRL and SB3 share and the published 1M
  scores come from."""
  return Experiment("td3_mujoco", mujoco_run(env, steps), mujoco_td3(), agent="td3")


NAMED = {
    "td3_pendulum": (td3_pendulum, "Pendulum-v1 (gymnasium), TD3 (20k steps)"),
    "td3_pendulum_fused": (td3_pendulum_fused, "Pendulum-v1 in gymnax, TD3 (20k steps)"),
    "td3_mujoco": (td3_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), TD3 with the "
                   "published values (1M steps)"),
}
