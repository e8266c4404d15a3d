"""DDPG, TD3 and SAC named experiments (``batchrl train``); their config classes are in
``batchrl.agents.ddpg``, ``batchrl.agents.td3`` and ``batchrl.agents.sac``.

Named configs for ``batchrl train``:

======================  =========  =========================================================
name                    backend    what
======================  =========  =========================================================
``ddpg_pendulum``       gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: DDPG
``td3_pendulum``        gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: TD3
``sac_pendulum``        gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: SAC
``td3_pendulum_fused``  gymnax     Pendulum-v1, 4 envs, 20k steps, one compiled program: TD3
``sac_pendulum_fused``  gymnax     Pendulum-v1, 4 envs, 10k steps, one compiled program: SAC
======================  =========  =========================================================

All of them take one gradient step per environment step (``repeat_update=4`` per store of 4
envs) with 2x256 MLPs and batch 256. Measured figures are in each factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.ddpg.presets import pendulum_ddpg
from batchrl.agents.sac.presets import pendulum_sac
from batchrl.agents.td3.presets import pendulum_td3
from batchrl.configs.run import Experiment, RunConfig

_PER_STEP = dict(update_frequency=1, repeat_update=4)  # 4 envs: one gradient step per step
# the gymnasium stack advertises unbounded actions and clips them to [-1, 1] itself
_HOST = dict(_PER_STEP, action_bounds=(-1.0, 1.0))


def _host(steps: int) -> RunConfig:
  return RunConfig(env="Pendulum-v1", backend="gymnasium", num_envs=4, num_workers=0,
                   steps=steps, report_every=2_000, eval_every=2_000, eval_steps=200,
                   checkpoint_every=10_000)


def _fused(steps: int) -> RunConfig:
  return RunConfig(env="Pendulum-v1", backend="gymnax", num_envs=4, num_workers=0,
                   steps=steps, report_every=1_000, eval_every=1_000, eval_steps=200,
                   checkpoint_every=steps)


def ddpg_pendulum():
  """Gymnasium Pendulum-v1, DDPG, 20k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1461 at 2k, -867 at 4k, -154 at 6k, best -64 at 12k, -205 at 20k (evaluations start
  from the same states each time, so their level moves with those states); 58 s whole run
  on 2 shared CPU cores."""
  return Experiment("ddpg_pendulum", _host(20_000), pendulum_ddpg(**_HOST), agent="ddpg")


def td3_pendulum():
  """Gymnasium Pendulum-v1, TD3, 20k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1630 at 2k, -525 at 6k, -243 at 8k, -121 at 10k, best -61 at 12k, -206 at 20k; 93 s
  whole run on 2 shared CPU cores (another run beside it)."""
  return Experiment("td3_pendulum", _host(20_000), pendulum_td3(**_HOST), agent="td3")


def sac_pendulum():
  """Gymnasium Pendulum-v1, SAC, 20k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1378 at 2k, -218 at 4k, -152 at 6k, -119 at 10k, best -60 at 12k, -202 at 20k; 102 s
  whole run on 2 shared CPU cores (another run beside it)."""
  return Experiment("sac_pendulum", _host(20_000), pendulum_sac(**_HOST), agent="sac")


def td3_pendulum_fused():
  """gymnax Pendulum-v1, TD3, 20k steps; the run is one compiled program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 1k steps):
  -1615 at 1k, -1244 at 4k, -303 at 5k, -230 at 7k, then between -686 and -96 up to 12k,
  -96 at 12k, -94 at 15k, best -90 at 20k; 90 s whole run, compilation included, on 2
  shared CPU cores (the host DDPG run beside it for its first minute)."""
  return Experiment("td3_pendulum_fused", _fused(20_000), pendulum_td3(**_PER_STEP),
                    agent="td3")


def sac_pendulum_fused():
  """gymnax Pendulum-v1, SAC, 10k steps; the run is one compiled program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 1k steps):
  -1398 at 1k, -232 at 3k, -151 at 5k, best -92 at 8k, -118 at 10k; 82 s whole run,
  compilation included, on 2 shared CPU cores (another run beside it)."""
  return Experiment("sac_pendulum_fused", _fused(10_000), pendulum_sac(**_PER_STEP),
                    agent="sac")


NAMED = {
    "ddpg_pendulum": (ddpg_pendulum, "Pendulum-v1 (gymnasium), DDPG (20k steps)"),
    "td3_pendulum": (td3_pendulum, "Pendulum-v1 (gymnasium), TD3 (20k steps)"),
    "sac_pendulum": (sac_pendulum, "Pendulum-v1 (gymnasium), SAC (20k steps)"),
    "td3_pendulum_fused": (td3_pendulum_fused, "Pendulum-v1 in gymnax, TD3 (20k steps)"),
    "sac_pendulum_fused": (sac_pendulum_fused, "Pendulum-v1 in gymnax, SAC (10k steps)"),
}
