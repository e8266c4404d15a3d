"""NAF and DQFD named experiments (``batchrl train``); their config classes are in
``batchrl.agents.naf.config`` and ``batchrl.agents.dqfd.config``, the demonstration sources
in ``batchrl.agents.dqfd.demonstrations``.

Named configs for ``batchrl train``:

===================  =======  ============================================================
name                 backend  what
===================  =======  ============================================================
``naf_pendulum``     gymnax   Pendulum-v1, 4 envs, 30k steps: NAF with a 2x128 MLP, one
                              gradient step per environment step, soft target updates
``dqfd_cartpole``    gymnax   CartPole-v1, 8 envs, 50k steps: ``dqn_cartpole``'s agent
                              with half its gradient steps, plus 20k demonstration
                              transitions of ``cartpole_controller`` and 2000
                              pretraining steps at init
===================  =======  ============================================================

Measured figures are in each factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.dqfd.presets import cartpole_dqfd
from batchrl.agents.naf.presets import pendulum_naf
from batchrl.configs.run import Experiment, RunConfig


def _run(**values):
  return RunConfig(**values)


def _experiment(name: str, run, config, agent: str):
  return Experiment(name, run, config, agent=agent)


def naf_pendulum():
  """gymnax Pendulum-v1 (200-step episodes), NAF, 30k steps; the run is one compiled
  program.

  Measured (fused, 3 seeds vmapped, greedy evaluation = mean of each env's first episode):
  -1300 at 5k steps, -535 / -579 / -133 at 10k, -158 / -121 / -203 at 15k; each seed's
  best evaluation within 30k >= -250 (tests/test_naf.py, slow). About 2 minutes for the 3
  seeds on 2 shared CPU cores."""
  return _experiment("naf_pendulum", _run(
      env="Pendulum-v1", backend="gymnax", num_envs=4, num_workers=0, steps=30_000,
      report_every=2_000, eval_every=5_000, checkpoint_every=10_000), pendulum_naf(), "naf")


def dqfd_cartpole():
  """gymnax CartPole-v1, DQFD with demonstrations of a fixed controller, 50k steps.

  Measured (fused, 4 seeds vmapped, greedy evaluation): 500 on every seed right after init
  (the pretraining alone, no environment step), then 439-500 at every evaluation every
  2.5k steps up to 20k (mostly 500). DQN with the same network and gradient steps
  (``dqn_cartpole_fused`` with ``hidden_layers=[128,128]``, ``repeat_update=64``, 1-step)
  first reaches 475 after 33-94k steps (4 seeds)."""
  return _experiment("dqfd_cartpole", _run(
      env="CartPole-v1", backend="gymnax", num_envs=8, num_workers=0, steps=50_000,
      report_every=5_000, eval_every=5_000, checkpoint_every=25_000), cartpole_dqfd(), "dqfd")


_DESCRIPTIONS = {
    "naf_pendulum": "Pendulum-v1 in gymnax, NAF (30k steps)",
    "dqfd_cartpole": "CartPole-v1 in gymnax, DQFD with a controller's demonstrations (50k "
                     "steps)",
}

NAMED = {name: (factory, _DESCRIPTIONS[name]) for name, factory in (
    ("naf_pendulum", naf_pendulum), ("dqfd_cartpole", dqfd_cartpole))}
