"""What the actor-critic agents' named configs share (the runs below), and a table of them.
Each family's named configs are in its own module: ``batchrl.configs.ddpg``, ``td3``,
``sac``, ``tqc``, ``crossq`` and ``simbav2``.

Named configs for ``batchrl train``:

==========================  =========  ========================================================
name                        backend    what
==========================  =========  ========================================================
``ddpg_pendulum``           gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: DDPG
``td3_pendulum``            gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: TD3
``sac_pendulum``            gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: SAC
``tqc_pendulum``            gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: TQC
``crossq_pendulum``         gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: CrossQ
``ddpg_pendulum_fused``     gymnax     Pendulum-v1, 4 envs, 20k steps, one compiled program: DDPG
``td3_pendulum_fused``      gymnax     Pendulum-v1, 4 envs, 20k steps, one compiled program: TD3
``sac_pendulum_fused``      gymnax     Pendulum-v1, 4 envs, 10k steps, one compiled program: SAC
``tqc_pendulum_fused``      gymnax     Pendulum-v1, 4 envs, 10k steps, one compiled program: TQC
``crossq_pendulum_fused``   gymnax     Pendulum-v1, 4 envs, 10k steps, one compiled program:
                                       CrossQ (batch 128)
``sac_cartpole``            gymnasium  CartPole-v1, 4 envs in this process, 50k steps: discrete
                                       SAC (2x64 MLPs, batch 128)
``sac_cartpole_fused``      gymnax     CartPole-v1, 4 envs, 50k steps, one compiled program:
                                       discrete SAC (2x64 MLPs, batch 128)
``sac_mujoco``              gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: SAC
``td3_mujoco``              gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: TD3
``tqc_mujoco``              gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: TQC
``crossq_mujoco``           gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps:
                                       CrossQ (critics 1024x1024, sbx's values)
``simbav2_pendulum``        gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: SimbaV2
                                       (blocks of 64)
``simbav2_pendulum_fused``  gymnax     Pendulum-v1, 4 envs, 10k steps, one compiled program:
                                       SimbaV2 (blocks of 64, batch 128)
``simbav2_mujoco``          gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps:
                                       SimbaV2 (the reference's values)
``sac_simba_pendulum``      gymnasium  Pendulum-v1, 4 envs in this process, 10k steps: SAC with
                                       SimBa networks (blocks of 32), observation normalization
``sac_simba_mujoco``        gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: SAC
                                       with SimBa networks (sbx's recipe)
``tqc_simba_mujoco``        gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: TQC
                                       with SimBa networks (sbx's recipe)
``droq_pendulum``           gymnasium  Pendulum-v1, 4 envs in this process, 10k steps: DroQ (SAC
                                       with dropout and LayerNorm critics), 5 gradient steps
                                       per environment step
``droq_mujoco``             gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: DroQ,
                                       20 gradient steps per environment step (sbx's values)
==========================  =========  ========================================================

The SimBa and DroQ ones are SAC (or TQC) configurations: ``architecture='simba'`` with
``normalize_observations`` and ``weight_decay``, or ``critic_dropout`` and
``critic_layer_norm`` with many gradient steps (``repeat_update``) and ``policy_delay``.

All of them take one gradient step per environment step (the Pendulum ones
``repeat_update=4`` per store of 4 envs) with batch 256 and 2x256 MLPs, except the three
with time targets (issue 17: ``sac_pendulum``, ``td3_pendulum``, ``sac_pendulum_fused``)
and the TQC and CrossQ ones beside them, which use 2x64 (rejax's SAC width; the fused ones
of SAC, TQC and CrossQ also batch 128). On a CPU those runs are bound by the gradient
step's matrix products (fused SAC, batch 256, per gradient step: 0.3 ms at 2x16, 1.1 ms at
2x64, 2.7 ms at 2x128, about 10 ms at 2x256), and 2x64 learns Pendulum as well (best
evaluations below). Measured figures are in each factory's docstring. Their actions need
no ``action_bounds``: the gymnasium stack reports its real bounds.
"""
from __future__ import annotations

from batchrl.configs.run import RunConfig

PER_STEP = dict(update_frequency=1, repeat_update=4)  # 4 envs: one gradient step per step
# the width of the runs with time targets: a quarter of 2x256's cost per gradient step or less
NARROW = dict(actor_layers=(64, 64), critic_layers=(64, 64))


def pendulum_run(steps: int) -> RunConfig:
  """Gymnasium Pendulum-v1, 4 envs stepped in this process, evaluations every 2k steps."""
  return RunConfig(env="Pendulum-v1", backend="gymnasium", num_envs=4, num_workers=0,
                   steps=steps, report_every=2_000, eval_every=2_000, eval_steps=200,
                   checkpoint_every=10_000)


def pendulum_fused_run(steps: int) -> RunConfig:
  """gymnax Pendulum-v1, 4 envs, evaluations every 1k steps: the run is one compiled program."""
  return RunConfig(env="Pendulum-v1", backend="gymnax", num_envs=4, num_workers=0,
                   steps=steps, report_every=1_000, eval_every=1_000, eval_steps=200,
                   checkpoint_every=steps)


def mujoco_run(env: str, steps: int) -> RunConfig:
  """One MuJoCo env stepped in this process, as the published runs (CleanRL, rl-zoo)."""
  return RunConfig(env=env, backend="gymnasium", num_envs=1, num_workers=0, max_length=1000,
                   steps=steps, report_every=5_000, eval_every=50_000, eval_steps=1000,
                   checkpoint_every=100_000)
