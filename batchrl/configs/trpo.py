"""TRPO named configs (``batchrl train``): its config class is ``batchrl.agents.trpo.TRPOConfig``,
its recipes ``batchrl.agents.trpo.recipes``.

Measured on a 2-core CPU with the fused driver (gymnax), deterministic evaluation:
see each factory's docstring.
"""
from __future__ import annotations

import dataclasses

from batchrl.agents.trpo import TRPOConfig
from batchrl.agents.trpo.recipes import cartpole_fused, pendulum_fused
from batchrl.configs.run import Experiment, periodic_run


def _experiment(name: str, run, config) -> Experiment:
  return Experiment(name, run, config, agent="trpo")


def trpo_cartpole():
  """TRPO on CartPole-v1, host envs stepped in this process (CartPole steps in microseconds:
  worker processes would cost more than they save; 9.5k steps/s here against 3.6k with 2
  workers, measured in one session under load).

  Measured (2-core CPU, seed 0): deterministic evaluation 337 at 10k steps, 500 from 20k on.
  """
  return _experiment("trpo_cartpole", periodic_run(
      "CartPole-v1", "gymnasium", 8, 100_000, max_length=500, normalize_ranges=False,
      num_workers=0),
      cartpole_fused())


def trpo_cartpole_fused():
  """TRPO on CartPole-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, 4 seeds vmapped): deterministic evaluation 376-462 at 10k steps,
  500 for 4 of 4 seeds from 20k on (every 10k up to 92k); 51 s wall for the 4 seeds.
  """
  return _experiment("trpo_cartpole_fused",
                     periodic_run("CartPole-v1", "gymnax", 8, 100_000), cartpole_fused())


def trpo_pendulum():
  """TRPO on Pendulum-v1, host envs; observations and actions range-normalized.

  Measured (2-core CPU, seed 0): deterministic evaluation -980 at 20k steps, -142 at 61k,
  -123 at 102k, then -126 to -223 up to 205k (-127 at the end); 2 min 45 s wall.
  """
  return _experiment("trpo_pendulum", periodic_run(
      "Pendulum-v1", "gymnasium", 8, 200_000, max_length=200),
      dataclasses.replace(pendulum_fused(), rescale_actions=False))


def trpo_pendulum_fused():
  """TRPO on Pendulum-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, 4 seeds vmapped): best deterministic evaluation >= -200 for 4 of 4
  seeds by 102k steps (-107, -94, -149, -111); single evaluations later vary by about +-50
  (-126 to -222 at 184k); 68 s wall for the 4 seeds and 184k steps.
  """
  return _experiment("trpo_pendulum_fused",
                     periodic_run("Pendulum-v1", "gymnax", 8, 200_000), pendulum_fused())


def trpo_cheetah():
  """TRPO on HalfCheetah-v5 (MuJoCo), host envs, 1M steps.

  Measured with ``benchmarks/pg.py --only cheetah`` (2-core CPU, seed 0, deterministic
  evaluations every 100k): >= 1800 at 205k, best 6028 by 1M, whole process 192 s;
  sb3-contrib's TRPO with the rl-zoo settings in the same run: 3635 at 1M in 631 s
  (0.30x its wall time; published 1803 +- 46). A rerun on one core: 1672 at 102k, 4507 at
  307k, 5822 at 717k, 6230 at 1M.
  """
  config = TRPOConfig(
      policy_layers=(64, 64), baseline_layers=(64, 64), rollout_length=256,
      discount=0.99, gae_lambda=0.95, value_target="lambda_return", max_kl_divergence=0.02,
      cg_iterations=15, init_std=0.6, normalize_observations=True, scale_rewards=True,
      baseline_learning_rate=1e-3, baseline_steps=10, baseline_minibatches=16)
  return _experiment("trpo_cheetah", periodic_run(
      "HalfCheetah-v5", "gymnasium", 8, 1_000_000, max_length=1000, report_every=50_000,
      eval_every=250_000, checkpoint_every=250_000), config)


NAMED = {
    "trpo_cartpole": (trpo_cartpole, None),
    "trpo_cartpole_fused": (trpo_cartpole_fused, None),
    "trpo_pendulum": (trpo_pendulum, None),
    "trpo_pendulum_fused": (trpo_pendulum_fused, None),
    "trpo_cheetah": (trpo_cheetah, None),
}
