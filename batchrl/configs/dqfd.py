"""DQFD's named config (``batchrl train``): its config class is ``batchrl.agents.dqfd.DQFDConfig``,
its recipes ``batchrl.agents.dqfd.recipes``, the demonstration sources
``batchrl.agents.dqfd.demonstrations``.

Named configs for ``batchrl train``:

===================  =======  ============================================================
name                 backend  what
===================  =======  ============================================================
``dqfd_cartpole``    gymnax   CartPole-v1, 8 envs, 50k steps: ``dqn_cartpole``'s agent
                              with half its gradient steps, plus 20k demonstration
                              transitions of ``cartpole_controller`` and 2000
                              pretraining steps at init
===================  =======  ============================================================

Measured figures are in the factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.dqfd.recipes import cartpole_dqfd
from batchrl.configs.run import Experiment, RunConfig


def dqfd_cartpole():
  """gymnax CartPole-v1, DQFD with demonstrations of a fixed controller, 50k steps.

  Measured (fused, 4 seeds vmapped, greedy evaluation): 500 on every seed right after init
  (the pretraining alone, no environment step), then 439-500 at every evaluation every
  2.5k steps up to 20k (mostly 500). DQN with the same network and gradient steps
  (``dqn_cartpole_fused`` with ``hidden_layers=[128,128]``, ``repeat_update=64``, 1-step)
  first reaches 475 after 33-94k steps (4 seeds)."""
  return Experiment("dqfd_cartpole", RunConfig(
      env="CartPole-v1", backend="gymnax", num_envs=8, num_workers=0, steps=50_000,
      report_every=5_000, eval_every=5_000, checkpoint_every=25_000), cartpole_dqfd(),
      agent="dqfd")


NAMED = {
    "dqfd_cartpole": (dqfd_cartpole, "CartPole-v1 in gymnax, DQFD with a controller's "
                      "demonstrations (50k steps)"),
}
