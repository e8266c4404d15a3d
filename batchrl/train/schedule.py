"""A run's budget and cadence in iterations: how many to train, when to report, evaluate
and checkpoint. One iteration is ``num_envs * agent.period`` env steps.

The budget is trained exactly, rounded up to whole iterations: train phases are
``plan["report"]`` iterations long except the last, which ends at ``plan["total"]``
(``phase_length``). Evaluation and checkpoint periods longer than the run fall on its end."""
from __future__ import annotations

import math
import time
from typing import Callable

from batchrl.configs import RunConfig


def schedule(run: RunConfig, steps_per_iteration: int) -> dict[str, int]:
  """Iteration counts for the budget and the report/eval/checkpoint cadence."""
  per = steps_per_iteration
  every = lambda steps: max(1, math.ceil(steps / per))
  return {"total": run.iterations(per), "report": run.report_iterations(per),
          "eval": every(run.eval_every) if run.eval_every else 0,
          "checkpoint": every(run.checkpoint_every) if run.checkpoint_every else 0}


def phase_length(plan: dict[str, int], iteration: int) -> int:
  """Iterations of the train phase that starts at ``iteration``: up to the next multiple of
  a report's worth, or what is left of the budget. A run stopped inside a phase (Ctrl-C)
  and resumed reports, evaluates and checkpoints at the same steps as one never stopped."""
  return min(plan["report"] - iteration % plan["report"], plan["total"] - iteration)


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


# How long one compiled call of a train phase runs, about, when the phase may be asked to
# stop (Ctrl-C): a request waits for the call under way. Calls chain exactly (the same
# program, the carried state handed on), so this changes when a run can stop, never what it
# computes; a call's dispatch and the wait for its result cost well under 1% of it.
CALL_SECONDS = 0.5


def call_length(left: int, seconds_per_iteration: float | None) -> int:
  """Iterations of a train phase's next compiled call: about ``CALL_SECONDS`` of them at
  the pace of the last call (one when none was timed yet: the first call also compiles),
  at least one, at most the ``left`` of the phase."""
  if seconds_per_iteration is None:
    return 1
  return max(1, min(left, int(CALL_SECONDS / max(seconds_per_iteration, 1e-9))))


def run_in_calls(length: int, call: Callable[[int, int], None],
                 stop: Callable[[], bool] | None, pace: float | None):
  """A train phase of ``length`` iterations as compiled calls ``call(count, start)`` (each
  trains ``count`` iterations from the phase's ``start``): one call without ``stop``; with
  it, calls of ``call_length`` at ``pace`` (seconds per iteration of the last call), ending
  after the first call at whose end ``stop()`` is true. Returns ``(iterations done, pace,
  stopped)``: the local trainer and batched trials share this, each with its own ``call``."""
  done, stopped = 0, False
  while done < length and not stopped:
    count = length - done if stop is None else call_length(length - done, pace)
    began = time.perf_counter()
    call(count, done)
    pace, done = (time.perf_counter() - began) / count, done + count
    stopped = stop is not None and stop()
  return done, pace, stopped
