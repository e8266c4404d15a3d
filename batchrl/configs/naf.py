"""NAF's named config (``batchrl train``): its config class is ``batchrl.agents.naf.NAFConfig``,
its recipes ``batchrl.agents.naf.recipes``.

Named configs for ``batchrl train``:

===================  =======  ============================================================
name                 backend  what
===================  =======  ============================================================
``naf_pendulum``     gymnax   Pendulum-v1, 4 envs, 30k steps: NAF with a 2x128 MLP, one
                              gradient step per environment step, soft target updates
===================  =======  ============================================================

Measured figures are in the factory's docstring.
"""
from __future__ import annotations

from batchrl.agents.naf.recipes import pendulum_naf
from batchrl.configs.run import Experiment, RunConfig


def naf_pendulum():
  """gymnax Pendulum-v1 (200-step episodes), NAF, 30k steps; the run is one compiled
  program.

  Measured (fused, 3 seeds vmapped, greedy evaluation = mean of each env's first episode):
  -1300 at 5k steps, -535 / -579 / -133 at 10k, -158 / -121 / -203 at 15k; each seed's
  best evaluation within 30k >= -250 (tests/test_naf.py, slow). About 2 minutes for the 3
  seeds on 2 shared CPU cores."""
  return Experiment("naf_pendulum", RunConfig(
      env="Pendulum-v1", backend="gymnax", num_envs=4, num_workers=0, steps=30_000,
      report_every=2_000, eval_every=5_000, checkpoint_every=10_000), pendulum_naf(), agent="naf")


NAMED = {
    "naf_pendulum": (naf_pendulum, "Pendulum-v1 in gymnax, NAF (30k steps)"),
}
