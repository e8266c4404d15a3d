"""DDPG's named configs (``batchrl train``): its config class is ``batchrl.agents.ddpg.DDPGConfig``,
its recipes ``batchrl.agents.ddpg.recipes``. The runs it shares with the other actor-critic
agents and the table of their named configs are in ``batchrl.configs.actor_critic``; the
measured figures are in each factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.ddpg.recipes import pendulum_ddpg
from batchrl.configs.actor_critic import PER_STEP, pendulum_fused_run, pendulum_run
from batchrl.configs.run import Experiment


def ddpg_pendulum():
  """Gymnasium Pendulum-v1, DDPG, 20k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1461 at 2k, -867 at 4k, -154 at 6k, best -64 at 12k, -205 at 20k (evaluations start
  from the same states each time, so their level moves with those states); 58 s whole run
  on 2 shared CPU cores."""
  return Experiment("ddpg_pendulum", pendulum_run(20_000), pendulum_ddpg(**PER_STEP), agent="ddpg")


def ddpg_pendulum_fused():
  """gymnax Pendulum-v1, DDPG, 20k steps; the run is one compiled program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 1k steps):
  -1624 at 1k, -771 at 3k, -249 at 4k, -94 at 8k, then between -565 and -103 (mostly -100
  to -200) up to 19k, best -91 at 20k; 212 s whole run, compilation included, on 2 CPU
  cores shared with 5 other jobs (load average 8)."""
  return Experiment("ddpg_pendulum_fused", pendulum_fused_run(20_000), pendulum_ddpg(**PER_STEP),
                    agent="ddpg")


NAMED = {
    "ddpg_pendulum": (ddpg_pendulum, "Pendulum-v1 (gymnasium), DDPG (20k steps)"),
    "ddpg_pendulum_fused": (ddpg_pendulum_fused, "Pendulum-v1 in gymnax, DDPG (20k steps)"),
}
