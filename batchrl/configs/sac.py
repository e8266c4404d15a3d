"""SAC's named configs (``batchrl train``): its config class is ``batchrl.agents.sac.SACConfig``,
its recipes ``batchrl.agents.sac.recipes``. The runs it shares with the other actor-critic
agents and the table of their named configs are in ``batchrl.configs.actor_critic``; the
measured figures are in each factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.sac.recipes import (
  cartpole_sac,
  mujoco_droq,
  mujoco_sac,
  mujoco_sac_simba,
  pendulum_droq,
  pendulum_sac,
  pendulum_sac_simba,
)
from batchrl.configs.actor_critic import (
  NARROW,
  PER_STEP,
  mujoco_run,
  pendulum_fused_run,
  pendulum_run,
)
from batchrl.configs.run import Experiment, RunConfig


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
  return Experiment("sac_pendulum", pendulum_run(20_000), pendulum_sac(**PER_STEP, **NARROW),
                    agent="sac")


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
  return Experiment("sac_pendulum_fused", pendulum_fused_run(10_000),
                    pendulum_sac(**PER_STEP, **NARROW, batch_size=128), agent="sac")


def sac_cartpole():
  """Gymnasium CartPole-v1, discrete SAC (``batchrl.agents.sac.recipes.cartpole_sac``),
  50k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2.5k steps):
  220 at 2.5k, 187-305 up to 25k, 417 at 30k, 500 at every evaluation from 32.5k to 50k
  (the target, >= 475 within 50k, met at 32.5k); alpha settles near 1.0-1.4 at an entropy
  of 0.47-0.49 nats (the target 0.7 log 2 = 0.485); 162 s whole run on 2 shared CPU cores
  (load about 10: other runs beside it)."""
  run = RunConfig(env="CartPole-v1", backend="gymnasium", num_envs=4, num_workers=0,
                  max_length=500, normalize_ranges=False, steps=50_000, report_every=2_500,
                  eval_every=2_500, eval_steps=500, checkpoint_every=25_000)
  return Experiment("sac_cartpole", run, cartpole_sac(**PER_STEP), agent="sac")


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
  return Experiment("sac_cartpole_fused", run, cartpole_sac(**PER_STEP), agent="sac")


def sac_continuous() -> Experiment:
  """SAC for any continuous-action task (``--set env=LunarLanderContinuous-v3``, or your
  own ``--set env=my_pkg.envs:Reach-v0``): the published values of ``sac_mujoco``
  (``batchrl.agents.sac.recipes.mujoco_sac``: 2x256 MLPs, Adam 3e-4, batch 256) on 4 envs
  stepped in this process, one gradient step per environment step from step 5000 on;
  300k steps.

  Nothing in it is tied to an env: the episode limit is the env's own (``max_length``
  None: its TimeLimit, ``spec.max_episode_steps``), an evaluation lasts that long
  (``eval_steps`` None), and bounded observations and actions are mapped to [-1, 1]."""
  run = RunConfig(env="Pendulum-v1", backend="gymnasium", num_envs=4, num_workers=0,
                  steps=300_000, report_every=5_000, eval_every=25_000,
                  checkpoint_every=100_000)
  return Experiment("sac_continuous", run, mujoco_sac(**PER_STEP), agent="sac")


def sac_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """SAC on a MuJoCo task (HalfCheetah-v5; any other with ``--set env=Hopper-v5``) with the
  values the published SAC implementations share (``batchrl.agents.sac.recipes.mujoco_sac``),
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
  return Experiment("sac_mujoco", mujoco_run(env, steps), mujoco_sac(), agent="sac")


def sac_simba_pendulum():
  """Gymnasium Pendulum-v1, SAC with SimBa networks (``pendulum_sac_simba``: an actor of one
  residual block of width 32, critics of two, AdamW with decay 1e-4, running observation
  normalization), 10k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps):
  -1279 at 2k, -567 at 4k, -152 at 6k, -205 at 8k, best -119 at 10k (``sac_pendulum``:
  -1466, -388, -151 at 6k, -120 at 10k); 94 s whole run (54 s of CPU) on 2 CPU cores
  shared with another run (load 6)."""
  return Experiment("sac_simba_pendulum", pendulum_run(10_000), pendulum_sac_simba(**PER_STEP),
                    agent="sac")


def sac_simba_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """SAC with SimBa networks (Lee et al., ICLR 2025) on a MuJoCo task (HalfCheetah-v5; any
  other with ``--set env=Hopper-v5``), sbx's SimBa recipe (its README's "Note about SimBa",
  sbx 0.28; ``batchrl.agents.sac.recipes.mujoco_sac_simba``): an actor of one residual block
  of width 128, 2 critics of two blocks of width 256, AdamW 3e-4 with weight decay 1e-4,
  running observation normalization, uniform actions for the first 10k steps and one
  gradient step per environment step from then on; 1M steps of 1 env, a greedy evaluation
  episode every 50k steps (``sac_mujoco``'s run).

  Not yet run here at that budget."""
  return Experiment("sac_simba_mujoco", mujoco_run(env, steps), mujoco_sac_simba(), agent="sac")


def droq_pendulum():
  """Gymnasium Pendulum-v1, DroQ (``pendulum_droq``: SAC with 2x64 MLPs, dropout 0.01 and
  LayerNorm in the critics, the actor on every 5th gradient step) with 5 gradient steps per
  environment step (20 per store of 4 envs), 10k steps.

  Measured (seed 0, ``batchrl train``, greedy evaluation of 4 episodes every 2k steps): -122
  at 2k (``sac_pendulum``: -1466), -205 at 4k, -150 at 6k, -204 at 8k, -120 at 10k; 336 s
  whole run (209 s of CPU) on 2 CPU cores at load 6: five times ``sac_pendulum``'s gradient
  steps, each with LayerNorm and three dropout draws."""
  return Experiment("droq_pendulum", pendulum_run(10_000),
                    pendulum_droq(update_frequency=1, repeat_update=20), agent="sac")


def droq_mujoco(env: str = "HalfCheetah-v5", steps: int = 1_000_000) -> Experiment:
  """DroQ (Hiraoka et al., ICLR 2022) on a MuJoCo task (HalfCheetah-v5; any other with
  ``--set env=Hopper-v5``): SAC with the values of sbx's README ("Note about DroQ", the
  paper's; ``batchrl.agents.sac.recipes.mujoco_droq``): 2x256 MLPs, dropout 0.01 and
  LayerNorm in the critics, 20 gradient steps per environment step with the actor and
  temperature stepped on every 20th, uniform actions for the first 10k steps; 1M steps of 1
  env, a greedy evaluation episode every 50k steps (``sac_mujoco``'s run). Twenty gradient
  steps per environment step cost twenty times ``sac_mujoco``'s updates: DroQ buys sample
  efficiency with compute (``--set sac.repeat_update=5 --set sac.policy_delay=5`` is a
  cheaper ratio). Not yet run here at that budget."""
  return Experiment("droq_mujoco", mujoco_run(env, steps), mujoco_droq(), agent="sac")


NAMED = {
    "sac_pendulum": (sac_pendulum, "Pendulum-v1 (gymnasium), SAC (20k steps)"),
    "sac_pendulum_fused": (sac_pendulum_fused, "Pendulum-v1 in gymnax, SAC (10k steps)"),
    "sac_cartpole": (sac_cartpole, "CartPole-v1 (gymnasium), discrete SAC (50k steps)"),
    "sac_cartpole_fused": (sac_cartpole_fused, "CartPole-v1 in gymnax, discrete SAC (50k "
                           "steps)"),
    "sac_continuous": (sac_continuous, "SAC for any continuous-action task: --set env=ID "
                       "(or module:ID); episode limit and eval length from the env's "
                       "TimeLimit (300k steps)"),
    "sac_mujoco": (sac_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), SAC with the "
                   "published values (1M steps)"),
    "sac_simba_pendulum": (sac_simba_pendulum, "Pendulum-v1 (gymnasium), SAC with SimBa "
                           "networks (10k steps)"),
    "sac_simba_mujoco": (sac_simba_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), SAC with "
                         "SimBa networks, sbx's recipe (1M steps)"),
    "droq_pendulum": (droq_pendulum, "Pendulum-v1 (gymnasium), DroQ: SAC with dropout and "
                      "LayerNorm critics, 5 gradient steps per step (10k steps)"),
    "droq_mujoco": (droq_mujoco, "MuJoCo (HalfCheetah-v5; --set env=...), DroQ: SAC with "
                    "dropout and LayerNorm critics, 20 gradient steps per step (1M steps)"),
}
