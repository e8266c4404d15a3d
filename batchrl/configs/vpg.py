"""VPG named configs (``batchrl train``): its config class is ``batchrl.agents.vpg.VPGConfig``,
its recipes ``batchrl.agents.vpg.recipes``.

Measured on a 2-core CPU with the fused driver (gymnax), deterministic evaluation:
see each factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.vpg.recipes import cartpole_fused
from batchrl.configs.run import Experiment, periodic_run


def _experiment(name: str, run, config) -> Experiment:
  return Experiment(name, run, config, agent="vpg")


def vpg_cartpole():
  """VPG on CartPole-v1, host envs stepped in this process, 'states' MLP baseline.

  Measured (2-core CPU, seed 0): deterministic evaluation 500 from 20k steps on; 87 s wall
  for the 200k steps including evaluations (with 2 worker processes; CartPole steps in
  microseconds, so stepping it in this process is 2-3x faster than through workers).
  """
  return _experiment("vpg_cartpole", periodic_run(
      "CartPole-v1", "gymnasium", 16, 200_000, max_length=500, normalize_ranges=False,
      num_workers=0),
      cartpole_fused())


def vpg_cartpole_fused():
  """VPG on CartPole-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, 4 seeds vmapped): deterministic evaluation 500 for 4 of 4 seeds at
  49k steps and at every evaluation after it up to 491k; 49 s wall for the 4 seeds.
  """
  return _experiment("vpg_cartpole_fused",
                     periodic_run("CartPole-v1", "gymnax", 16, 500_000), cartpole_fused())


NAMED = {
    "vpg_cartpole": (vpg_cartpole, None),
    "vpg_cartpole_fused": (vpg_cartpole_fused, None),
}
