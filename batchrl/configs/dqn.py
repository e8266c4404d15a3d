"""The DQN family's named experiments (``batchrl train``); the config class and its units
are in ``batchrl.agents.replay.q_config`` and ``batchrl.agents.replay.config``. ``dqn_atari``'s
values and figures are in ``batchrl.configs.atari``.

Named configs for ``batchrl train``:

========================  =========  =======================================================
name                      backend    what
========================  =========  =======================================================
``dqn_cartpole``          gymnasium  CartPole-v1, 8 host envs, 49k steps: the rl-zoo DQN
                                     settings (lr 2.3e-3, batch 64, 128 gradient steps
                                     every 256 env steps, epsilon to 0.04 over 8k steps,
                                     Huber loss) with double-Q targets and a 128x128
                                     network (rl-zoo: 256x256, 3x the compute)
``dqn_cartpole_fused``    gymnax     ``dqn_cartpole``'s settings with a 64x64 network on
                                     CartPole-v1 in the graph, 8 envs, 98k steps; the
                                     whole run is one program
``ddqn_cartpole``         gymnax     the rl-zoo settings (256x256) with double-Q targets
                                     in the graph, 100k steps
``dqn_minatar_breakout``  gymnax     MinAtar Breakout (``Breakout-MinAtar``, 10x10x4
                                     observations), 8 envs, 100k steps: Double DQN on a
                                     small conv network written as JSON
                                     (``MINATAR_NETWORK``, the same as
                                     ``examples/configs/minatar_conv_network.json``)
========================  =========  =======================================================

Measured on the shared 2-core CPU; evaluation is deterministic, the mean over the first
episode of each of 8 envs; tuning seeds are ``jax.random.split`` of keys 0 and 1 (fused
runs, the same dynamics as the host env):

* rl-zoo settings, plain DQN targets: best >= 475 within 49k steps on 4 of 7 seeds.
* with double-Q targets (``ddqn_cartpole``): evaluating every 4k steps, 4 of 4 seeds
  within 45k (first at 29-45k); evaluating every 10k, 2 of 3 other seeds within 100k.
* the same with a 128x128 network (``dqn_cartpole``): evaluating every 4k steps, 7 of 8
  seeds within 49k (first at 33-49k; the eighth peaked at 459), for a third of the
  256x256 network's time (0.33 against 0.85 ms per gradient step). ``batchrl train
  --config dqn_cartpole`` (host envs, seed 0): 500 at 41k steps, 29 s in-process
  (compiling included, load average 4); with 256x256 it reached 500 at 45k in 48 s.
* the same with 128x128, evaluating every 4k steps: 8 of 8 seeds within 100k (first at
  25-53k); with 64x64 (``dqn_cartpole_fused``): 8 of 8 within 100k (first at 20-53k, 7
  within 49k) in half the time again (0.17 ms per gradient step). ``batchrl train
  --config dqn_cartpole_fused`` (seed 0): 500 at 66k steps, 19 s for the whole process;
  with 128x128 500 at 74k in 27 s (load average 3). The host config keeps 128x128: on
  host seed 0, 64x64 peaked at 334 within 49k. Both evaluate every 4k steps: DQN on
  CartPole swings between 500 and 100 from one evaluation to the next (every 10k, the
  128x128 fused seed 0 never showed more than 378). Half the gradient steps (64 per 256
  env steps, as ``dqfd_cartpole``), 128x128: 4 of 4 seeds within 100k, but late
  (33-94k); plain DQN targets with those: 6 of 7, first at 44-78k.

DQN on CartPole oscillates after it first reaches 500, so the configs evaluate often and the
figures are the best evaluation.

* ``dqn_minatar_breakout`` (``batchrl train``, seed 0, greedy evaluation = mean of the
  first episode of 8 envs; a random policy scores about 0.5-1): 2.25 at 20k steps, 5.6 at
  40k, 7.75 at 60k, 8.6 at 80k, 7.5 at 100k; 2 min 9 s for the whole run on the shared
  2-core CPU (load average 3). Before XLA's CPU options changed (other float rounding):
  2.75, 6.5, 8.4, 9.0, 9.0. Published MinAtar DQN runs reach 15-20 after millions of
  steps.
"""
from __future__ import annotations

import json

from batchrl.agents.dqn.recipes import cartpole, minatar
from batchrl.agents.replay.q_config import DQNConfig
from batchrl.configs.atari import NATURE_CNN, atari_run
from batchrl.configs.run import Experiment, RunConfig


def _run(**values):
  return RunConfig(**values)


def _experiment(name: str, run, config):
  return Experiment(name, run, config, agent="dqn")


def dqn_cartpole():
  """Host CartPole-v1 (gymnasium, stepped in the main process) with the rl-zoo DQN values
  but a 128x128 network: as reliable within 50k steps (module docstring), a third of the
  compute, which is most of this run's time."""
  return _experiment("dqn_cartpole", _run(
      env="CartPole-v1", backend="gymnasium", num_envs=8, num_workers=0, max_length=500,
      normalize_ranges=False, steps=49_152, report_every=4_096, eval_every=4_096,
      checkpoint_every=24_576),  # whole updates: 8 envs x 32
      cartpole(double_dqn=True, hidden_layers=(128, 128)))


def dqn_cartpole_fused():
  """``dqn_cartpole``'s settings (rl-zoo's, double-Q targets) with a 64x64 network on
  gymnax CartPole-v1: the training run is one compiled program."""
  return _experiment("dqn_cartpole_fused", _run(
      env="CartPole-v1", backend="gymnax", num_envs=8, num_workers=0, steps=98_304,
      report_every=4_096, eval_every=4_096, checkpoint_every=49_152),
      cartpole(double_dqn=True, hidden_layers=(64, 64)))  # whole updates: 8 envs x 32


def ddqn_cartpole():
  """The rl-zoo settings (256x256) with Double DQN targets on gymnax CartPole-v1."""
  return _experiment("ddqn_cartpole", _run(
      env="CartPole-v1", backend="gymnax", num_envs=8, num_workers=0, steps=99_840,
      report_every=9_984, eval_every=9_984, checkpoint_every=49_920),
      cartpole(double_dqn=True))


def dqn_minatar_breakout():
  """gymnax MinAtar Breakout: Double DQN on a small conv network, 100k steps, one compiled
  program (see the module docstring for the figures)."""
  return _experiment("dqn_minatar_breakout", _run(
      env="Breakout-MinAtar", backend="gymnax", num_envs=8, num_workers=0, steps=100_000,
      report_every=10_000, eval_every=20_000, checkpoint_every=50_000), minatar())


def dqn_atari() -> Experiment:
  """DQN on Breakout with the Nature / SB3 values scaled to 8 envs (``batchrl.configs.atari``)."""
  return Experiment("dqn_atari", atari_run(10_000_000, 100_000), DQNConfig(
      network=json.dumps(NATURE_CNN), memory_capacity=50_000, batch_size=32,
      first_update=100_000, update_frequency=1, repeat_update=2, target_update_frequency=1_000,
      learning_rate=1e-4, clip_loss=1.0, max_grad_norm=10.0, discount=0.99,
      exploration=json.dumps({"type": "epsilon_anneal", "initial_epsilon": 1.0,
                              "final_epsilon": 0.01, "timesteps": 1_000_000})), agent="dqn")


_DESCRIPTIONS = {
    "dqn_cartpole": "CartPole-v1, host envs, Double DQN with the rl-zoo settings and a "
                    "128x128 network (50k steps)",
    "dqn_cartpole_fused": "CartPole-v1 in gymnax, Double DQN (64x64) as one compiled "
                          "program (98k steps)",
    "ddqn_cartpole": "CartPole-v1 in gymnax, Double DQN with the rl-zoo settings (100k steps)",
    "dqn_minatar_breakout": "MinAtar Breakout in gymnax, Double DQN on a small conv network "
                            "from JSON (100k steps)",
    "dqn_atari": "Atari (Breakout; --set env=...), DQN with the Nature/SB3 values "
                 "scaled to 8 envs (10M steps; batchrl[atari])",
}

NAMED = {name: (factory, _DESCRIPTIONS[name]) for name, factory in (
    ("dqn_cartpole", dqn_cartpole), ("dqn_cartpole_fused", dqn_cartpole_fused),
    ("ddqn_cartpole", ddqn_cartpole), ("dqn_minatar_breakout", dqn_minatar_breakout),
    ("dqn_atari", dqn_atari))}
