"""A run's budget and cadence in iterations: how many to train, when to report, evaluate
and checkpoint. One iteration is ``num_envs * agent.period`` env steps."""
from __future__ import annotations

import math

from batchrl.configs import RunConfig


def schedule(run: RunConfig, steps_per_iteration: int) -> dict[str, int]:
  """Iteration counts for the budget and the report/eval/checkpoint cadence."""
  per = steps_per_iteration
  every = lambda steps: max(1, math.ceil(steps / per))  # noqa: E731
  return {"total": run.iterations(per), "report": run.report_iterations(per),
          "eval": every(run.eval_every) if run.eval_every else 0,
          "checkpoint": every(run.checkpoint_every) if run.checkpoint_every else 0}


def due(before: int, after: int, every: int, final: bool) -> bool:
  """Whether a multiple of ``every`` iterations was reached in ``(before, after]``."""
  return final or (every > 0 and before // every != after // every)
