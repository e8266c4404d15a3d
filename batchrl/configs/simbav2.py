"""SimbaV2's named configs (``batchrl train``): its config class is
``batchrl.agents.simbav2.SimbaV2Config``, its recipes ``batchrl.agents.simbav2.recipes``. The
runs it shares with the other actor-critic agents and the table of their named configs are
in ``batchrl.configs.actor_critic``; the measured figures are in each factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.simbav2.recipes import mujoco_simbav2, pendulum_simbav2
from batchrl.configs.actor_critic import PER_STEP, mujoco_run, pendulum_fused_run, pendulum_run
from batchrl.configs.run import Experiment

# Pendulum's networks: an actor block and two critic blocks of width 64 (the reference's
# 128 and 512 cost 10x the products for a task that small networks learn)
NARROW_BLOCKS = dict(actor_layers=(64,), critic_layers=(64, 64))


def simbav2_pendulum():
  """Gymnasium Pendulum-v1, SimbaV2 with blocks of width 64 (``pendulum_simbav2``: Adam
  1e-3, 101 bins on [-5, 5], rewards scaled and observations normalized), 20k steps.

  Measured: see ``docs/choosing-an-agent.md``."""
  return Experiment("simbav2_pendulum", pendulum_run(20_000),
                    pendulum_simbav2(**PER_STEP, **NARROW_BLOCKS), agent="simbav2")


def simbav2_pendulum_fused():
  """gymnax Pendulum-v1, SimbaV2 with blocks of width 64 and batch 128, 10k steps; the run
  is one compiled program.

  Measured: see ``docs/choosing-an-agent.md``."""
  return Experiment("simbav2_pendulum_fused", pendulum_fused_run(10_000),
                    pendulum_simbav2(**PER_STEP, **NARROW_BLOCKS, batch_size=128),
                    agent="simbav2")


def simbav2_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """SimbaV2 on a MuJoCo task (HalfCheetah-v5; any other with ``--set env=Hopper-v5``) with
  the reference's values (``batchrl.agents.simbav2.recipes.mujoco_simbav2``: an actor block
  of 128, 2 critics of two blocks of 512 with 101 bins, Adam 1e-4, gamma 0.995, uniform
  actions for 5000 steps, one gradient step per environment step), 1M steps of 1 env, a
  greedy evaluation episode every 50k steps (``sac_mujoco``'s run).

  Published (the SimbaV2 repository's results, v4, 100k steps, update ratio 8): HalfCheetah
  7505, Hopper 2927, Walker2d 4488, Ant 3942; ``--set repeat_update=8`` is that ratio, at 8
  times the cost per step."""
  return Experiment("simbav2_mujoco", mujoco_run(env, steps), mujoco_simbav2(),
                    agent="simbav2")


NAMED = {
    "simbav2_pendulum": (simbav2_pendulum, "Pendulum-v1 (gymnasium), SimbaV2 (20k steps)"),
    "simbav2_pendulum_fused": (simbav2_pendulum_fused, "Pendulum-v1 in gymnax, SimbaV2 (10k "
                               "steps)"),
    "simbav2_mujoco": (simbav2_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), SimbaV2 with "
                       "the reference's values (1M steps)"),
}
