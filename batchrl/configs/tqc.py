"""TQC's named configs (``batchrl train``): its config class is ``batchrl.agents.tqc.TQCConfig``,
its recipes ``batchrl.agents.tqc.recipes``. The runs it shares with the other actor-critic
agents and the table of their named configs are in ``batchrl.configs.actor_critic``; the
measured figures are in each factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.tqc.recipes import mujoco_tqc, mujoco_tqc_simba, pendulum_tqc
from batchrl.configs.actor_critic import (
  NARROW,
  PER_STEP,
  mujoco_run,
  pendulum_fused_run,
  pendulum_run,
)
from batchrl.configs.run import Experiment


def tqc_pendulum():
  """Gymnasium Pendulum-v1, TQC with 2x64 MLPs (``sac_pendulum``'s values; 2 critics of 25
  quantiles, 2 dropped per critic), 20k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1457 at 2k, -220 at 4k, -150 at 6k, -119 at 10k, best -60 at 12k, -203 at 20k (as
  ``sac_pendulum``: -61 best, -206 at 20k); 165 s whole run (105 s of CPU) on 2 CPU cores
  shared with a CI run."""
  return Experiment("tqc_pendulum", pendulum_run(20_000), pendulum_tqc(**PER_STEP, **NARROW),
                    agent="tqc")


def tqc_pendulum_fused():
  """gymnax Pendulum-v1, TQC with 2x64 MLPs and batch 128 (``sac_pendulum_fused``'s values;
  2 critics of 25 quantiles, 2 dropped per critic), 10k steps; the run is one compiled
  program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 1k steps):
  -1542 at 1k, -903 at 3k, -208 at 4k, -120 at 5k, best -92 at 8k, -117 at 10k (as
  ``sac_pendulum_fused``: best -92, -118 at 10k); 41 s whole run (27 s of CPU), compilation
  included, on 2 CPU cores shared with a CI run."""
  return Experiment("tqc_pendulum_fused", pendulum_fused_run(10_000),
                    pendulum_tqc(**PER_STEP, **NARROW, batch_size=128), agent="tqc")


def tqc_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """TQC on a MuJoCo task (HalfCheetah-v5; any other with ``--set env=Hopper-v5``) with
  sb3-contrib's and sbx's values (``batchrl.agents.tqc.recipes.mujoco_tqc``: ``sac_mujoco``'s
  with 2 critics of 25 quantiles, the 2 largest of each dropped), 1M steps of 1 env, one
  gradient step per environment step from step 5000 on, a greedy evaluation episode every
  50k steps (``sac_mujoco``'s run).

  Published (rl-zoo's TQC on v3 at 1M): HalfCheetah 12090, against SAC's 9535. Not yet run
  to 100k here (issue 51 leaves it to ``benchmarks/parity.py`` beside sbx)."""
  return Experiment("tqc_mujoco", mujoco_run(env, steps), mujoco_tqc(), agent="tqc")


def tqc_simba_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """TQC with SimBa networks on a MuJoCo task (HalfCheetah-v5; any other with ``--set
  env=Hopper-v5``): sbx's SimBa recipe, whose README example trains TQC
  (``batchrl.agents.tqc.recipes.mujoco_tqc_simba``: ``tqc_mujoco``'s 2 critics of 25
  quantiles, 2 dropped per critic, with ``sac_simba_mujoco``'s networks, AdamW, observation
  normalization and 10k uniform steps); 1M steps of 1 env, a greedy evaluation episode every
  50k steps. Not yet run here at that budget."""
  return Experiment("tqc_simba_mujoco", mujoco_run(env, steps), mujoco_tqc_simba(), agent="tqc")


NAMED = {
    "tqc_pendulum": (tqc_pendulum, "Pendulum-v1 (gymnasium), TQC (20k steps)"),
    "tqc_pendulum_fused": (tqc_pendulum_fused, "Pendulum-v1 in gymnax, TQC (10k steps)"),
    "tqc_mujoco": (tqc_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), TQC with "
                   "sb3-contrib's and sbx's values (1M steps)"),
    "tqc_simba_mujoco": (tqc_simba_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), TQC with "
                         "SimBa networks, sbx's recipe (1M steps)"),
}
