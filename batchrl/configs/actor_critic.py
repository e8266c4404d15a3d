"""DDPG, TD3, SAC and TQC named experiments (``batchrl train``); their config classes are in
``batchrl.agents.ddpg``, ``batchrl.agents.td3``, ``batchrl.agents.sac`` and
``batchrl.agents.tqc``.

Named configs for ``batchrl train``:

=======================  =========  ========================================================
name                     backend    what
=======================  =========  ========================================================
``ddpg_pendulum``        gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: DDPG
``td3_pendulum``         gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: TD3
``sac_pendulum``         gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: SAC
``tqc_pendulum``         gymnasium  Pendulum-v1, 4 envs in this process, 20k steps: TQC
``ddpg_pendulum_fused``  gymnax     Pendulum-v1, 4 envs, 20k steps, one compiled program: DDPG
``td3_pendulum_fused``   gymnax     Pendulum-v1, 4 envs, 20k steps, one compiled program: TD3
``sac_pendulum_fused``   gymnax     Pendulum-v1, 4 envs, 10k steps, one compiled program: SAC
``tqc_pendulum_fused``   gymnax     Pendulum-v1, 4 envs, 10k steps, one compiled program: TQC
``sac_cartpole``         gymnasium  CartPole-v1, 4 envs in this process, 50k steps: discrete
                                    SAC (2x64 MLPs, batch 128)
``sac_cartpole_fused``   gymnax     CartPole-v1, 4 envs, 50k steps, one compiled program:
                                    discrete SAC (2x64 MLPs, batch 128)
``sac_mujoco``           gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: SAC
``td3_mujoco``           gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: TD3
``tqc_mujoco``           gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: TQC
``sac_simba_pendulum``   gymnasium  Pendulum-v1, 4 envs in this process, 10k steps: SAC with
                                    SimBa networks (blocks of 32), observation normalization
``sac_simba_mujoco``     gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: SAC
                                    with SimBa networks (sbx's recipe)
``tqc_simba_mujoco``     gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: TQC
                                    with SimBa networks (sbx's recipe)
``droq_pendulum``        gymnasium  Pendulum-v1, 4 envs in this process, 10k steps: DroQ (SAC
                                    with dropout and LayerNorm critics), 5 gradient steps
                                    per environment step
``droq_mujoco``          gymnasium  HalfCheetah-v5 (``--set env=...``), 1 env, 1M steps: DroQ,
                                    20 gradient steps per environment step (sbx's values)
=======================  =========  ========================================================

The SimBa and DroQ ones are SAC (or TQC) configurations: ``architecture='simba'`` with
``normalize_observations`` and ``weight_decay``, or ``critic_dropout`` and
``critic_layer_norm`` with many gradient steps (``repeat_update``) and ``policy_delay``.

All of them take one gradient step per environment step (the Pendulum ones
``repeat_update=4`` per store of 4 envs) with batch 256 and 2x256 MLPs, except the three
with time targets (issue 17: ``sac_pendulum``, ``td3_pendulum``, ``sac_pendulum_fused``)
and the TQC ones beside them, which use 2x64 (rejax's SAC width; ``sac_pendulum_fused`` and
``tqc_pendulum_fused`` also batch 128). On a CPU those
runs are bound by the gradient step's matrix products (fused SAC, batch 256, per gradient
step: 0.3 ms at 2x16, 1.1 ms at 2x64, 2.7 ms at 2x128, about 10 ms at 2x256), and 2x64
learns Pendulum as well (best evaluations below). Measured figures
are in each factory's docstring. Their actions need no ``action_bounds``: the gymnasium stack
reports its real bounds.
"""
from __future__ import annotations

from batchrl.agents.crossq.presets import mujoco_crossq, pendulum_crossq
from batchrl.agents.ddpg.presets import pendulum_ddpg
from batchrl.agents.sac.presets import (
  cartpole_sac,
  mujoco_droq,
  mujoco_sac,
  mujoco_sac_simba,
  pendulum_droq,
  pendulum_sac,
  pendulum_sac_simba,
)
from batchrl.agents.td3.presets import mujoco_td3, pendulum_td3
from batchrl.agents.tqc.presets import mujoco_tqc, mujoco_tqc_simba, pendulum_tqc
from batchrl.configs.run import Experiment, RunConfig

_PER_STEP = dict(update_frequency=1, repeat_update=4)  # 4 envs: one gradient step per step
# the width of the runs with time targets: a quarter of 2x256's cost per gradient step or less
_NARROW = dict(actor_layers=(64, 64), critic_layers=(64, 64))


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
  return Experiment("ddpg_pendulum", _host(20_000), pendulum_ddpg(**_PER_STEP), agent="ddpg")


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
  return Experiment("td3_pendulum", _host(20_000), pendulum_td3(**_PER_STEP, **_NARROW),
                    agent="td3")


def sac_pendulum():
  """Gymnasium Pendulum-v1, SAC with 2x64 MLPs, 20k steps.

  Measured with 2x64 (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k
  steps): -1466 at 2k, -388 at 4k, -151 at 6k, -120 at 10k, best -61 at 12k, -206 at 20k; 84
  s whole run (28.5 s of CPU) on 2 CPU cores at load 9-10. ``benchmarks/actor_critic.py``
  (load 10-13): 75.9 s whole process, best -61, >= -200 from 6k on, against SB3's SAC
  (rl-zoo, 2x256) 1299.5 s in the same run: 0.06x (target 0.2x). With 2x256 (below) the
  gradient steps took 192 of 219 s: 0.55x SB3 at low load.

  Before, with 2x256 MLPs:
  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1378 at 2k, -218 at 4k, -152 at 6k, -119 at 10k, best -60 at 12k, -202 at 20k; 102 s
  whole run on 2 shared CPU cores (another run beside it)."""
  return Experiment("sac_pendulum", _host(20_000), pendulum_sac(**_PER_STEP, **_NARROW),
                    agent="sac")


def ddpg_pendulum_fused():
  """gymnax Pendulum-v1, DDPG, 20k steps; the run is one compiled program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 1k steps):
  -1624 at 1k, -771 at 3k, -249 at 4k, -94 at 8k, then between -565 and -103 (mostly -100
  to -200) up to 19k, best -91 at 20k; 212 s whole run, compilation included, on 2 CPU
  cores shared with 5 other jobs (load average 8)."""
  return Experiment("ddpg_pendulum_fused", _fused(20_000), pendulum_ddpg(**_PER_STEP),
                    agent="ddpg")


def td3_pendulum_fused():
  """gymnax Pendulum-v1, TD3, 20k steps; the run is one compiled program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 1k steps):
  -1615 at 1k, -1244 at 4k, -303 at 5k, -230 at 7k, then between -686 and -96 up to 12k,
  -96 at 12k, -94 at 15k, best -90 at 20k; 90 s whole run, compilation included, on 2
  shared CPU cores (the host DDPG run beside it for its first minute)."""
  return Experiment("td3_pendulum_fused", _fused(20_000), pendulum_td3(**_PER_STEP),
                    agent="td3")


def sac_pendulum_fused():
  """gymnax Pendulum-v1, SAC with 2x64 MLPs (rejax's width) and batch 128, 10k steps; the
  run is one compiled program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 1k steps): best
  -92, >= -200 from 5k on, -118 at 10k. 3 seeds vmapped (``--seeds 3``): best -91, -95, -90,
  each >= -200 from 6k, 5k and 4k on (22 s). ``benchmarks/actor_critic.py`` at low load:
  12.1 s whole process (start-up 2.3 s, first 1000 steps with compilation 3.8 s, 9000 steps
  5.0 s, evaluations and the rest 1.0 s) against rejax's SAC (its published config: 2x64,
  batch 256) 23.5 s, 0.52x (target 0.6x). With batch 256: 0.66x at load 3-4 (30.8 against
  46.6 s), 0.47x at load 11; 3 seeds best -90, -95, -88. With 2x256 and batch 256: 2.9x.

  Where the time goes (CPU seconds of one run with batch 256): imports 1.0, env and model
  0.3, ``init_sim`` 1.1, tracing the training chunk 0.9, compiling it 3.3, the evaluation
  program 0.4, then 1.0-1.2 per 1000 gradient steps (9000 of them): the matrix products."""
  return Experiment("sac_pendulum_fused", _fused(10_000),
                    pendulum_sac(**_PER_STEP, **_NARROW, batch_size=128), agent="sac")


def sac_cartpole():
  """Gymnasium CartPole-v1, discrete SAC (``batchrl.agents.sac.presets.cartpole_sac``),
  50k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2.5k steps):
  220 at 2.5k, 187-305 up to 25k, 417 at 30k, 500 at every evaluation from 32.5k to 50k
  (the target, >= 475 within 50k, met at 32.5k); alpha settles near 1.0-1.4 at an entropy
  of 0.47-0.49 nats (the target 0.7 log 2 = 0.485); 162 s whole run on 2 shared CPU cores
  (load about 10: other runs beside it)."""
  run = RunConfig(env="CartPole-v1", backend="gymnasium", num_envs=4, num_workers=0,
                  max_length=500, normalize_ranges=False, steps=50_000, report_every=2_500,
                  eval_every=2_500, eval_steps=500, checkpoint_every=25_000)
  return Experiment("sac_cartpole", run, cartpole_sac(**_PER_STEP), agent="sac")


def sac_cartpole_fused():
  """gymnax CartPole-v1, discrete SAC, 50k steps; the run is one compiled program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2.5k steps):
  202 at 2.5k, 323 at 5k, 422 at 7.5k, 500 at 15k, 406 at 20k, 500 at every evaluation
  from 22.5k to 50k; 132 s whole run, compilation included, on 2 shared CPU cores (other
  runs beside it). 4 seeds vmapped (``--seeds 4``): best 500 for each seed, all four 500 at
  every evaluation from 35k to 50k (257 s)."""
  run = RunConfig(env="CartPole-v1", backend="gymnax", num_envs=4, num_workers=0,
                  steps=50_000, report_every=2_500, eval_every=2_500, eval_steps=500,
                  checkpoint_every=25_000)
  return Experiment("sac_cartpole_fused", run, cartpole_sac(**_PER_STEP), agent="sac")


def _mujoco(env: str, steps: int) -> RunConfig:
  """One MuJoCo env stepped in this process, as the published runs (CleanRL, rl-zoo)."""
  return RunConfig(env=env, backend="gymnasium", num_envs=1, num_workers=0, max_length=1000,
                   steps=steps, report_every=5_000, eval_every=50_000, eval_steps=1000,
                   checkpoint_every=100_000)


def sac_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """SAC on a MuJoCo task (HalfCheetah-v5; any other with ``--set env=Hopper-v5``) with the
  values the published SAC implementations share (``batchrl.agents.sac.presets.mujoco_sac``),
  1M steps of 1 env, one gradient step per env step from 5k steps on, a greedy evaluation
  episode every 50k steps.

  Published (CleanRL's SAC on v4 at 1M): HalfCheetah 9635, Hopper 2310, Walker2d 3591.
  Measured at 300k steps, seed 0, 2 CPU cores shared with one other run (``batchrl bench
  --suite mujoco-300k``, docs/benchmarks.md): HalfCheetah-v5 greedy 7598, training return
  6802; Hopper-v5 greedy 1765 (best 3243), training return 2497; 110-133 steps/s while
  learning, about 150 on 2 idle cores (6.8 ms per step, ``benchmarks/sac_step.py``), so 1M
  steps take about 2 h there. A checkpoint holds the 1M memory in its newest copy only
  (162 MB on HalfCheetah once full; a memory not yet full is stored up to its last entry,
  6.8 MB at 20k steps), the older ones the networks (3.4 MB). Side by side with sbx at
  100k steps (greedy best, docs/benchmarks.md), mean of seeds 0-2: HalfCheetah-v5 4363
  against 4101, Hopper-v5 1225 against 563, Walker2d-v5 945 against 661, Ant-v5 877 against
  656."""
  return Experiment("sac_mujoco", _mujoco(env, steps), mujoco_sac(), agent="sac")


def td3_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """TD3 on a MuJoCo task (HalfCheetah-v5; any other with ``--set env=Hopper-v5``) with the
  values the published TD3 implementations share (``batchrl.agents.td3.presets.mujoco_td3``),
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
  This preset keeps the paper's choices, which CleanRL and SB3 share and the published 1M
  scores come from."""
  return Experiment("td3_mujoco", _mujoco(env, steps), mujoco_td3(), agent="td3")


def tqc_pendulum():
  """Gymnasium Pendulum-v1, TQC with 2x64 MLPs (``sac_pendulum``'s values; 2 critics of 25
  quantiles, 2 dropped per critic), 20k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1457 at 2k, -220 at 4k, -150 at 6k, -119 at 10k, best -60 at 12k, -203 at 20k (as
  ``sac_pendulum``: -61 best, -206 at 20k); 165 s whole run (105 s of CPU) on 2 CPU cores
  shared with a CI run."""
  return Experiment("tqc_pendulum", _host(20_000), pendulum_tqc(**_PER_STEP, **_NARROW),
                    agent="tqc")


def tqc_pendulum_fused():
  """gymnax Pendulum-v1, TQC with 2x64 MLPs and batch 128 (``sac_pendulum_fused``'s values;
  2 critics of 25 quantiles, 2 dropped per critic), 10k steps; the run is one compiled
  program.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 1k steps):
  -1542 at 1k, -903 at 3k, -208 at 4k, -120 at 5k, best -92 at 8k, -117 at 10k (as
  ``sac_pendulum_fused``: best -92, -118 at 10k); 41 s whole run (27 s of CPU), compilation
  included, on 2 CPU cores shared with a CI run."""
  return Experiment("tqc_pendulum_fused", _fused(10_000),
                    pendulum_tqc(**_PER_STEP, **_NARROW, batch_size=128), agent="tqc")


def tqc_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """TQC on a MuJoCo task (HalfCheetah-v5; any other with ``--set env=Hopper-v5``) with
  sb3-contrib's and sbx's values (``batchrl.agents.tqc.presets.mujoco_tqc``: ``sac_mujoco``'s
  with 2 critics of 25 quantiles, the 2 largest of each dropped), 1M steps of 1 env, one
  gradient step per environment step from step 5000 on, a greedy evaluation episode every
  50k steps (``sac_mujoco``'s run).

  Published (rl-zoo's TQC on v3 at 1M): HalfCheetah 12090, against SAC's 9535. Not yet run
  to 100k here (issue 51 leaves it to ``benchmarks/parity.py`` beside sbx)."""
  return Experiment("tqc_mujoco", _mujoco(env, steps), mujoco_tqc(), agent="tqc")


def crossq_pendulum():
  """Gymnasium Pendulum-v1, CrossQ with 2x64 MLPs (``pendulum_crossq``: Adam 1e-3 with beta1
  0.5, policy delay 3, Batch Renormalization, no target networks), 20k steps.

  Measured: see ``docs/choosing-an-agent.md``."""
  return Experiment("crossq_pendulum", _host(20_000),
                    pendulum_crossq(**_PER_STEP, **_NARROW), agent="crossq")


def crossq_pendulum_fused():
  """gymnax Pendulum-v1, CrossQ with 2x64 MLPs and batch 128, 10k steps; the run is one
  compiled program.

  Measured: see ``docs/choosing-an-agent.md``."""
  return Experiment("crossq_pendulum_fused", _fused(10_000),
                    pendulum_crossq(**_PER_STEP, **_NARROW, batch_size=128), agent="crossq")


def crossq_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """CrossQ on a MuJoCo task (HalfCheetah-v5; any other with ``--set env=Hopper-v5``) with
  the paper's and sbx's values (``batchrl.agents.crossq.presets.mujoco_crossq``: a 2x256
  actor, 2 critics of 1024x1024, Batch Renormalization, no target networks, Adam 1e-3 with
  beta1 0.5, policy delay 3), 1M steps of 1 env, one gradient step per environment step from
  step 5000 on, a greedy evaluation episode every 50k steps (``sac_mujoco``'s run).

  Published (the SimbaV2 repository's baseline results, v4, 100k steps): HalfCheetah 8112,
  Hopper 2764, Walker2d 3914, Ant 2299, against SAC's 6156, 1103, 690, 747. The 1024-wide
  critics cost about 12x the products of 256-wide ones per gradient step;
  ``--set crossq.critic_layers=[256,256]`` is the cheap option (the paper reports it learns
  less per sample)."""
  return Experiment("crossq_mujoco", _mujoco(env, steps), mujoco_crossq(), agent="crossq")


def sac_simba_pendulum():
  """Gymnasium Pendulum-v1, SAC with SimBa networks (``pendulum_sac_simba``: an actor of one
  residual block of width 32, critics of two, AdamW with decay 1e-4, running observation
  normalization), 10k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1279 at 2k, -567 at 4k, -152 at 6k, -205 at 8k, best -119 at 10k (``sac_pendulum``:
  -1466, -388, -151 at 6k, -120 at 10k); 94 s whole run (54 s of CPU) on 2 CPU cores
  shared with another run (load 6)."""
  return Experiment("sac_simba_pendulum", _host(10_000), pendulum_sac_simba(**_PER_STEP),
                    agent="sac")


def sac_simba_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """SAC with SimBa networks (Lee et al., ICLR 2025) on a MuJoCo task (HalfCheetah-v5; any
  other with ``--set env=Hopper-v5``), sbx's SimBa recipe (its README's "Note about SimBa",
  sbx 0.28; ``batchrl.agents.sac.presets.mujoco_sac_simba``): an actor of one residual block
  of width 128, 2 critics of two blocks of width 256, AdamW 3e-4 with weight decay 1e-4,
  running observation normalization, uniform actions for the first 10k steps and one
  gradient step per environment step from then on; 1M steps of 1 env, a greedy evaluation
  episode every 50k steps (``sac_mujoco``'s run).

  Not yet run here at that budget."""
  return Experiment("sac_simba_mujoco", _mujoco(env, steps), mujoco_sac_simba(), agent="sac")


def tqc_simba_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """TQC with SimBa networks on a MuJoCo task (HalfCheetah-v5; any other with ``--set
  env=Hopper-v5``): sbx's SimBa recipe, whose README example trains TQC
  (``batchrl.agents.tqc.presets.mujoco_tqc_simba``: ``tqc_mujoco``'s 2 critics of 25
  quantiles, 2 dropped per critic, with ``sac_simba_mujoco``'s networks, AdamW, observation
  normalization and 10k uniform steps); 1M steps of 1 env, a greedy evaluation episode every
  50k steps. Not yet run here at that budget."""
  return Experiment("tqc_simba_mujoco", _mujoco(env, steps), mujoco_tqc_simba(), agent="tqc")


def droq_pendulum():
  """Gymnasium Pendulum-v1, DroQ (``pendulum_droq``: SAC with 2x64 MLPs, dropout 0.01 and
  LayerNorm in the critics, the actor on every 5th gradient step) with 5 gradient steps per
  environment step (20 per store of 4 envs), 10k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps): -122
  at 2k (``sac_pendulum``: -1466), -205 at 4k, -150 at 6k, -204 at 8k, -120 at 10k; 336 s
  whole run (209 s of CPU) on 2 CPU cores at load 6: five times ``sac_pendulum``'s gradient
  steps, each with LayerNorm and three dropout draws."""
  return Experiment("droq_pendulum", _host(10_000),
                    pendulum_droq(update_frequency=1, repeat_update=20), agent="sac")


def droq_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """DroQ (Hiraoka et al., ICLR 2022) on a MuJoCo task (HalfCheetah-v5; any other with
  ``--set env=Hopper-v5``): SAC with the values of sbx's README ("Note about DroQ", the
  paper's; ``batchrl.agents.sac.presets.mujoco_droq``): 2x256 MLPs, dropout 0.01 and
  LayerNorm in the critics, 20 gradient steps per environment step with the actor and
  temperature stepped on every 20th, uniform actions for the first 10k steps; 1M steps of 1
  env, a greedy evaluation episode every 50k steps (``sac_mujoco``'s run). Twenty gradient
  steps per environment step cost twenty times ``sac_mujoco``'s updates: DroQ buys sample
  efficiency with compute (``--set sac.repeat_update=5 --set sac.policy_delay=5`` is a
  cheaper ratio). Not yet run here at that budget."""
  return Experiment("droq_mujoco", _mujoco(env, steps), mujoco_droq(), agent="sac")


def sac_continuous() -> Experiment:
  """SAC for any continuous-action task (``--set env=LunarLanderContinuous-v3``, or your
  own ``--set env=my_pkg.envs:Reach-v0``): the published values of ``sac_mujoco``
  (``batchrl.agents.sac.presets.mujoco_sac``: 2x256 MLPs, Adam 3e-4, batch 256) on 4 envs
  stepped in this process, one gradient step per environment step from step 5000 on;
  300k steps.

  Nothing in it is tied to an env: the episode limit is the env's own (``max_length``
  None: its TimeLimit, ``spec.max_episode_steps``), an evaluation lasts that long
  (``eval_steps`` None), and bounded observations and actions are mapped to [-1, 1]."""
  run = RunConfig(env="Pendulum-v1", backend="gymnasium", num_envs=4, num_workers=0,
                  steps=300_000, report_every=5_000, eval_every=25_000,
                  checkpoint_every=100_000)
  return Experiment("sac_continuous", run, mujoco_sac(**_PER_STEP), agent="sac")


NAMED = {
    "ddpg_pendulum": (ddpg_pendulum, "Pendulum-v1 (gymnasium), DDPG (20k steps)"),
    "td3_pendulum": (td3_pendulum, "Pendulum-v1 (gymnasium), TD3 (20k steps)"),
    "sac_pendulum": (sac_pendulum, "Pendulum-v1 (gymnasium), SAC (20k steps)"),
    "ddpg_pendulum_fused": (ddpg_pendulum_fused, "Pendulum-v1 in gymnax, DDPG (20k steps)"),
    "td3_pendulum_fused": (td3_pendulum_fused, "Pendulum-v1 in gymnax, TD3 (20k steps)"),
    "sac_pendulum_fused": (sac_pendulum_fused, "Pendulum-v1 in gymnax, SAC (10k steps)"),
    "sac_cartpole": (sac_cartpole, "CartPole-v1 (gymnasium), discrete SAC (50k steps)"),
    "sac_cartpole_fused": (sac_cartpole_fused, "CartPole-v1 in gymnax, discrete SAC (50k "
                           "steps)"),
    "sac_continuous": (sac_continuous, "SAC for any continuous-action task: --set env=ID "
                       "(or module:ID); episode limit and eval length from the env's "
                       "TimeLimit (300k steps)"),
    "sac_mujoco": (sac_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), SAC with the "
                   "published values (1M steps)"),
    "td3_mujoco": (td3_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), TD3 with the "
                   "published values (1M steps)"),
    "tqc_pendulum": (tqc_pendulum, "Pendulum-v1 (gymnasium), TQC (20k steps)"),
    "tqc_pendulum_fused": (tqc_pendulum_fused, "Pendulum-v1 in gymnax, TQC (10k steps)"),
    "tqc_mujoco": (tqc_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), TQC with "
                   "sb3-contrib's and sbx's values (1M steps)"),
    "crossq_pendulum": (crossq_pendulum, "Pendulum-v1 (gymnasium), CrossQ (20k steps)"),
    "crossq_pendulum_fused": (crossq_pendulum_fused, "Pendulum-v1 in gymnax, CrossQ (10k "
                              "steps)"),
    "crossq_mujoco": (crossq_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), CrossQ with "
                      "the paper's and sbx's values (1M steps)"),
    "sac_simba_pendulum": (sac_simba_pendulum, "Pendulum-v1 (gymnasium), SAC with SimBa "
                           "networks (10k steps)"),
    "sac_simba_mujoco": (sac_simba_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), SAC with "
                         "SimBa networks, sbx's recipe (1M steps)"),
    "tqc_simba_mujoco": (tqc_simba_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), TQC with "
                         "SimBa networks, sbx's recipe (1M steps)"),
    "droq_pendulum": (droq_pendulum, "Pendulum-v1 (gymnasium), DroQ: SAC with dropout and "
                      "LayerNorm critics, 5 gradient steps per step (10k steps)"),
    "droq_mujoco": (droq_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), DroQ: SAC with "
                    "dropout and LayerNorm critics, 20 gradient steps per step (1M steps)"),
}
