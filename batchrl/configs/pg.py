"""VPG and TRPO named experiments (``batchrl train``).

Measured on a 2-core CPU with the fused driver (gymnax), deterministic evaluation:
see each factory's docstring.
"""
from __future__ import annotations

import dataclasses

from batchrl.agents.trpo import TRPOConfig
from batchrl.agents.trpo import presets as trpo_presets
from batchrl.agents.vpg import presets as vpg_presets
from batchrl.configs.run import Experiment, RunConfig


def _run(env: str, backend: str, num_envs: int, steps: int, **run):
  every = max(steps // 10, 1)
  defaults = dict(report_every=every, eval_every=every, checkpoint_every=steps // 2)
  if backend == "gymnax":
    defaults["num_workers"] = 0
  return RunConfig(env=env, backend=backend, num_envs=num_envs, steps=steps,
                   **{**defaults, **run})


def _experiment(name: str, agent: str, run, config):
  return Experiment(name, run, config, agent=agent)


def vpg_cartpole():
  """VPG on CartPole-v1, host envs stepped in this process, 'states' MLP baseline.

  Measured (2-core CPU, seed 0): deterministic evaluation 500 from 20k steps on; 87 s wall
  for the 200k steps including evaluations (with 2 worker processes; CartPole steps in
  microseconds, so stepping it in this process is 2-3x faster than through workers).
  """
  return _experiment("vpg_cartpole", "vpg", _run(
      "CartPole-v1", "gymnasium", 16, 200_000, max_length=500, normalize_ranges=False,
      num_workers=0),
      vpg_presets.cartpole_fused())


def vpg_cartpole_fused():
  """VPG on CartPole-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, 4 seeds vmapped): deterministic evaluation 500 for 4 of 4 seeds at
  49k steps and at every evaluation after it up to 491k; 49 s wall for the 4 seeds.
  """
  return _experiment("vpg_cartpole_fused", "vpg",
                     _run("CartPole-v1", "gymnax", 16, 500_000), vpg_presets.cartpole_fused())


def trpo_cartpole():
  """TRPO on CartPole-v1, host envs stepped in this process (CartPole steps in microseconds:
  worker processes would cost more than they save; 9.5k steps/s here against 3.6k with 2
  workers, measured in one session under load).

  Measured (2-core CPU, seed 0): deterministic evaluation 337 at 10k steps, 500 from 20k on.
  """
  return _experiment("trpo_cartpole", "trpo", _run(
      "CartPole-v1", "gymnasium", 8, 100_000, max_length=500, normalize_ranges=False,
      num_workers=0),
      trpo_presets.cartpole_fused())


def trpo_cartpole_fused():
  """TRPO on CartPole-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, 4 seeds vmapped): deterministic evaluation 376-462 at 10k steps,
  500 for 4 of 4 seeds from 20k on (every 10k up to 92k); 51 s wall for the 4 seeds.
  """
  return _experiment("trpo_cartpole_fused", "trpo",
                     _run("CartPole-v1", "gymnax", 8, 100_000), trpo_presets.cartpole_fused())


def trpo_pendulum():
  """TRPO on Pendulum-v1, host envs; observations and actions range-normalized.

  Measured (2-core CPU, seed 0): deterministic evaluation -980 at 20k steps, -142 at 61k,
  -123 at 102k, then -126 to -223 up to 205k (-127 at the end); 2 min 45 s wall.
  """
  return _experiment("trpo_pendulum", "trpo", _run(
      "Pendulum-v1", "gymnasium", 8, 200_000, max_length=200),
      dataclasses.replace(trpo_presets.pendulum_fused(), rescale_actions=False))


def trpo_pendulum_fused():
  """TRPO on Pendulum-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, 4 seeds vmapped): best deterministic evaluation >= -200 for 4 of 4
  seeds by 102k steps (-107, -94, -149, -111); single evaluations later vary by about +-50
  (-126 to -222 at 184k); 68 s wall for the 4 seeds and 184k steps.
  """
  return _experiment("trpo_pendulum_fused", "trpo",
                     _run("Pendulum-v1", "gymnax", 8, 200_000), trpo_presets.pendulum_fused())


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
  return _experiment("trpo_cheetah", "trpo", _run(
      "HalfCheetah-v5", "gymnasium", 8, 1_000_000, max_length=1000, report_every=50_000,
      eval_every=250_000, checkpoint_every=250_000), config)


NAMED = {
    "vpg_cartpole": (vpg_cartpole, None),
    "vpg_cartpole_fused": (vpg_cartpole_fused, None),
    "trpo_cartpole": (trpo_cartpole, None),
    "trpo_cartpole_fused": (trpo_cartpole_fused, None),
    "trpo_pendulum": (trpo_pendulum, None),
    "trpo_pendulum_fused": (trpo_pendulum_fused, None),
    "trpo_cheetah": (trpo_cheetah, None),
}
