"""A2C and AC named experiments (``batchrl train``).

Measured on a 2-core CPU under load, seed 0, deterministic evaluation: see each
factory's docstring.
"""
from __future__ import annotations

import dataclasses

from batchrl.agents.a2c import recipes
from batchrl.configs.run import Experiment, RunConfig


def _run(env: str, backend: str, num_envs: int, steps: int, **run):
  every = max(steps // 10, 1)
  defaults = dict(report_every=every, eval_every=every, checkpoint_every=steps // 2,
                  num_workers=0)
  return RunConfig(env=env, backend=backend, num_envs=num_envs, steps=steps,
                   **{**defaults, **run})


def a2c_cartpole():
  """A2C on CartPole-v1, 8 host envs stepped in this process, separate actor and critic.

  Measured (2-core CPU, seed 0, deterministic evaluation every 20k steps): 308 at 20k,
  500 at 100k and at every evaluation after it up to 200k (the issue's target, >= 475
  within 200k, met at 100k). rl-zoo's A2C reaches 500 at 500k.

  Whole process (``benchmarks/actor_critic.py --only a2c``, cold, evaluations included):
  7.9 s against SB3 A2C's 32.8 s in the same run at load 1.5 (0.24x; target 0.3x), 9.3
  against 34.6 s at load 2.4 (0.27x), 10.1 against 45.4 s at load 3.4 (0.22x), 14.7-16.0
  against 48.5-55.7 s at load 4-5.6 (0.29-0.30x, before the last change below); it was
  20-22 s (0.32-0.52x) before the fast ``ConvertTo32Bit`` path,
  ``xla_threads=1`` (XLA's CPU pool on one thread: the compiled step and the env callback
  no longer hop between cores; see ``batchrl.train.cpu_threads``) and ``host_call``
  keeping its thread's Python state, which left every metric the same.
  """
  return Experiment("a2c_cartpole", _run("CartPole-v1", "gymnasium", 8, 200_000,
                                         max_length=500, normalize_ranges=False,
                                         xla_threads=1),
                    recipes.cartpole(), agent="a2c")


def a2c_cartpole_fused():
  """A2C on CartPole-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, deterministic evaluation every 20k steps): seed 0 500 from 60k on
  (to 200k), 7 s wall; 4 seeds vmapped (``--seeds 4``): 500 for 4 of 4 seeds from 100k
  on, 11 s wall.
  """
  return Experiment("a2c_cartpole_fused", _run("CartPole-v1", "gymnax", 8, 200_000),
                    recipes.cartpole(), agent="a2c")


def ac_cartpole():
  """TensorForce's AC (the policy gradient weighted by the critic-bootstrapped return, no
  advantage) on CartPole-v1, 8 host envs.

  Its weights are standardized over each batch (``normalize_rewards``): without that (the
  raw returns, all positive on CartPole) the best evaluation stayed near 280 in 200k steps.

  Measured (2-core CPU, seed 0, deterministic evaluation every 20k steps): 414 at 80k, 494
  at 140k, 500 from 160k on (to 200k); 17 s wall before ``xla_threads=1`` (same metrics
  with it). Fused, 4 seeds: 500 for 3 of 4 seeds from 160k on, the fourth 430 at 200k.
  """
  return Experiment("ac_cartpole", _run("CartPole-v1", "gymnasium", 8, 200_000,
                                        max_length=500, normalize_ranges=False,
                                        xla_threads=1),
                    dataclasses.replace(recipes.cartpole(), advantage=False,
                                        normalize_rewards=True), agent="a2c")


NAMED = {
    "a2c_cartpole": (a2c_cartpole, None),
    "a2c_cartpole_fused": (a2c_cartpole_fused, None),
    "ac_cartpole": (ac_cartpole, None),
}
