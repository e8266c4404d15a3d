"""A run's budget and cadence in iterations: how many to train, when to report, evaluate
and checkpoint. One iteration is ``num_envs * agent.period`` env steps.

The budget is trained exactly, rounded up to whole iterations: train phases are
``plan["report"]`` iterations long except the last, which ends at ``plan["total"]``
(``phase_length``). Evaluation and checkpoint periods longer than the run fall on its end."""
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


def phase_length(plan: dict[str, int], iteration: int) -> int:
  """Iterations of the train phase that starts at ``iteration``: a report's worth, or what
  is left of the budget."""
  return min(plan["report"], plan["total"] - iteration)


def budget_note(run: RunConfig, steps_per_iteration: int) -> str | None:
  """What the log says when the budget is not a whole number of iterations (None when it is)."""
  trained = run.iterations(steps_per_iteration) * steps_per_iteration
  if trained == run.steps:
    return None
  return (f"steps={run.steps:,} rounded up to whole updates of {steps_per_iteration:,} env "
          f"steps: training {trained:,} steps.")


def due(before: int, after: int, every: int, final: bool) -> bool:
  """Whether a multiple of ``every`` iterations was reached in ``(before, after]``."""
  return final or (every > 0 and before // every != after // every)
