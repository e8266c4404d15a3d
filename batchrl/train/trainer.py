"""``Trainer``: what one run's training offers its driver, wherever the envs are stepped.

Two trainers implement it: ``batchrl.train.local.LocalTrainer`` (envs in this process or its
workers, or in the compiled program) and ``batchrl.distributed.trainer.DistributedTrainer``
(envs in Ray actors, this process learns). ``batchrl.train.loop.run`` drives either one;
``batchrl train`` picks which (``--ray``).

A trainer owns the compiled pieces of one run and its ``SimState`` (what a checkpoint
holds); the driver owns the cadence (``plan``) and advances ``iteration`` after each
``train_phase``, so benchmarks and tests can drive a trainer by hand.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from batchrl.agents.core import Model
from batchrl.configs import Experiment
from batchrl.simulation import SimState


@runtime_checkable
class Trainer(Protocol):
  """One run's training (see the module doc).

  Attributes:
    exp: the run's experiment (saved with every checkpoint).
    run_dir: the run directory; checkpoints go to its ``checkpoints/``.
    plan: ``schedule.schedule``'s iteration counts: ``total``, ``report``, ``eval``,
      ``checkpoint``.
    steps_per_iteration: env steps of one iteration (all envs, one ``agent.period`` each).
    iteration: iterations done; advanced by the driver, set by ``restore``.
    sim: the whole state of the run: agent, env observations, keys, counters.
    agent: the run's ``Model`` (checkpoints leave out its ``scratch``).
  """

  exp: Experiment
  run_dir: Path
  plan: dict[str, int]
  steps_per_iteration: int
  iteration: int
  sim: SimState
  agent: Model

  @property
  def step(self) -> int:
    """Env steps done: ``iteration * steps_per_iteration``."""

  def restore(self) -> bool:
    """Loads the run's latest good checkpoint, if any; returns whether one was loaded."""

  def save(self) -> None:
    """Checkpoints ``sim`` at ``step``."""

  def train_phase(self, iterations: int, progress: Callable[[int], None] | None = None,
                  stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Trains ``iterations`` iterations (``iteration`` is left to the driver); the report.
    ``progress(done)``, when given, hears now and then how many of them are done (it may
    be called from another thread). ``stop()``, when given, is asked between the phase's
    compiled calls (an update, or a round of them); once it is true the phase ends there.
    ``metrics["iterations"]`` is how many were trained (the driver advances by it)."""

  def eval_phase(self) -> dict[str, Any]:
    """Evaluates the deterministic policy; ``episodes``, ``mean_score``, ``mean_length``."""

  def summaries(self) -> dict:
    """The agent's own TensorBoard material now: ``{"scalars": ..., "histograms": ...}``."""

  def close(self) -> None:
    """Stops what the trainer started (env workers, runners)."""
