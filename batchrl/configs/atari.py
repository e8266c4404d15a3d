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
gradients clipped at 0.5). One difference: the value network is its own copy of the CNN
(PPO's JSON networks do not share a torso), about twice CleanRL's network compute.

``dqn_atari``: the Nature / SB3 (rl-zoo) values scaled to 8 envs: Adam 1e-4, batch 32, one
gradient step per 4 env steps (2 per store of 8), learning from 100k steps, a target sync
every 1000 steps, epsilon 1.0 -> 0.01 over the first 1M steps, Huber loss, gradients
clipped at 10. The memory holds 50k transitions (SB3: 100k) because ours keeps float32
frame stacks: 2 x 113 kB per transition, about 11 GB; set ``memory_capacity`` for the
device at hand.

CPU throughput, measured on the shared 2-core machine (``nice -n 10``, load 2-5 from other
jobs; ``ppo_atari`` on Breakout, 8 envs in 2 workers, one ``Trainer.train_phase(1)`` per
1024-step update): the first update (compile included) took 302 s wall and 376 CPU-s, the
second 280 s and 336 CPU-s: **3.4-3.7 agent steps/s**, against SB3's 84 steps/s with the
same settings on this machine (``reference/peers.md``; the issue's target, 0.33x SB3's time,
is far from met on the CPU). The env is not the cost: the wrapped ALE steps at about 2000 agent
steps per CPU-second (0.5 ms per 4-frame step), grayscale/resize/stack of 8 frames costs
about 8 ms CPU and the policy's act 5 ms. The cost is XLA:CPU's convolution gradients
inside a loop: one Nature-CNN gradient of 32 samples takes 0.05 CPU-s in a plain jitted
function but about 10x that inside any ``lax.scan``/``while`` body (jax issue #12868, open;
measured here: 16 such gradients 0.85 CPU-s unrolled and alone, 9.3 CPU-s in a scan, and
unrolling does not help once an outer loop holds them, as the fused training chunk does).
The PPO update (4 epochs x 4 minibatches, two CNNs) therefore dominates on the CPU. Fixes
left for later: run the update of conv networks as its own jitted call outside the chunk's
loop on the CPU backend, and share the torso of the policy and value networks (CleanRL does;
half the compute). On a GPU the convolutions are cuDNN calls, loop or not.

The 10M-step plan (GPU; CleanRL at 10M agent steps = 40M frames: Breakout 415 +- 28,
Pong 20.4 +- 0.2)::

    batchrl train --config ppo_atari --set num_workers=8 --logdir runs
    batchrl train --config ppo_atari --set env=PongNoFrameskip-v4 --set num_workers=8 --logdir runs

on one GPU (``jax[cuda]``) with at least 8 cores: the 8 envs step in 8 worker processes (0.5
ms CPU per agent step each, so the envs alone allow about 10k agent steps/s), the CNNs run
on the GPU (an update is 4 epochs x 4 minibatches of 256 observations, two CNNs). Expect
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

# conv 32x8x8/4, conv 64x4x4/2, conv 64x3x3/1, dense 512 (Mnih et al. 2015)
NATURE_CNN = [
    {"type": "conv2d", "size": 32, "window": 8, "stride": 4, "activation": "relu"},
    {"type": "conv2d", "size": 64, "window": 4, "stride": 2, "activation": "relu"},
    {"type": "conv2d", "size": 64, "window": 3, "stride": 1, "activation": "relu"},
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
      network=json.dumps(NATURE_CNN), rollout_length=PPO_ROLLOUT, update_epochs=4,
      batch_size=per_update // 4, learning_rate=2.5e-4, adam_epsilon=1e-5, max_grad_norm=0.5,
      total_updates=-(-PPO_STEPS // per_update), value_coef=0.5, entropy_coef=0.01,
      discount=0.99, gae_lambda=0.95, value_target="lambda_return", policy_objective="clip",
      clip_range=0.1, clip_value=True, normalize_advantages=True, init_output_factor=0.01,
      normalize_observations=False, normalize_rewards=False))


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
