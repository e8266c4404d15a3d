"""CrossQ's named configs (``batchrl train``): its config class is
``batchrl.agents.crossq.CrossQConfig``, its recipes ``batchrl.agents.crossq.recipes``. The runs
it shares with the other actor-critic agents and the table of their named configs are in
``batchrl.configs.actor_critic``; the measured figures are in each factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.crossq.recipes import mujoco_crossq, pendulum_crossq
from batchrl.configs.actor_critic import (
  NARROW,
  PER_STEP,
  mujoco_run,
  pendulum_fused_run,
  pendulum_run,
)
from batchrl.configs.run import Experiment


def crossq_pendulum():
  """Gymnasium Pendulum-v1, CrossQ with 2x64 MLPs (``pendulum_crossq``: Adam 1e-3 with beta1
  0.5, policy delay 3, Batch Renormalization, no target networks), 20k steps.

  Measured: see ``docs/choosing-an-agent.md``."""
  return Experiment("crossq_pendulum", pendulum_run(20_000),
                    pendulum_crossq(**PER_STEP, **NARROW), agent="crossq")


def crossq_pendulum_fused():
  """gymnax Pendulum-v1, CrossQ with 2x64 MLPs and batch 128, 10k steps; the run is one
  compiled program.

  Measured: see ``docs/choosing-an-agent.md``."""
  return Experiment("crossq_pendulum_fused", pendulum_fused_run(10_000),
                    pendulum_crossq(**PER_STEP, **NARROW, batch_size=128), agent="crossq")


def crossq_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """CrossQ on a MuJoCo task (HalfCheetah-v5; any other with ``--set env=Hopper-v5``) with
  the paper's and sbx's values (``batchrl.agents.crossq.recipes.mujoco_crossq``: a 2x256
  actor, 2 critics of 1024x1024, Batch Renormalization, no target networks, Adam 1e-3 with
  beta1 0.5, policy delay 3), 1M steps of 1 env, one gradient step per environment step from
  step 5000 on, a greedy evaluation episode every 50k steps (``sac_mujoco``'s run).

  Published (the SimbaV2 repository's baseline results, v4, 100k steps): HalfCheetah 8112,
  Hopper 2764, Walker2d 3914, Ant 2299, against SAC's 6156, 1103, 690, 747. The 1024-wide
  critics cost about 12x the products of 256-wide ones per gradient step;
  ``--set crossq.critic_layers=[256,256]`` is the cheap option (the paper reports it learns
  less per sample)."""
  return Experiment("crossq_mujoco", mujoco_run(env, steps), mujoco_crossq(), agent="crossq")


NAMED = {
    "crossq_pendulum": (crossq_pendulum, "Pendulum-v1 (gymnasium), CrossQ (20k steps)"),
    "crossq_pendulum_fused": (crossq_pendulum_fused, "Pendulum-v1 in gymnax, CrossQ (10k "
                              "steps)"),
    "crossq_mujoco": (crossq_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), CrossQ with "
                      "the paper's and sbx's values (1M steps)"),
}
