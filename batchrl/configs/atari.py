"""Atari named experiments (``batchrl[atari]``): ``ppo_atari`` and ``dqn_atari``.

Breakout by default, any ALE game with ``--set env=PongNoFrameskip-v4`` (or ``ALE/Pong-v5``:
sticky actions, the harder protocol). Both use the same environment side:

* host envs with the standard Atari wrappers (``run.atari``, ``batchrl.envs.atari``): 30
  no-op starts, frame skip 4 with max-pooling of the last two frames, episodic life and
  clipped rewards for the agent, FIRE after resets where the game needs it; the reported
  scores (``mean_score`` of training and evaluation) are the raw score of whole games;
* the seed's preprocessing inside the compiled loop (``run.preprocessing``,
  ``batchrl.envs.preprocessed``): ``grayscale``, ``image_resize`` to 84x84, ``divide`` by
  255, ``sequence`` of 4 frames -> ``[84, 84, 4]`` float observations;
* the Nature CNN (``NATURE_CNN``, the same as ``examples/configs/nature_cnn.json``).

``ppo_atari``: the rl-zoo / CleanRL values (8 envs, 128 steps, 4 epochs of 4 minibatches,
Adam 2.5e-4 annealed to 0, clip 0.1, entropy 0.01, value 0.5 with clipped values, GAE 0.95,
gradients clipped at 0.5 as one global norm over all parameters) and, as SB3's CnnPolicy
and CleanRL, one CNN torso under the policy and value heads (``share_torso``: one loss
``policy + 0.5 value - 0.01 entropy`` trains it; before, the value network was a second
copy of the CNN and an update cost twice the network compute).

``dqn_atari``: the Nature / SB3 (rl-zoo) values scaled to 8 envs: Adam 1e-4, batch 32, one
gradient step per 4 env steps (2 per store of 8), learning from 100k steps, a target sync
every 1000 steps, epsilon 1.0 -> 0.01 over the first 1M steps, Huber loss, gradients
clipped at 10. The memory holds 50k transitions (SB3: 100k) because ours keeps float32
frame stacks: 2 x 113 kB per transition, about 11 GB; set ``memory_capacity`` for the
device at hand.

CPU throughput. XLA:CPU runs convolution gradients about 10x slower inside any
``lax.scan``/``while`` body than in a top-level program (jax issue #12868, open; measured
here with jax 0.10: one Adam step of the Nature CNN on 128 frames, 0.21 CPU-s top-level,
3.5 CPU-s inside a scan; unrolling inside the training chunk's loop of iterations does not
help). Before the fix ``ppo_atari`` trained 3.4-3.7 agent steps/s on this machine against
SB3's 84. ``ppo_atari`` therefore sets ``update_loop="auto"``: on the CPU backend PPO's update
leaves the compiled chunk through one ``jax.pure_callback`` and runs prepare, each of the 16
minibatch steps and the final KL as top-level compiled calls (``batchrl.agents.ppo.model.
host_update``; the same steps in the same order, so the same parameters up to float
rounding, tested); on a GPU the update stays in the scan. Measured, same run, ``nice -n 10``
on the shared 2-core machine (``benchmarks/atari.py --steps 4096``; the two jobs ran one
after the other under different load, so compare CPU seconds, not wall time): ours 344.5
CPU-s (953 s wall at load 10-12), SB3 84.9 CPU-s (82.9 s wall at load 3): **4.1x SB3's CPU
time**, about 12 agent steps per CPU-second (before: about 3). The target (0.33x) is not
met. (That run's "about 65 CPU-s per update in the rollout" was wrong: ours ended with the
evaluation every run ends with, ``eval_steps=10_000`` steps of 8 envs, 20x the training
budget; ``benchmarks/atari.py`` now sets ``eval_steps=1``. Measured below, the rollout of an
update, env + act + everything else, is about 4 s.)

``benchmarks/atari.py --steps 4096`` on 2026-11-26 (``nice -n 10``, load 3-4, jobs one after
the other): ours with the shared torso 72.9 s whole process (71.7 CPU-s), with separate
networks (``--set share_torso=False``) 96.6 s (95.4 CPU-s); SB3 62.5 s (67.1 CPU-s) and, in
a second job, 94.1 s (95.7 CPU-s). So ours is now about 0.8-1.2x SB3's whole-process time
(separate networks: 1.0-1.5x); the target (0.33x) is still not met. With the old 10k-step
final evaluation in it: 283.6 s shared, 298.8 s separate.

Where the time goes, per env step (``benchmarks/limits.py --envs BreakoutNoFrameskip-v4
--repeats 2 --iterations 1 --no-before``, 1024-step updates, ``nice -n 10``, load 1-4; the
two runs one after the other), separate value CNN -> shared torso (``share_torso``, 2026-11-26):
training run 48 -> 73 env steps/s; update 12.9 -> 9.7 ms (62 -> 70 %); act 0.37 -> 0.52 ms
(the same policy CNN, load noise); env 0.70 -> 0.78 ms; everything else 6.9 -> 2.8 ms (a
residual: the update inside the run costs more than alone under load). The update alone, A/B
in one process (alternating, min of 3): 12.4 s wall / 17.6 CPU-s -> 8.2 s / 10.5 CPU-s per
update. Of the shared update, the 16 minibatch steps (256 frames forward and backward, about
0.46 s each) are about 80 %, ``prepare`` (the value of 2 x 1024 frames, obs and next_obs)
about 1.2 s, the final KL about 0.6 s. act + store of one agent step (8 envs) in a compiled
scan: 2.8 ms (the store into the rollout buffer is in place, no measurable cost). 'valid'
padding (Nature's exact 3136-wide flatten, 2.4x fewer parameters) was not faster on XLA:CPU
(a minibatch step 0.50 s against 0.46 s, prepare 1.7 s against 1.2 s), so the spec keeps
'same'. Next: V(next_obs) only where an episode was cut (it equals V(obs[t+1]) elsewhere;
-1024 frames per update), the first conv as space-to-depth + a 2x2 conv (XLA:CPU's strided
conv gradients are slow), the act/preprocess path out of the loop on the CPU (or
EnvPool/``AtariVectorEnv`` with preprocessing in C++), uint8 frames in the rollout buffer.

The 10M-step plan (GPU; CleanRL at 10M agent steps = 40M frames: Breakout 415 +- 28,
Pong 20.4 +- 0.2)::

    batchrl train --config ppo_atari --set num_workers=8 --logdir runs
    batchrl train --config ppo_atari --set env=PongNoFrameskip-v4 --set num_workers=8 --logdir runs

on one GPU (``jax[cuda]``) with at least 8 cores: the 8 envs step in 8 worker processes (0.5
ms CPU per agent step each, so the envs alone allow about 10k agent steps/s), the CNNs run
on the GPU (an update is 4 epochs x 4 minibatches of 256 observations, one CNN). Expect
2-4k steps/s, 10M steps in 1-1.5 h per game; check the first report's ``steps_per_second``
before committing the budget. Evaluations (deterministic, the first whole game of each of
8 envs, at most 10k agent steps) every 1M steps. Targets: best evaluation and the training
``mean_score`` of the last 1M steps, Breakout >= 400, Pong >= 20; not yet run.
"""
from __future__ import annotations

import json

from batchrl.agents.dqn.config import DQNConfig
from batchrl.agents.ppo import PPOConfig
from batchrl.configs.run import Experiment, RunConfig

# conv 32x8x8/4, conv 64x4x4/2, conv 64x3x3/1, dense 512, 'valid' padding: 84x84 -> 20x20
# -> 9x9 -> 7x7x64 = 3136 features (Mnih et al. 2015; SB3's and CleanRL's NatureCNN)
NATURE_CNN = [
    {"type": "conv2d", "size": 32, "window": 8, "stride": 4, "padding": "valid",
     "activation": "relu"},
    {"type": "conv2d", "size": 64, "window": 4, "stride": 2, "padding": "valid",
     "activation": "relu"},
    {"type": "conv2d", "size": 64, "window": 3, "stride": 1, "padding": "valid",
     "activation": "relu"},
    {"type": "flatten"},
    {"type": "dense", "size": 512, "activation": "relu"},
]

# The seed's preprocessors: 210x160 RGB -> 84x84 gray in [0, 1], the last 4 frames.
ATARI_PREPROCESSING = [
    {"type": "grayscale"},
    {"type": "image_resize", "width": 84, "height": 84},
    {"type": "divide", "scale": 255.0},
    {"type": "sequence", "length": 4},
]

DEFAULT_GAME = "BreakoutNoFrameskip-v4"
PPO_ROLLOUT, PPO_ENVS, PPO_STEPS = 128, 8, 10_000_000


def _run(steps: int, report_every: int, **values) -> RunConfig:
  return RunConfig(
      env=DEFAULT_GAME, backend="gymnasium", atari=True,
      preprocessing=json.dumps(ATARI_PREPROCESSING), num_envs=8, num_workers=2,
      max_length=None, normalize_ranges=False, steps=steps, report_every=report_every,
      eval_every=1_000_000, eval_steps=10_000, checkpoint_every=1_000_000, **values)


def ppo_atari() -> Experiment:
  """PPO on Breakout with the rl-zoo / CleanRL Atari values (module docstring)."""
  per_update = PPO_ROLLOUT * PPO_ENVS
  return Experiment("ppo_atari", _run(PPO_STEPS, 100 * per_update), PPOConfig(
      network=json.dumps(NATURE_CNN), share_torso=True, rollout_length=PPO_ROLLOUT,
      update_epochs=4,
      batch_size=per_update // 4, learning_rate=2.5e-4, adam_epsilon=1e-5, max_grad_norm=0.5,
      total_updates=-(-PPO_STEPS // per_update), value_coef=0.5, entropy_coef=0.01,
      discount=0.99, gae_lambda=0.95, value_target="lambda_return", policy_objective="clip",
      clip_range=0.1, clip_value=True, normalize_advantages=True, init_output_factor=0.01,
      normalize_observations=False, normalize_rewards=False, update_loop="auto"))


def dqn_atari() -> Experiment:
  """DQN on Breakout with the Nature / SB3 values scaled to 8 envs (module docstring)."""
  return Experiment("dqn_atari", _run(10_000_000, 100_000), DQNConfig(
      network=json.dumps(NATURE_CNN), memory_capacity=50_000, batch_size=32,
      first_update=100_000, update_frequency=1, repeat_update=2, target_update_frequency=1_000,
      learning_rate=1e-4, clip_loss=1.0, max_grad_norm=10.0, discount=0.99,
      exploration=json.dumps({"type": "epsilon_anneal", "initial_epsilon": 1.0,
                              "final_epsilon": 0.01, "timesteps": 1_000_000})), agent="dqn")


NAMED = {
    "ppo_atari": (ppo_atari, "Atari (Breakout; --set env=PongNoFrameskip-v4), PPO with the "
                  "rl-zoo/CleanRL values and the Nature CNN (10M steps; batchrl[atari])"),
    "dqn_atari": (dqn_atari, "Atari (Breakout; --set env=...), DQN with the Nature/SB3 values "
                  "scaled to 8 envs (10M steps; batchrl[atari])"),
}
