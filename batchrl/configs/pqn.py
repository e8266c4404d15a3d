"""PQN's named experiments (``batchrl train``); the config class is
``batchrl.agents.pqn.config.PQNConfig``, the values ``batchrl.agents.pqn.recipes``.

==========================  =========  =====================================================
name                        backend    what
==========================  =========  =====================================================
``pqn_cartpole_fused``      gymnax     CartPole-v1, 32 envs: purejaxql's CartPole values
                                       (rollouts of 64 steps, 4 epochs of 16 minibatches,
                                       LayerNorm, RAdam annealed, lambda 0.95, rewards x
                                       0.1) for 90k steps (44 updates) instead of its
                                       500k, with two 64-unit layers instead of 256 and a
                                       learning rate of 3e-3 instead of 1e-4 to learn
                                       within them at a quarter of the update's cost
``pqn_minatar_breakout``    gymnax     MinAtar Breakout (``Breakout-MinAtar``; any MinAtar
                                       game with ``--set env=Asterix-MinAtar``), 64 envs:
                                       purejaxql's MinAtar values and CNN (minibatches of
                                       128 transitions: 16 per epoch) for 492k steps (240
                                       updates) instead of its 10M on 128 envs
``pqn_atari``               envpool    Atari (Breakout; ``--set env=...``) with EnvPool's
                                       C++ Atari wrappers, 128 envs: the paper's Atari
                                       values (``PQNConfig``'s defaults) on the Nature CNN
                                       with LayerNorm, 50M steps (200M frames), for a GPU
==========================  =========  =====================================================

The reference values are purejaxql's (commit 47af6d7, ``purejaxql/config/alg/pqn_*.yaml``);
every schedule (epsilon, learning rate) is a fraction of the run's updates, so ``--set
steps=N`` keeps their shape.

Measured on the shared 2-core CPU, busy with other work (load average 5-7), 2026-11-28
(greedy evaluation: the mean of the first episode of each env; seeds are
``jax.random.split`` of keys 0, 1 and 2, five each, fused runs vmapped, evaluated every 4
updates):

* CartPole, two 64-unit layers, learning rate 3e-3, schedules over 40 updates (2026-11-28,
  load average 7-9; evaluated every 4 updates, keys 0 and 1; every 2, key 2): 40 of 40
  seeds reach >= 475, first at 8-40 updates (key 0: 16 of 16 by 40, 15 by 32; key 1: 8 of
  8 by 32; key 2: 16 of 16 by 30), 33 of 40 end >= 475; the config trains 44 updates.
  ``batchrl train`` seeds 0-3 reach 500 at 57k, 41k, 16k and 33k steps. Learning rate
  2e-3: 24 of 24 seeds by 40 updates; 5e-4 or 1e-3 with 64 units: 8 of 8 by 48 and 36; 2
  epochs instead of 4, or 8 minibatches: 6 and 7 of 8 within 48. A 64-unit update costs
  about a quarter of a 256-unit one (40 against 170 ms on the loaded machine); compiling
  the training program costs about the same (4 s of CPU), so start-up and compiling are
  now most of the run.
* Before, with two 256-unit layers: CartPole, 48 updates (98k steps): learning rate 5e-4,
  15 of 15 seeds reach 500 (first >= 475 at 8k-90k steps), 14 of 15 end >= 475 (one at
  436). purejaxql's 1e-4: 5 of 5 reach 475 (at 33k-90k) but end at 385-500; 2.5e-4: 5 of
  5, all ending at 500 (both at 100k steps, key 1). With 32 updates (65k steps) and 5e-4,
  13 of 15 reach 475. Cheaper updates learned less reliably there: 2 epochs instead of 4,
  2 of 5 seeds within 100k; 128x128 or 64x64 layers, or 4 minibatches, 1 to 3 of 3 seeds
  within 150k-200k, later.
* ``benchmarks/pqn.py`` (whole processes as typed, seed 0, the machine nearly idle, load
  average 1.3): ``pqn_cartpole_fused`` 13.5 s, >= 475 from 49k steps (9.9 s after the
  start), 500 at the end; ``dqn_cartpole_fused`` 15.1 s, >= 475 at 66k (11.8 s), 141 at
  the end: 0.90x. Start-up and compiling are most of both (PQN: imports 1.2 s, compiling
  about 5.5 s; its 48 updates about 5 s), so PQN cannot take half of DQN's time.
* ``pqn_minatar_breakout`` (seed 0; a random policy scores about 0.5-1): 3.0 at 49k steps,
  5.5 at 98k, 6.0 at 197k, 10.3 at 246k, 15.2 at 393k, 17.8 at 492k; whole process 72.4 s
  (load falling from 5 to 2) against 86.3 s for ``dqn_minatar_breakout``'s 100k steps (8.6
  at best, at 80k). PQN passed DQN's best 39.8 s after its start, DQN 69.6 s: 0.57x.
  The convolution runs as image patches times its kernel on the CPU
  (``batchrl.networks.conv``, every conv network's): with XLA's convolution an update took
  twice as long (1.9 s against 0.9 s at load 5).
* Again, 2026-11-28, after PQN's network moved to the JSON builder (the same function; its
  parameters are named, hence initialized, differently) and DQN's conv to image patches
  too (load average 4-5): ``python benchmarks/pqn.py``: CartPole 23.1 s against 29.5 s
  (0.78x; PQN >= 475 from 41k steps, DQN from 66k); MinAtar Breakout: PQN past DQN's best
  (8.62, at 60k after 136.0 s) at 295k after 83.3 s (0.61x), 13.55 at the end; whole
  processes 137.9 s against 216.5 s.
* 2026-11-28, after ``pqn_cartpole_fused`` moved to 64x64 layers, learning rate 3e-3 and
  44 updates, and ``pqn_minatar_breakout`` to 64 envs (16 minibatches of 128, the same
  492k steps), the machine overloaded (load average 6.5-8): ``python benchmarks/pqn.py``:
  CartPole 24.5 s against 41.9 s (0.59x; CPU 11.8 s against 20.9 s; PQN >= 475 from 57k
  steps, its first report, start-up and compiling included, 19.8 s after the start);
  MinAtar Breakout: PQN past DQN's best (8.62, at 60k after 282.7 s) at 172k after 84.4
  s (0.30x), 17.62 at the end; whole processes 212.8 s (CPU 108.3 s) against 442.4 s
  (CPU 241.6 s). Its 20 evaluations took 8.0 s in all: an evaluation steps every env
  until the slowest first episode ends, so 64 envs halve its cost. With 64 envs, seeds
  of key 0 (two, vmapped, schedules over 295k steps) passed 8.62 at 221k and 246k steps;
  32 envs (8 minibatches): one of two by 295k. Again (``--only minatar``, load 5.5-6.7):
  PQN past 8.62 at 172k after 52.2 s against DQN's 170.2 s (0.31x); whole processes
  131.2 s (CPU 92.7 s) against 255.3 s (CPU 144.7 s).
* 2026-11-28 again, nothing else running, after the evaluation compiled ahead stopped
  compiling a second time and convolutions became strided slices (``batchrl.networks.conv``):
  ``python benchmarks/pqn.py --only cartpole``: cold 13.4 s against 20.5 s (0.65x), with the
  compilation cache the first runs filled 10.5 s against 16.8 s (0.62x); PQN's first report
  comes 7.4 s after the start even then (imports, tracing, the programs too small to cache),
  so start-up keeps it above half of DQN's run. ``batchrl bench --suite minatar`` (3 seeds):
  PQN passed DQN's best after 0.49x, 0.68x and 0.75x its time (table in docs/benchmarks.md);
  the 0.30x above was read on the overloaded machine, where DQN's many small steps lost
  more to the load than PQN's batched ones. ``pqn_atari`` on 2 cores: 218 steps/s against
  ``ppo_atari``'s 147 (EnvPool backend, 16k steps, the same hour).
* 2026-11-28, nothing else running, after a run's chunks stopped compiling a slice program
  per call length on the device (DQN's calls vary: 23 of them, ~50 ms each) and long
  evaluations (``build.eval_kind``) compiled optimized (PQN's 11: 0.7 -> 0.2 s):
  ``python benchmarks/pqn.py --only cartpole``: cold 10.2 s against 16.6 s (0.62x); with the
  compilation cache 5.8 s against 13.9 s (0.42x, the target met). Cold, PQN's training
  program compiles longer than DQN's (its first report 8.1 s against 7.7 s).
"""
from __future__ import annotations

import json

from batchrl.agents.pqn import recipes
from batchrl.configs.atari import ATARI_PREPROCESSING, DEFAULT_GAME, NATURE_CNN
from batchrl.configs.run import Experiment, RunConfig

CARTPOLE_ENVS, CARTPOLE_STEPS = 32, 44 * 64 * 32  # 90,112: 11 reports of 4 updates
MINATAR_ENVS, MINATAR_STEPS = 64, 240 * 32 * 64  # 491,520: 20 reports of 12 updates
ATARI_ENVS, ATARI_STEPS = 128, 50_000_000


def _experiment(name: str, run: RunConfig, config) -> Experiment:
  return Experiment(name, run, config, agent="pqn")


def pqn_cartpole_fused() -> Experiment:
  """gymnax CartPole-v1 with purejaxql's CartPole values but a 64x64 network and a larger
  learning rate, 90k steps (module docstring)."""
  every = 4 * 64 * CARTPOLE_ENVS  # evaluations every 4 updates
  return _experiment("pqn_cartpole_fused", RunConfig(
      env="CartPole-v1", backend="gymnax", num_envs=CARTPOLE_ENVS, num_workers=0,
      steps=CARTPOLE_STEPS, report_every=every, eval_every=every,
      checkpoint_every=CARTPOLE_STEPS),
      recipes.cartpole(hidden_layers=(64, 64), learning_rate=3e-3))


def pqn_minatar_breakout() -> Experiment:
  """gymnax MinAtar Breakout with purejaxql's MinAtar values (module docstring)."""
  every = 12 * 32 * MINATAR_ENVS  # evaluations every 12 updates (24,576 steps)
  return _experiment("pqn_minatar_breakout", RunConfig(
      env="Breakout-MinAtar", backend="gymnax", num_envs=MINATAR_ENVS, num_workers=0,
      steps=MINATAR_STEPS, report_every=every, eval_every=every,
      checkpoint_every=MINATAR_STEPS), recipes.minatar(num_minibatches=16))


def pqn_atari() -> Experiment:
  """The paper's Atari values on EnvPool (module docstring)."""
  return _experiment("pqn_atari", RunConfig(
      env=DEFAULT_GAME, backend="envpool", atari=True,
      preprocessing=json.dumps(ATARI_PREPROCESSING), num_envs=ATARI_ENVS, num_workers=0,
      max_length=None, normalize_ranges=False, steps=ATARI_STEPS, report_every=500_000,
      eval_every=5_000_000, eval_steps=10_000, checkpoint_every=5_000_000),
      recipes.atari(NATURE_CNN))


NAMED = {
    "pqn_cartpole_fused": (pqn_cartpole_fused, "CartPole-v1 in gymnax, PQN with purejaxql's "
                           "CartPole values, 64x64, as one compiled program (90k steps)"),
    "pqn_minatar_breakout": (pqn_minatar_breakout, "MinAtar Breakout in gymnax (any MinAtar "
                             "game with --set env=), PQN with purejaxql's MinAtar values"),
    "pqn_atari": (pqn_atari, "Atari (Breakout; --set env=...) on EnvPool, PQN with the "
                  "paper's values and the Nature CNN, 128 envs (50M steps; for a GPU; "
                  "batchrl[envpool])"),
}
