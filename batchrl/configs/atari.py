"""The Atari named configs (``batchrl[atari]``): ``ppo_atari`` (``batchrl.configs.ppo``) and
``dqn_atari`` (``batchrl.configs.dqn``), with the environment side they share (``atari_run``).

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
here with jax 0.10 at 128 frames: 0.21 CPU-s top-level, 3.5 CPU-s inside a scan).
``ppo_atari`` therefore sets ``update_loop="auto"``: on the CPU, the drivers run the pure
pieces PPO's update is made of (``Model.update_pieces``: values, each minibatch step, the
final KL) as top-level compiled calls from the host, reached from the compiled program
through one ``jax.pure_callback`` (``batchrl.train.host_update``; the same steps in the same
order as the scan, the same parameters up to float rounding, tested), and run that update as
its own program between compiled rollouts (``batchrl.train.fused.make_run_chunk``); on a GPU
the update stays in the scan.

What made the update fast on the 2-core CPU (2026-11-26, one update of 1024 frames, idle
machine): 8.3 s -> 2.8 s.

* Each minibatch's gradient is taken in equal shares of at most 64 frames, spread over the
  cores, and averaged (``measured.GRADIENT_SHARE_FRAMES``): a smaller call's activations stay
  in the caches. Gradient of 256 frames ('same' padding): 350 ms in one call, 170 ms in 4 shares.
* The values before the update in calls of 256 frames over the cores: 0.50 -> 0.24 s per
  1024 frames.
* Adam per leaf above 1M parameters (``measured.FLAT_STEP_MAX_PARAMS``): 63 -> 9 ms a step.
* Convolutions on XLA's own multi-threaded kernels instead of YNNPACK (``batchrl.programs``):
  YNNPACK ran each on one core, and 'valid' ones at half speed.
* The true Nature CNN ('valid' padding, 3136 features, 1.69M parameters; before, 'same':
  7744 features, 4.05M): with the two items above, an update 4.2 -> 2.9 s. Checkpoints of
  ``ppo_atari``/``dqn_atari`` runs from before do not load; resume one with its old network,
  ``--set network='<the spec without "padding": "valid">'``.
* Nested inside the training chunk's loop the update's programs got one core (4.4 s against
  2.7 s alone); now it runs at the top level.
* Convolutions inside a loop (the rollout's acts; DQN's and PQN's updates, which stay in the
  scan) are image patches times the kernel (``batchrl.networks.conv``), PPO's top-level
  update keeps XLA's convolution (``conv.top_level_program``). Patches taken with
  ``lax.conv_general_dilated_patches`` had made ``ppo_atari`` 5x slower (2026-11-28, EnvPool
  backend, another run on one core: 20 steps/s against 107-128 before that change); as
  strided slices 92-98 under the same load (the rollout's acts cost a little more than
  with XLA's convolution), 129-160 on the quiet machine.

The rollout: ``grayscale`` as a sum of channel slices (XLA:CPU's reduction over a minor axis
of 3 took 712 ms per 1024 frames of 210x160x3, now 83; the whole preprocessing stack 800 ->
125 ms). An iteration (rollout of 128 agent steps x 8 envs, then the update) went from 5.9 to
4.3 s; the rollout is about 1.4 s of it (env 0.6 s in 2 worker processes, the CNN's act on 8
frames about 2 ms a step).

``benchmarks/atari.py`` (Breakout, whole process from start to the end of training, SB3's
PPO with the rl-zoo Atari settings run after ours in the same invocation, idle machine):

=========================  ===========  ===========  ======================
steps (8 envs)             ours         SB3 2.9.2    ours / SB3
=========================  ===========  ===========  ======================
4096, before this work     42.7 s       20.8 s       2.05 (was read as 0.8-1.2
                                                     under load 3-4)
4096                       31.6 s       16.8 s       1.88
20480 (the issue's budget) 95.7 s       65.9 s       1.45
20480, ``backend=envpool`` 88.2 s       75.1 s       1.17 (the gymnasium backend,
                                                     another run: 101.0 s against
                                                     73.4 s, 1.38)
=========================  ===========  ===========  ======================

With ``--set backend=envpool`` (``batchrl.envs.pool``) EnvPool steps the 8 games in C++
threads inside the compiled rollout, with its own C++ Atari wrappers: no env worker
processes to start, no Python per env step. Per iteration both libraries then take about
3.4 s; the rest of the gap is start-up (about 10 s against SB3's 3.7 s: imports, the first
iteration's compilation and first calls, building the pool).

The target (0.33x SB3) is out of reach on this CPU: PyTorch's oneDNN convolutions take one
Adam step of the Nature CNN on 256 frames in 119 ms (torch 2.13 in ``benchmarks/.peers-venv``,
2 threads); ours, at its best (4 shares of 64 over 2 threads, Adam per leaf), about 130 ms
(2.1 of the update's 2.8 s are its 16 steps). SB3 spends about 3.3 s per 1024 steps, update
and rollout together; 0.33x of that, 1.1 s, is less than the 16 gradient steps alone cost
either library on these 2 cores. What remains ours to cut is start-up.

So is 0.75x (issue 53), measured 2026-12-07 on the idle machine (``benchmarks/atari.py``,
gymnasium backend): 111.7 s against SB3's 77.6 s, 1.44x. The command's settings fix the
arithmetic: 20 iterations of 16 Adam steps of the Nature CNN on 256 frames, about 14 GFLOP
each (forward and backward), which both libraries run at 110-120 GFLOP/s on these 2 cores
(ours 129 ms a step, torch's 119 ms): about 40 s; and the 20480 agent steps of 4 emulator
frames each, with the CNN's act, about 1.6 s per iteration in either library: about 32 s.
Those 72 s exceed 0.75x of SB3's whole process (58 s) before start-up or the update's other
work (the rollout's values 0.35 s, preparing, batching and finishing 0.3 s per iteration).

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

from batchrl.configs.run import RunConfig

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


def atari_run(steps: int, report_every: int, **values) -> RunConfig:
  """Host Atari envs (``DEFAULT_GAME``) behind the standard wrappers and the seed's
  preprocessing, 8 envs in 2 workers, evaluations every 1M steps (module docstring)."""
  return RunConfig(
      env=DEFAULT_GAME, backend="gymnasium", atari=True,
      preprocessing=json.dumps(ATARI_PREPROCESSING), num_envs=8, num_workers=2,
      max_length=None, normalize_ranges=False, steps=steps, report_every=report_every,
      eval_every=1_000_000, eval_steps=10_000, checkpoint_every=1_000_000, **values)
