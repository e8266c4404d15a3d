"""Where a BatchEnv's environments run: this process, or worker processes.

Both backends have one interface (start, attach, step, reset, restart_env, call, close) and
return ``Report``s; ``BatchEnv`` holds one and never needs to know which. The process
backend sends every worker its command before awaiting any reply, gathers the replies in
whatever order they come, and turns a dead or silent worker into an error naming the env
it was busy with (read from the shared ``progress`` array).
"""
from __future__ import annotations

import os
import select
import time
import weakref
from typing import Any, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode

from batchrl.cpus import usable_cpus
from batchrl.envs import launch
from batchrl.envs.batch_group import EMPTY, EnvGroup, Report, serve_group, spin_until_readable
from batchrl.envs.batch_layout import Buffers, Layout, create_block
from batchrl.envs.process import (
  ATTACH,
  CALL,
  EXCEPTION,
  RESET,
  RESTART,
  SETATTR,
  STEP,
  EnvError,
  EnvWorkerDied,
  EnvWorkerTimeout,
  WorkerHandle,
)


class LocalBackend:
  """All envs in this process, stepped in a plain loop (``num_workers=0``)."""

  num_workers = 0

  def __init__(self, constructors: Sequence,
               autoreset_mode: AutoresetMode = AutoresetMode.SAME_STEP, keep_infos: bool = True,
               int_actions: bool = True):
    self.group = EnvGroup(constructors, range(len(constructors)), 0, autoreset_mode,
                          keep_infos, int_actions)

  def start(self) -> list[tuple[int, tuple]]:
    return [(0, self.group.build())]

  def attach(self, layout: Layout) -> Buffers:
    bufs = layout.views(bytearray(layout.nbytes))
    self.group.attach(bufs)
    return bufs

  def step(self, actions: list | None):
    return [self.group.step(actions)], []

  def reset(self, targets, options):
    return [self.group.reset(targets, options)], []

  # The split-phase API (BatchEnv.step_async / step_wait): here all work happens in finish.
  def send_step(self, actions: list | None):
    return STEP, actions

  def send_reset(self, targets, options):
    return RESET, (targets, options)

  def finish(self, pending, timeout: float | None = None):
    del timeout  # nothing to wait for: the envs are stepped here, now
    return [_run_local(self.group, *pending)], []

  def restart_env(self, i: int, seed):
    return self.group.restart(i, seed)

  def send_calls(self, kind: int, requests) -> tuple:
    return kind, requests

  def finish_calls(self, pending: tuple, timeout: float | None = None) -> list:
    del timeout  # nothing to wait for: the envs are called here, now
    return _run_local_calls(self.group, *pending)

  def worker_of(self, i: int) -> int:
    return 0

  @property
  def pids(self) -> list[int]:
    return []

  def close(self) -> None:
    self.group.close()


def _release_memory(fd: int, memory) -> None:
  os.close(fd)
  try:
    memory.close()
  except BufferError:  # views still alive somewhere; the mapping goes when they do
    pass


def _split(n: int, groups: int, smallest_first: bool) -> list[list[int]]:
  """Consecutive env indices in ``groups`` parts whose sizes differ by at most one; with
  ``smallest_first`` the larger parts come last (this process, stepping part 0 itself, also
  has the batch's bookkeeping to do)."""
  sizes = [n // groups + (k < n % groups) for k in range(groups)]
  if smallest_first:
    sizes.reverse()
  ends = np.cumsum(sizes).tolist()
  return [list(range(end - size, end)) for size, end in zip(sizes, ends)]


def _run_local_calls(group: EnvGroup, kind: int, requests) -> list:
  if kind == CALL:
    return group.call(requests)
  if kind == SETATTR:
    group.set_attrs(requests)
    return [None] * len(requests)
  raise ValueError(f"unknown command kind {kind}")


def _run_local(group: EnvGroup, kind: int, body) -> Report:
  if kind == STEP:
    return group.step(body)
  if kind == RESET:
    return group.reset(*body)
  if kind == RESTART:
    return group.restart(*body)
  raise ValueError(f"unknown command kind {kind}")


class ProcessBackend:
  """Envs in ``num_workers`` groups, each in a worker process, results in shared memory.

  With ``step_in_parent`` group 0 is stepped by this process (between sending the workers
  their commands and gathering their replies), and only groups 1.. have workers.
  """

  def __init__(self, constructors: Sequence, num_workers: int, context: str, timeout: float,
               start_timeout: float, spin: float, step_in_parent: bool = False,
               autoreset_mode: AutoresetMode = AutoresetMode.SAME_STEP, keep_infos: bool = True,
               int_actions: bool = True):
    self.num_workers = num_workers
    self.autoreset_mode, self.keep_infos = autoreset_mode, keep_infos
    self.int_actions = int_actions
    self.parts = _split(len(constructors), num_workers, smallest_first=step_in_parent)
    self.owner = {i: w for w, part in enumerate(self.parts) for i in part}
    self.context, self.timeout, self.start_timeout = context, timeout, start_timeout
    self.spin, self.cpus = spin, usable_cpus()
    self.local = EnvGroup([constructors[i] for i in self.parts[0]], self.parts[0], 0,
                          autoreset_mode, keep_infos, int_actions) if step_in_parent else None
    self.remote = list(range(1 if step_in_parent else 0, num_workers))
    # Packed before any worker starts, so that a constructor that cannot be sent fails here.
    self.packed = {w: launch.pack_constructors([constructors[i] for i in self.parts[w]],
                                               self.parts[w]) for w in self.remote}
    self.workers: list[WorkerHandle | None] = [None] * num_workers
    for w in self.remote:
      self.workers[w] = self._spawn(w)
    self.fd = self.memory = self.layout = self.bufs = None
    self._release = None

  def _spawn(self, w: int) -> WorkerHandle:
    part = self.parts[w]
    args = (self.packed[w], part, w, self.spin, self.autoreset_mode.value, self.keep_infos,
            self.int_actions)
    return WorkerHandle(serve_group, args, context=self.context,
                        index=part[0], timeout=self.timeout, start_timeout=self.start_timeout)

  def start(self) -> list[tuple[int, tuple]]:
    # All workers were started in __init__, so they build their envs in parallel.
    spaces = [(0, self.local.build())] if self.local else []
    return spaces + [(self.parts[w][0], self.workers[w].wait_ready()) for w in self.remote]

  def attach(self, layout: Layout) -> Buffers:
    self.layout = layout
    self.fd, self.memory = create_block(layout.nbytes)
    self._release = weakref.finalize(self, _release_memory, self.fd, self.memory)
    self.bufs = layout.views(self.memory)
    self.bufs.progress[:] = -1
    if self.local:
      self.local.attach(self.bufs)
    for w in self.remote:
      self._attach(self.workers[w])
    return self.bufs

  def _attach(self, handle: WorkerHandle) -> None:
    rid = handle.request(ATTACH, self.layout)
    try:
      launch.send_fd(handle.conn, self.fd)
    except OSError as exc:  # the worker is gone
      raise handle.died("shared-memory attach") from exc
    handle.result(rid)

  def step(self, actions: list | None):
    """Steps all workers: every request is sent before any reply is awaited."""
    return self.finish(self.send_step(actions))

  def reset(self, targets, options):
    return self.finish(self.send_reset(targets, options))

  def send_step(self, actions: list | None):
    """Sends every worker its step; ``finish`` steps the local group and gathers replies."""
    if actions is None:
      bodies = {w: None for w in range(self.num_workers)}
    else:
      bodies = {w: [actions[i] for i in part] for w, part in enumerate(self.parts)}
    return self._send(STEP, bodies, "step")

  def send_reset(self, targets, options):
    by_worker: dict[int, list] = {}
    for i, seed in targets:
      by_worker.setdefault(self.owner[i], []).append((i, seed))
    return self._send(RESET, {w: (part, options) for w, part in by_worker.items()}, "reset")

  def restart_env(self, i: int, seed):
    """Recreates env ``i`` inside its (live) worker; raises EnvWorkerDied/Timeout."""
    reports, failures = self._command(RESTART, {self.owner[i]: (i, seed)}, "restart")
    if failures:
      raise failures[0][1]
    return reports[0]

  def _command(self, kind: int, bodies: dict[int, Any], during: str):
    """Sends ``kind`` with each worker's body, runs it on the local group, gathers replies."""
    return self.finish(self._send(kind, bodies, during))

  def _send(self, kind: int, bodies: dict[int, Any], during: str) -> tuple:
    """Sends each worker its body; returns what ``finish`` needs."""
    rids, lost = {}, []
    for w, body in bodies.items():
      if self.workers[w] is None:
        continue
      try:
        rids[w] = self.workers[w].request(kind, body)
      except EnvWorkerDied as exc:  # found dead while sending
        lost.append((w, self._blame(w, exc, EnvWorkerDied, exitcode=exc.exitcode)))
    return kind, bodies, during, rids, lost

  def finish(self, pending: tuple, timeout: float | None = None):
    """Runs the command on the local group, then gathers the workers' replies (waiting at
    most ``timeout`` seconds, the constructor's by default): (reports, failures)."""
    kind, bodies, during, rids, lost = pending
    local = []
    if self.local and 0 in bodies:
      try:
        local.append(_run_local(self.local, kind, bodies[0]))
      except BaseException:  # Ctrl-C while stepping here: the workers' answers are stale
        for w, rid in rids.items():
          self.workers[w].abandon(rid)
        raise
    reports, failures = self._gather(rids, during, self.timeout if timeout is None else timeout)
    return local + reports, lost + failures

  def send_calls(self, kind: int, requests) -> tuple:
    """Sends each worker its share of CALL or SETATTR ``requests`` ((env index, ...) each);
    ``finish_calls`` runs the local group's and gathers the replies."""
    by_worker: dict[int, list] = {}
    for request in requests:
      by_worker.setdefault(self.owner[request[0]], []).append(request)
    rids = {w: self.workers[w].request(kind, part) for w, part in by_worker.items()
            if self.workers[w] is not None}
    return kind, by_worker, rids

  def finish_calls(self, pending: tuple, timeout: float | None = None) -> list:
    """The results in request order. Every reply is gathered before the first error is
    raised: no reply is left pending to be mistaken for a later one's."""
    kind, by_worker, rids = pending
    results, errors = {}, []
    if self.local and 0 in by_worker:
      try:
        results[0] = _run_local_calls(self.local, kind, by_worker[0])
      except Exception as exc:
        errors.append(exc)
    for w, rid in rids.items():
      try:
        results[w] = self.workers[w].result(rid, timeout)
      except EnvError as exc:
        errors.append(exc)
    if errors:
      raise errors[0]
    return [value for w in by_worker for value in results[w] or [None] * len(by_worker[w])]

  def respawn(self, w: int) -> None:
    """Replaces worker ``w`` (dead, hung or distrusted) with a new one hosting the same envs."""
    self.workers[w].kill()
    self.workers[w] = handle = self._spawn(w)
    handle.wait_ready()
    self._attach(handle)

  def worker_of(self, i: int) -> int:
    return self.owner[i]

  @property
  def pids(self) -> list[int]:
    return [self.workers[w].pid for w in self.remote]

  def _gather(self, rids: dict[int, int], during: str, timeout: float):
    """Collects one reply per worker in ``rids``, in whatever order they come.

    Returns (reports, failures): failures are (worker, EnvWorkerDied | EnvWorkerTimeout)
    for workers that died or did not answer in time (those are killed).
    """
    replies, failures, waiting = {}, [], {}
    poller = select.poll()
    for w in rids:
      fd = self.workers[w].conn.fileno()
      poller.register(fd, select.POLLIN)
      waiting[fd] = w
    deadline = time.monotonic() + timeout
    try:
      while waiting:
        # Poll only while fewer workers are still busy than there are CPUs: polling with
        # every CPU taken by a stepping worker would slow that worker down. Until then
        # sleep; the wake-up of the first replies overlaps the last worker's stepping.
        if self.spin > 0 and len(waiting) < self.cpus:
          spin_until_readable(poller, self.spin)
        ready = poller.poll(max(0.0, deadline - time.monotonic()) * 1000.0)
        if not ready:
          break
        for fd, _ in ready:
          w = waiting[fd]
          try:
            reply = self.workers[w].take(rids[w])
          except EnvWorkerDied as exc:
            failures.append((w, self._blame(w, exc, EnvWorkerDied, exitcode=exc.exitcode)))
          else:
            if reply is None:
              continue  # a stale reply was dropped; keep waiting for this worker
            replies[w] = self._as_report(w, reply)
          poller.unregister(fd)
          del waiting[fd]
    finally:
      for fd, w in waiting.items():  # timed out, or interrupted (Ctrl-C): answers are stale
        self.workers[w].abandon(rids[w])
    for w in waiting.values():
      error = self.workers[w].timed_out(during, timeout)
      self.workers[w].kill()
      failures.append((w, self._blame(w, error, EnvWorkerTimeout, timeout=timeout)))
    return [replies[w] for w in sorted(replies)], failures  # in env order

  def _as_report(self, w: int, reply) -> Report:
    kind, body = reply
    if kind == EXCEPTION:  # the worker's loop itself failed (e.g. an unpicklable info)
      index = body.index if body.index is not None else self.parts[w][0]
      return Report(errors=[(index, body._replace(index=index))])
    value = None if body is None else body[0]
    if value is None:
      return EMPTY
    return value if isinstance(value, Report) else Report(*value)

  def _blame(self, w: int, error: EnvError, cls, **extra) -> EnvError:
    """Re-issues a worker failure naming the env it was busy with (from shared memory)."""
    busy = int(self.bufs.progress[w]) if self.bufs is not None else -1
    index = busy if busy in self.owner and self.owner[busy] == w else self.parts[w][0]
    hosted = f"worker {w} hosts environments {self.parts[w][0]}..{self.parts[w][-1]}"
    return cls(f"environment {index}: {error.args[0].split(': ', 1)[-1]} ({hosted})",
               index=index, **extra)

  def close(self) -> None:
    for w in self.remote:  # first tell everyone, so they stop in parallel
      self.workers[w].request_close()
    if self.local:
      self.local.close()
    for w in self.remote:
      self.workers[w].close(grace=2.0)
    self.bufs = None
    if self._release is not None:
      self._release()
