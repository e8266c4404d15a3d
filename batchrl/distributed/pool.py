"""The runner pool: N env-runner actors, each call answered by all of them, failures replaced.

``start(method, *args)`` sends the call to every runner; ``finish`` waits for their answers
and returns them in runner order (the learner can work in between). A runner whose process dies,
whose call raises, or that does not answer within its timeout is killed and replaced by a new actor
(fresh envs, a new seed), and the call is sent to the replacement: its partial work is dropped,
never mixed into the answers. Every replacement is recorded (``restarts``) and logged; after
``max_restarts`` the pool raises ``RunnerFailure``.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable

from batchrl.errors import RunFailure

log = logging.getLogger("batchrl")


class RunnerFailure(RunFailure):
  """Env runners failed more often than the run allows."""


@dataclasses.dataclass(frozen=True)
class Restart:
  runner: int
  reason: str


@dataclasses.dataclass
class _Pending:
  ref: Any
  deadline: float


@dataclasses.dataclass
class Call:
  """A call in flight on every runner (from ``RunnerPool.start``)."""

  method: str
  args: tuple
  pending: dict  # runner index -> _Pending


def describe_failure(error: BaseException) -> str:
  """A short reason for a failed runner call (Ray's own messages run to many lines)."""
  import ray
  if isinstance(error, ray.exceptions.RayTaskError):
    cause = getattr(error, "cause", None) or error
    first = str(cause).strip().splitlines() or [""]
    return f"raised {type(cause).__name__}: {first[-1][:200]}"
  if isinstance(error, ray.exceptions.RayActorError):
    return "its process died"
  return f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"


class RunnerPool:
  """N actors made by ``spawn(index, incarnation)``; see the module doc.

  Args:
    spawn: makes runner ``index``'s actor; ``incarnation`` counts its replacements.
    count: N.
    timeout: seconds a runner may take for one call.
    start_timeout: extra seconds for a runner's first call (import, env start, compile).
    max_restarts: replacements allowed over the whole run before ``RunnerFailure``.
  """

  def __init__(self, spawn: Callable[[int, int], Any], count: int, *, timeout: float,
               start_timeout: float, max_restarts: int):
    import ray
    self._ray = ray
    self._spawn, self.timeout, self.start_timeout = spawn, timeout, start_timeout
    self.max_restarts = max_restarts
    self.restarts: list[Restart] = []
    self._incarnation = [0] * count
    self.actors = [spawn(i, 0) for i in range(count)]
    self._fresh = [True] * count  # not answered yet: allowed start_timeout more

  def __len__(self) -> int:
    return len(self.actors)

  def start(self, method: str, *args) -> Call:
    """Sends ``actor.method(*args)`` to every runner; ``finish`` collects the answers."""
    return Call(method, args, {i: self._submit(i, method, args) for i in range(len(self))})

  def finish(self, call: Call) -> list:
    """The answers of ``call``, in runner order; failed runners are replaced and asked again."""
    method, args, pending = call.method, call.args, dict(call.pending)
    answers: dict[int, Any] = {}
    while pending:
      refs = [p.ref for p in pending.values()]
      wait = max(0.0, min(p.deadline for p in pending.values()) - time.monotonic())
      ready, _ = self._ray.wait(refs, num_returns=1, timeout=wait)
      for i, p in list(pending.items()):
        if p.ref in ready:
          try:
            answers[i] = self._ray.get(p.ref)
            self._fresh[i] = False
            del pending[i]
          except self._ray.exceptions.RayError as e:
            pending[i] = self._replace(i, describe_failure(e), method, args)
        elif time.monotonic() >= p.deadline:
          limit = self.timeout + (self.start_timeout if self._fresh[i] else 0.0)
          pending[i] = self._replace(i, f"no answer within {limit:.0f} s", method, args)
    return [answers[i] for i in range(len(self))]

  def _submit(self, i: int, method: str, args) -> _Pending:
    limit = self.timeout + (self.start_timeout if self._fresh[i] else 0.0)
    ref = getattr(self.actors[i], method).remote(*args)
    return _Pending(ref, time.monotonic() + limit)

  def _replace(self, i: int, reason: str, method: str, args) -> _Pending:
    self.restarts.append(Restart(i, reason))
    count = len(self.restarts)
    if count > self.max_restarts:
      raise RunnerFailure(f"env runner {i} failed ({reason}); that is {count} runner "
                          f"failures, more than max_restarts={self.max_restarts} allows. "
                          "Fix the cause (see the runner logs under the run's ray/ folder) "
                          "or allow more restarts.")
    log.warning("Env runner %d %s; replacing it (restart %d of at most %d).", i, reason,
                count, self.max_restarts)
    self._kill(self.actors[i])
    self._incarnation[i] += 1
    self.actors[i] = self._spawn(i, self._incarnation[i])
    self._fresh[i] = True
    return self._submit(i, method, args)

  def _kill(self, actor) -> None:
    try:
      self._ray.kill(actor, no_restart=True)
    except Exception:  # already gone is fine
      pass

  def close(self) -> None:
    """Closes every runner's envs (best effort) and ends the actors."""
    refs = [a.close.remote() for a in self.actors]
    try:
      self._ray.wait(refs, num_returns=len(refs), timeout=10.0)
    except Exception:
      pass
    for actor in self.actors:
      self._kill(actor)
