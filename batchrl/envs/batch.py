"""BatchEnv: N environments stepped as one, with the Gymnasium vector API.

Two modes, one code path for the environments themselves (``_EnvGroup``):

- ``num_workers=0``: every env in this process, stepped in a plain loop.
- ``num_workers=W``: W worker processes, each hosting about N/W envs. Observations,
  rewards, terminated/truncated and final observations live in ONE shared-memory block
  that workers write and the parent reads through numpy views; actions are written there
  by the parent. A step costs one tiny pipe message per worker (its request id) and one
  reply (empty unless some env returned infos, ended an episode or raised). Commands go to
  every worker before any reply is awaited. A waiting process polls its pipe for up to
  ``spin`` seconds before it sleeps (see ``spin_until_readable`` for why).

Auto-reset is same-step: when an env ends an episode, the observation returned is the first
one of the next episode and ``infos["final_obs"]`` ([N, ...], valid where
``infos["_final_obs"]``) holds the last one, for bootstrapping.

    env = BatchEnv.from_id("CartPole-v1", num_envs=8, num_workers=2, seed=0)
    obs, infos = env.reset()
    obs, rewards, terminated, truncated, infos = env.step(actions)   # actions [8]
    env.close()
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import pickle
import select
import time
import weakref
from multiprocessing import shared_memory
from typing import Any, Callable, NamedTuple, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from batchrl.envs import process
from batchrl.envs.process import (ATTACH, CALL, CLOSE, EXCEPTION, HEADER, READY, RESET,
                                  RESTART, RESULT, STEP, EnvClosedError, EnvError,
                                  EnvWorkerDied, EnvWorkerError, EnvWorkerTimeout,
                                  ErrorRecord, WorkerHandle)

_FLAT_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                gym.spaces.MultiBinary)
# Which numpy dtype kinds an action may have, by the kind of the space's dtype. Floats are
# refused for integer spaces: silently truncating 1.7 to 1 hides bugs.
_ACTION_KINDS = {"f": "fiu", "i": "iu", "u": "iu", "b": "biu"}


@dataclasses.dataclass(frozen=True, init=False)
class RestartPolicy:
  """What to do when an environment fails: recreate it, reset it, and go on.

  The failed env's step is reported with ``truncated=True``, reward 0 and
  ``infos["env_restarted"][i]=True`` (its episode was cut, never merged with the next one);
  the observation returned is the fresh env's first observation.

  Attributes:
    max_restarts: how many times any one environment may be recreated; the failure after
      that raises the original error (with a note saying the cap was reached).
    on_error: restart when the env raises an exception in step or reset.
    on_death: restart when its worker process dies (the worker and all its envs are
      recreated; every one of those envs counts a restart).
    on_timeout: restart when its worker does not answer within the timeout (it is killed,
      then recreated with all its envs).
  """

  max_restarts: int = 3
  on_error: bool = True
  on_death: bool = True
  on_timeout: bool = True

  # Not batchrl.configs.configclass: importing batchrl.configs loads the agents (and JAX),
  # which every worker process would then pay for at start-up.
  def __init__(self, **kwargs):
    names = [f.name for f in dataclasses.fields(self)]
    for key, value in kwargs.items():
      if key not in names:
        close = difflib.get_close_matches(key, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"unknown RestartPolicy field {key!r}; {hint}valid: {', '.join(names)}")
    for f in dataclasses.fields(self):
      object.__setattr__(self, f.name, kwargs.get(f.name, f.default))
    self._check()

  def _check(self) -> None:
    if type(self.max_restarts) is not int or self.max_restarts < 0:
      raise ValueError(f"RestartPolicy.max_restarts must be an int >= 0, got {self.max_restarts!r}")
    for name in ("on_error", "on_death", "on_timeout"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"RestartPolicy.{name} must be True or False, got {getattr(self, name)!r}")

  def allows(self, error: EnvError) -> bool:
    if isinstance(error, EnvWorkerTimeout):
      return self.on_timeout
    if isinstance(error, EnvWorkerDied):
      return self.on_death
    return self.on_error


# ---------------------------------------------------------------------------------------
# Memory layout of the batch arrays.


def _item_shape_dtype(space: gym.Space) -> tuple[tuple[int, ...], np.dtype]:
  if isinstance(space, gym.spaces.Discrete):
    return (), np.dtype(space.dtype)
  return tuple(space.shape), np.dtype(space.dtype)


@dataclasses.dataclass(frozen=True)
class _Layout:
  """Where each batch array lives inside one block of bytes: (name, shape, dtype, offset)."""

  fields: tuple[tuple[str, tuple[int, ...], str, int], ...]
  nbytes: int

  @classmethod
  def build(cls, num_envs: int, num_slots: int, obs_space, act_space) -> "_Layout":
    specs = [("rewards", (num_envs,), np.dtype(np.float64)),
             ("terminated", (num_envs,), np.dtype(np.bool_)),
             ("truncated", (num_envs,), np.dtype(np.bool_)),
             ("progress", (num_slots,), np.dtype(np.int64))]
    if isinstance(obs_space, _FLAT_SPACES):
      shape, dtype = _item_shape_dtype(obs_space)
      specs += [("obs", (num_envs, *shape), dtype), ("final_obs", (num_envs, *shape), dtype)]
    if isinstance(act_space, _FLAT_SPACES):
      shape, dtype = _item_shape_dtype(act_space)
      specs.append(("actions", (num_envs, *shape), dtype))
    fields, offset = [], 0
    for name, shape, dtype in specs:
      offset = -(-offset // 64) * 64  # cache-line aligned
      fields.append((name, shape, dtype.str, offset))
      offset += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return cls(tuple(fields), max(offset, 1))

  def views(self, buffer) -> "_Buffers":
    arrays = {name: np.ndarray(shape, np.dtype(dtype), buffer=buffer, offset=offset)
              for name, shape, dtype, offset in self.fields}
    return _Buffers(arrays)


class _Buffers:
  """Numpy views of the batch arrays; ``obs``/``final_obs``/``actions`` are None for spaces
  without a fixed-size array form (Dict, Tuple, ...), which travel pickled instead."""

  __slots__ = ("obs", "final_obs", "actions", "rewards", "terminated", "truncated", "progress")

  def __init__(self, arrays: dict[str, np.ndarray]):
    for name in self.__slots__:
      setattr(self, name, arrays.get(name))


# ---------------------------------------------------------------------------------------
# The environments of one worker (or of an in-process BatchEnv).


class _Report(NamedTuple):
  """What a command produced beyond the shared arrays (None where there is nothing)."""

  infos: dict | None = None  # info columns (see _info_columns)
  info_block: tuple | None = None  # or all infos as one record block (see _info_block)
  ended: list | None = None  # envs whose episode ended this step (final obs were written)
  final_infos: dict | None = None  # their final infos, as columns
  errors: list | None = None  # (env index, ErrorRecord)
  loose_obs: dict | None = None  # env index -> obs, for observation spaces not in shared memory
  loose_final: dict | None = None


_EMPTY = _Report()


class _EnvGroup:
  """Builds, steps, auto-resets, resets and restarts a list of envs, writing into buffers.

  Exceptions raised by an env are caught and reported per env index, so one failing env
  never hides the results of the others.
  """

  def __init__(self, constructors: Sequence, indices: Sequence[int], slot: int):
    self.constructors = list(constructors)
    self.indices = [int(i) for i in indices]
    self.local = {i: j for j, i in enumerate(self.indices)}
    self.slot = slot
    self.envs: list[Any] = [None] * len(self.indices)
    self.bufs: _Buffers | None = None
    self.keepalive = None  # the shared memory the views point into
    self.spaces = None
    self.discrete_actions = False
    # Observations of spaces that are not in shared memory, handed over with each reply.
    self._loose_obs: dict = {}
    self._loose_final: dict = {}
    self._record_types: dict = {}  # info layout -> record dtype, see _info_block

  def build(self) -> tuple[gym.Space, gym.Space]:
    """Constructs every env; raises EnvWorkerError naming the env that failed."""
    for j, i in enumerate(self.indices):
      try:
        self.envs[j] = process.make_env(self.constructors[j])
        spaces = (self.envs[j].observation_space, self.envs[j].action_space)
      except Exception as exc:
        raise ErrorRecord.current(i).to_error(i, "construction") from exc
      if self.spaces is None:
        self.spaces = spaces
      elif spaces != self.spaces:
        raise ValueError(_space_mismatch(i, spaces, self.indices[0], self.spaces))
    self.discrete_actions = isinstance(self.spaces[1], gym.spaces.Discrete)
    return self.spaces

  def attach(self, bufs: _Buffers, keepalive=None) -> None:
    self.bufs, self.keepalive = bufs, keepalive

  def step(self, actions: list | None = None) -> _Report:
    """Steps every env once (actions from the shared buffer, or ``actions`` in order)."""
    bufs, progress, slot = self.bufs, self.bufs.progress, self.slot
    buffered, discrete = bufs.actions, self.discrete_actions
    infos = finals = errors = None
    for j, i in enumerate(self.indices):
      progress[slot] = i  # lets the parent name the env if this process dies or hangs
      if actions is not None:
        action = actions[j]
      else:  # a copy: an env may keep its action, and the buffer changes next step
        action = int(buffered[i]) if discrete else buffered[i].copy()
      try:
        env = self.envs[j]
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
          final_obs, final_info = obs, info
          obs, info = env.reset()
          self._put_final(i, final_obs)
          finals = finals or []
          finals.append((i, final_info))
        self._put_obs(i, obs)
      except Exception:
        errors = errors or []
        errors.append((i, ErrorRecord.current(i)))
        continue
      bufs.rewards[i], bufs.terminated[i], bufs.truncated[i] = reward, terminated, truncated
      if info:
        infos = infos or []
        infos.append((i, info))
    return self._report(infos, finals, errors)

  def reset(self, targets: Sequence[tuple[int, int | None]], options: dict | None) -> _Report:
    """Resets the envs in ``targets`` ((env index, seed) pairs)."""
    infos = errors = None
    for i, seed in targets:
      self.bufs.progress[self.slot] = i
      try:
        obs, info = self.envs[self.local[i]].reset(seed=seed, options=options)
        self._put_obs(i, obs)
      except Exception:
        errors = errors or []
        errors.append((i, ErrorRecord.current(i)))
        continue
      if info:
        infos = infos or []
        infos.append((i, info))
    return self._report(infos, None, errors)

  def restart(self, i: int, seed: int | None) -> _Report:
    """Replaces env ``i`` with a freshly constructed one and resets it."""
    j = self.local[i]
    old, self.envs[j] = self.envs[j], None
    _close_quietly(old)
    self.bufs.progress[self.slot] = i
    try:
      env = process.make_env(self.constructors[j])
      spaces = (env.observation_space, env.action_space)
      if spaces != self.spaces:
        raise ValueError(_space_mismatch(i, spaces, self.indices[0], self.spaces))
      self.envs[j] = env
    except Exception:
      return self._report(None, None, [(i, ErrorRecord.current(i))])
    return self.reset([(i, seed)], None)

  def call(self, requests: Sequence[tuple[int, str, tuple | None, dict]]) -> list:
    """``getattr(env, name)(*args, **kwargs)`` per request; ``args=None`` reads the attribute."""
    results = []
    for i, name, args, kwargs in requests:
      value = getattr(self.envs[self.local[i]], name)
      results.append(value if args is None else value(*args, **kwargs))
    return results

  def _put_obs(self, i: int, obs) -> None:
    if self.bufs.obs is not None:
      self.bufs.obs[i] = obs
    else:
      self._loose_obs[i] = obs

  def _put_final(self, i: int, obs) -> None:
    if self.bufs.final_obs is not None:
      self.bufs.final_obs[i] = obs
    else:
      self._loose_final[i] = obs

  def _report(self, infos, finals, errors) -> _Report:
    loose_obs = loose_final = None
    if self.bufs.obs is None:  # hand over (and forget) the observations of this command
      loose_obs, loose_final = self._loose_obs, self._loose_final
      self._loose_obs, self._loose_final = {}, {}
    if infos is None and finals is None and errors is None and loose_obs is None:
      return _EMPTY
    # Columns are built here, in the worker, where the work runs in parallel.
    block = _info_block(infos, self._record_types) if infos and len(infos) == len(
        self.indices) else None
    return _Report(_info_columns(infos) if infos and block is None else None, block,
                   [i for i, _ in finals] if finals else None,
                   _info_columns(finals) if finals else None,
                   errors, loose_obs, loose_final)

  def close(self) -> None:
    for env in self.envs:
      _close_quietly(env)
    self.envs = [None] * len(self.indices)
    self.bufs = None  # drop the views before the memory they point into is closed
    if self.keepalive is not None:
      try:
        self.keepalive.close()
      except BufferError:  # a view is still referenced; the OS unmaps at process exit
        pass
      self.keepalive = None


def _space_mismatch(i, spaces, first, expected) -> str:
  return (f"environment {i} has observation/action spaces {spaces[0]} / {spaces[1]}, but "
          f"environment {first} has {expected[0]} / {expected[1]}; all environments of a "
          "BatchEnv must share their spaces")


def _close_quietly(env) -> None:
  if env is None:
    return
  try:
    env.close()
  except Exception:  # closing is best effort; a broken env must not block the others
    pass


# ---------------------------------------------------------------------------------------
# Worker process.


def spin_until_readable(poller, seconds: float) -> bool:
  """Polls without sleeping for up to ``seconds``; True once the watched pipe is readable.

  Why: waking a process that sleeps in read() costs a scheduler round trip (tens of µs on
  a VM), as much as a cheap env step, and the woken process then runs cold: on a 2-vCPU
  VM, HalfCheetah steps taken right after a 200 µs sleep cost ~50% more (measured). A
  process that is still polling when its message lands skips both, and the writer's
  write() is cheaper too. ``sched_yield`` keeps the polling polite: any runnable process
  on this core goes first.
  """
  deadline = time.perf_counter() + seconds
  while not poller.poll(0):
    if time.perf_counter() > deadline:
      return False
    os.sched_yield()
  return True


def _usable_cpus() -> int:
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not on Linux
    return os.cpu_count() or 1


def _serve_group(conn, constructors, indices, slot, spin: float = 0.0) -> None:
  """Worker main: build the envs, report their spaces, then answer commands until CLOSE."""
  process.prepare_worker()
  group = _EnvGroup(constructors, indices, slot)
  try:
    spaces = group.build()
  except Exception as exc:
    index = getattr(exc, "index", None)
    record = ErrorRecord.current(index)
    if isinstance(exc, EnvWorkerError):  # keep the env's own traceback, not the wrapper's
      record = ErrorRecord(exc.exc_type, str(exc.__cause__), exc.traceback, index)
    conn.send_bytes(process.encode(EXCEPTION, 0, record))
    group.close()
    return
  try:
    conn.send_bytes(process.encode(READY, 0, spaces))
    _serve_commands(conn, group, spin)
  except (EOFError, OSError):  # the parent is gone (or closed the pipe): nothing to answer
    pass
  finally:
    group.close()


def _serve_commands(conn, group: _EnvGroup, spin: float) -> None:
  unpack, size = HEADER.unpack_from, HEADER.size
  poller = select.poll()
  poller.register(conn.fileno(), select.POLLIN)
  while True:
    if spin > 0:
      spin_until_readable(poller, spin)
    data = conn.recv_bytes()  # EOFError when the parent is gone: handled by the caller
    kind, rid = unpack(data)
    if kind == STEP:  # the hot path: no body unless actions are not in shared memory
      report = group.step(pickle.loads(data[size:]) if len(data) > size else None)
      if report is _EMPTY:
        process.send_bytes(conn, HEADER.pack(RESULT, rid))
      else:  # a plain tuple: cheaper to unpickle than the NamedTuple
        process.send_result(conn, rid, tuple(report))
      continue
    if kind == CLOSE:
      conn.send_bytes(HEADER.pack(RESULT, rid))
      return
    try:
      value = _group_command(group, kind, pickle.loads(data[size:]))
    except Exception:
      process.send_exception(conn, rid)
      continue
    process.send_result(conn, rid, value)


def _group_command(group: _EnvGroup, kind: int, body):
  if kind == RESET:
    return group.reset(*body)
  if kind == RESTART:
    return group.restart(*body)
  if kind == CALL:
    return group.call(body)
  if kind == ATTACH:
    name, layout = body
    memory = shared_memory.SharedMemory(name=name)
    group.attach(layout.views(memory.buf), memory)
    return None
  raise ValueError(f"unknown command kind {kind}")


# ---------------------------------------------------------------------------------------
# Backends: where the envs run. Same interface; BatchEnv holds one.


class _LocalBackend:
  """All envs in this process, stepped in a plain loop (``num_workers=0``)."""

  num_workers = 0

  def __init__(self, constructors: Sequence):
    self.group = _EnvGroup(constructors, range(len(constructors)), slot=0)

  def start(self) -> list[tuple[int, tuple]]:
    return [(0, self.group.build())]

  def attach(self, layout: _Layout) -> _Buffers:
    bufs = layout.views(bytearray(layout.nbytes))
    self.group.attach(bufs)
    return bufs

  def step(self, actions: list | None):
    return [self.group.step(actions)], []

  def reset(self, targets, options):
    return [self.group.reset(targets, options)], []

  def restart_env(self, i: int, seed):
    return self.group.restart(i, seed)

  def call(self, requests):
    return self.group.call(requests)

  def worker_of(self, i: int) -> int:
    return 0

  @property
  def pids(self) -> list[int]:
    return []

  def close(self) -> None:
    self.group.close()


def _release_memory(memory: shared_memory.SharedMemory) -> None:
  try:
    memory.unlink()
  except FileNotFoundError:
    pass
  try:
    memory.close()
  except BufferError:  # views still alive somewhere; the mapping goes when they do
    pass


class _ProcessBackend:
  """Envs in ``num_workers`` processes, results in shared memory."""

  def __init__(self, constructors: Sequence, num_workers: int, context: str, timeout: float,
               start_timeout: float, spin: float):
    self.constructors = list(constructors)
    self.num_workers = num_workers
    self.parts = [list(map(int, part)) for part in
                  np.array_split(np.arange(len(constructors)), num_workers)]
    self.owner = {i: w for w, part in enumerate(self.parts) for i in part}
    self.context, self.timeout, self.start_timeout = context, timeout, start_timeout
    self.spin, self.cpus = spin, _usable_cpus()
    self.workers: list[WorkerHandle] = [self._spawn(w) for w in range(num_workers)]
    self.memory = self.layout = self.bufs = None
    self._release = None

  def _spawn(self, w: int) -> WorkerHandle:
    part = self.parts[w]
    return WorkerHandle(
        _serve_group, ([self.constructors[i] for i in part], part, w, self.spin),
        context=self.context,
        index=part[0], timeout=self.timeout, start_timeout=self.start_timeout,
        name=f"batchrl-worker-{w}")

  def start(self) -> list[tuple[int, tuple]]:
    # All workers were started in __init__, so they build their envs in parallel.
    return [(self.parts[w][0], handle.wait_ready()) for w, handle in enumerate(self.workers)]

  def attach(self, layout: _Layout) -> _Buffers:
    self.layout = layout
    self.memory = shared_memory.SharedMemory(create=True, size=layout.nbytes)
    self._release = weakref.finalize(self, _release_memory, self.memory)
    self.bufs = layout.views(self.memory.buf)
    self.bufs.progress[:] = -1
    for handle in self.workers:
      handle.result(handle.request(ATTACH, (self.memory.name, layout)))
    return self.bufs

  def step(self, actions: list | None):
    """Steps all workers: every request is sent before any reply is awaited."""
    if actions is None:
      bodies = {w: None for w in range(self.num_workers)}
    else:
      bodies = {w: [actions[i] for i in part] for w, part in enumerate(self.parts)}
    return self._command(STEP, bodies, "step")

  def reset(self, targets, options):
    by_worker: dict[int, list] = {}
    for i, seed in targets:
      by_worker.setdefault(self.owner[i], []).append((i, seed))
    return self._command(RESET, {w: (part, options) for w, part in by_worker.items()}, "reset")

  def restart_env(self, i: int, seed):
    """Recreates env ``i`` inside its (live) worker; raises EnvWorkerDied/Timeout."""
    reports, failures = self._command(RESTART, {self.owner[i]: (i, seed)}, "restart")
    if failures:
      raise failures[0][1]
    return reports[0]

  def _command(self, kind: int, bodies: dict[int, Any], during: str):
    """Sends ``kind`` with each worker's body, then gathers the replies."""
    rids, lost = {}, []
    for w, body in bodies.items():
      try:
        rids[w] = self.workers[w].request(kind, body)
      except EnvWorkerDied as exc:  # found dead while sending
        lost.append((w, self._blame(w, exc, EnvWorkerDied, exitcode=exc.exitcode)))
    reports, failures = self._gather(rids, during)
    return reports, lost + failures

  def call(self, requests):
    by_worker: dict[int, list] = {}
    for request in requests:
      by_worker.setdefault(self.owner[request[0]], []).append(request)
    rids = {w: self.workers[w].request(CALL, part) for w, part in by_worker.items()}
    results = {w: self.workers[w].result(rid) for w, rid in rids.items()}
    return [value for w in by_worker for value in results[w]]

  def respawn(self, w: int) -> None:
    """Replaces worker ``w`` (dead, hung or distrusted) with a new one hosting the same envs."""
    self.workers[w].kill()
    self.workers[w] = handle = self._spawn(w)
    handle.wait_ready()
    handle.result(handle.request(ATTACH, (self.memory.name, self.layout)))

  def worker_of(self, i: int) -> int:
    return self.owner[i]

  @property
  def pids(self) -> list[int]:
    return [handle.pid for handle in self.workers]

  def _gather(self, rids: dict[int, int], during: str):
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
    deadline = time.monotonic() + self.timeout
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
      error = self.workers[w].timed_out(during, self.timeout)
      self.workers[w].kill()
      failures.append((w, self._blame(w, error, EnvWorkerTimeout, timeout=self.timeout)))
    return [replies[w] for w in sorted(replies)], failures  # in env order

  def _as_report(self, w: int, reply) -> _Report:
    kind, body = reply
    if kind == EXCEPTION:  # the worker's loop itself failed (e.g. an unpicklable info)
      index = body.index if body.index is not None else self.parts[w][0]
      return _Report(errors=[(index, body._replace(index=index))])
    value = None if body is None else body[0]
    if value is None:
      return _EMPTY
    return value if isinstance(value, _Report) else _Report(*value)

  def _blame(self, w: int, error: EnvError, cls, **extra) -> EnvError:
    """Re-issues a worker failure naming the env it was busy with (from shared memory)."""
    busy = int(self.bufs.progress[w]) if self.bufs is not None else -1
    index = busy if busy in self.owner and self.owner[busy] == w else self.parts[w][0]
    hosted = f"worker {w} hosts environments {self.parts[w][0]}..{self.parts[w][-1]}"
    return cls(f"environment {index}: {error.args[0].split(': ', 1)[-1]} ({hosted})",
               index=index, **extra)

  def close(self) -> None:
    for handle in self.workers:  # first tell everyone, so they stop in parallel
      handle.request_close()
    for handle in self.workers:
      handle.close(grace=2.0)
    self.bufs = None
    if self._release is not None:
      self._release()


# ---------------------------------------------------------------------------------------
# Seeds, actions and infos.


def _derived_seeds(seed: int, n: int) -> list[int]:
  """Distinct, reproducible per-env seeds from one seed."""
  return [int(child.generate_state(1, np.uint64)[0])
          for child in np.random.SeedSequence(seed).spawn(n)]


def _check_spin(spin) -> float:
  if isinstance(spin, bool) or not isinstance(spin, (int, float)) or not 0 <= spin <= 1:
    raise ValueError(f"spin must be a number of seconds in [0, 1] (0: always sleep), got {spin!r}")
  return float(spin)


def _check_seed(seed, name: str = "seed") -> int | None:
  if seed is None:
    return None
  if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
    raise ValueError(f"{name} must be None or an int >= 0, got {seed!r}")
  return int(seed)


def _check_actions(actions, space: gym.Space, n: int) -> np.ndarray:
  """The actions as an array of the space's shape and dtype, or a ValueError saying why not."""
  arr = np.asarray(actions)
  shape, dtype = _item_shape_dtype(space)
  if arr.shape != (n, *shape):
    if arr.ndim == 0 or arr.shape[0] != n:
      raise ValueError(f"expected actions for {n} environments, an array of shape "
                       f"{(n, *shape)}, got shape {arr.shape}")
    raise ValueError(f"each action must have shape {shape} for action space {space}, got "
                     f"actions of shape {arr.shape} (per env {arr.shape[1:]})")
  if arr.dtype.kind not in _ACTION_KINDS.get(dtype.kind, dtype.kind):
    raise ValueError(f"actions of dtype {arr.dtype} do not fit action space {space} (dtype "
                     f"{dtype}); use an array of kind {_ACTION_KINDS.get(dtype.kind)!r}")
  if isinstance(space, gym.spaces.Discrete):
    low, high = arr.min(), arr.max()
    if low < space.start or high >= space.start + space.n:
      raise ValueError(f"discrete actions must lie in [{space.start}, {space.start + space.n - 1}]"
                       f" for {space}, got values in [{low}, {high}]")
  return arr


def _info_columns(pairs: list) -> dict:
  """[(env index, info dict)] -> {key: column}, cheap to pickle; merged by ``_merge_infos``.

  A column is (env indices, dtype, item shape, raw bytes) when every value is a number or
  a numeric array of one shape (the common case: pickling numpy scalars one by one is
  slow), else (env indices, None, None, values).
  """
  grouped: dict[str, tuple[list, list]] = {}
  for i, info in pairs:
    for key, value in info.items():
      column = grouped.get(key)
      if column is None:
        grouped[key] = column = ([], [])
      column[0].append(i)
      column[1].append(value)
  return {key: _column(index, values) for key, (index, values) in grouped.items()}


def _column(index: list, values: list) -> tuple:
  if not isinstance(values[0], (dict, str, bytes)):
    try:
      arr = np.asarray(values)
    except ValueError:  # ragged arrays
      arr = None
    if arr is not None and arr.dtype.kind in "biuf" and arr.shape[:1] == (len(values),):
      return index, arr.dtype.str, arr.shape[1:], arr.tobytes()
  return index, None, None, values


_SCALARS = (float, int, bool, np.floating, np.integer, np.bool_)


def _info_block(pairs: list, cache: dict) -> tuple | None:
  """All infos as ONE record array, when every env returned the same keys holding scalars.

  The usual case (MuJoCo envs return a few floats every step), and the cheapest to send and
  to merge: one ``np.array`` call here, one ``np.frombuffer`` in the parent. None otherwise.
  """
  first = pairs[0][1]
  keys = tuple(first)
  layout = (keys, tuple(type(value) for value in first.values()))
  dtype = cache.get(layout)
  if dtype is None:
    if not all(isinstance(value, _SCALARS) for value in first.values()):
      return None
    dtype = cache[layout] = np.dtype([(key, np.asarray(value).dtype)
                                      for key, value in first.items()])
  rows = []
  for _, info in pairs:
    if tuple(info) != keys:
      return None
    rows.append(tuple(info.values()))
  try:
    records = np.array(rows, dtype=dtype)
  except (TypeError, ValueError):  # e.g. a later value of another type
    return None
  return [i for i, _ in pairs], tuple(dtype.descr), records.tobytes()


@functools.lru_cache(maxsize=64)
def _record_dtype(descr: tuple) -> np.dtype:
  return np.dtype(list(descr))


def _block_columns(block: tuple) -> dict:
  index, descr, data = block
  records = np.frombuffer(data, _record_dtype(descr))
  return {name: _column(index, list(records[name])) for name in records.dtype.names}


def _collect_infos(reports: list[_Report], n: int) -> dict:
  """The vector infos of one command, from the reports of all workers (in env order)."""
  blocks = [report.info_block for report in reports if report.info_block]
  column_sets = [report.infos for report in reports if report.infos]
  if blocks and not column_sets:
    columns = [(index, descr) for index, descr, _ in blocks]
    if len({descr for _, descr in columns}) == 1 and _covers_all(columns, n):
      records = np.frombuffer(bytearray(b"".join(data for _, _, data in blocks)),
                              _record_dtype(blocks[0][1]))
      out = {}
      for name in records.dtype.names:
        out[name], out["_" + name] = records[name], np.ones(n, np.bool_)
      return out
  column_sets += [_block_columns(block) for block in blocks]
  return _merge_infos(column_sets, n) if column_sets else {}


def _column_values(column: tuple):
  index, dtype, shape, payload = column
  if dtype is None:
    return payload
  return np.frombuffer(payload, dtype).reshape(len(index), *shape)


def _merge_infos(column_sets: list[dict], n: int) -> dict:
  """Info columns of several workers -> gymnasium vector infos: ``key`` array + ``_key`` mask."""
  parts: dict[str, list] = {}
  for columns in column_sets:
    for key, column in columns.items():
      parts.setdefault(key, []).append(column)
  out = {}
  for key, columns in parts.items():
    if _covers_all(columns, n):  # the common case: every env returned this key
      value = _joined(columns, n)
      out[key] = _merge_column(columns, n) if value is None else value
      out["_" + key] = np.ones(n, np.bool_)
      continue
    mask = np.zeros(n, np.bool_)
    for column in columns:
      mask[column[0]] = True
    out[key], out["_" + key] = _merge_column(columns, n), mask
  return out


def _covers_all(columns: list[tuple], n: int) -> bool:
  """Whether the columns (in env order, each increasing) hold envs 0..n-1 exactly."""
  offset = 0
  for column in columns:
    index = column[0]
    if index[0] != offset or index[-1] != offset + len(index) - 1:
      return False
    offset += len(index)
  return offset == n


def _joined(columns: list[tuple], n: int) -> np.ndarray | None:
  """Numeric columns of one dtype and shape covering all envs: one buffer, no scatter."""
  first = columns[0]
  if first[1] is None or any(column[1:3] != first[1:3] for column in columns):
    return None
  data = bytearray(b"".join(column[3] for column in columns))  # bytearray: writable result
  return np.frombuffer(data, first[1]).reshape(n, *first[2])


def _merge_column(columns: list[tuple], n: int):
  if all(column[1] is not None for column in columns):
    arrays = [_column_values(column) for column in columns]
    if len({a.shape[1:] for a in arrays}) == 1:
      out = np.zeros((n, *arrays[0].shape[1:]), np.result_type(*arrays))
      for column, values in zip(columns, arrays):
        out[column[0]] = values
      return out
  pairs = [(i, value) for column in columns for i, value in zip(column[0], _column_values(column))]
  if all(isinstance(value, dict) for _, value in pairs):  # nested infos, as gymnasium does
    return _merge_infos([_info_columns(pairs)], n)
  out = np.full(n, None, dtype=object)
  for i, value in pairs:
    out[i] = value
  return out


# ---------------------------------------------------------------------------------------
# The batch environment.


class BatchEnv(VectorEnv):
  """N environments stepped as one; Gymnasium vector API with same-step auto-reset.

  Args:
    env_fns: one constructor per env: zero-argument callables returning an env, or env id
      strings. With workers they must be picklable (module-level functions or
      ``functools.partial`` of them), since spawned processes receive them by reference.
    num_workers: 0 to step in this process; W > 0 for W worker processes hosting N/W envs each.
    seed: per-env seeds are derived with ``SeedSequence(seed).spawn(N)`` and used by the
      first ``reset()``; the same seed gives the same trajectories in either mode.
    restart: a RestartPolicy (or True for the default one) to recreate failing envs; None
      raises their errors (EnvWorkerError / EnvWorkerDied / EnvWorkerTimeout, naming the env).
    timeout: seconds to wait for the workers' answer to any one command.
    context: 'spawn' or 'forkserver' (never fork: JAX may be loaded here).
    start_timeout: seconds allowed for workers to start and build their envs.
    spin: seconds a waiting worker (and the parent, while a CPU is free) polls before
      sleeping. Waking a sleeping process is slow on VMs, and it then steps its envs
      slower for a while (cold caches). Polling yields the CPU to any other runnable
      process; 0 always sleeps (use it when the time between steps is long, e.g. a slow
      learner, and idle CPU matters).
  """

  metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

  def __init__(self, env_fns: Sequence[Callable | str], num_workers: int = 0, seed: int | None = None,
               restart: RestartPolicy | bool | None = None, timeout: float = 60.0,
               context: str = "spawn", start_timeout: float = 120.0, spin: float = 0.002):
    fns = self._check_args(env_fns, num_workers, restart, context)
    self.num_envs = len(fns)
    self._policy = RestartPolicy() if restart is True else (restart or None)
    self._seed_root = _check_seed(seed)
    spin = _check_spin(spin)
    self._backend = None
    if num_workers == 0:
      self._backend = _LocalBackend(fns)
    else:
      self._backend = _ProcessBackend(fns, num_workers, context, process.check_timeout(timeout),
                                      process.check_timeout(start_timeout, "start_timeout"),
                                      spin)
    try:
      self._setup_spaces(self._backend.start())
      self._bufs = self._backend.attach(self._layout)
    except BaseException:
      self._backend.close()
      raise
    self._first_seeds = (_derived_seeds(self._seed_root, self.num_envs)
                         if self._seed_root is not None else [None] * self.num_envs)
    self._restarts = np.zeros(self.num_envs, np.int64)
    self._ready = np.zeros(self.num_envs, np.bool_)  # reset since creation / last failure
    self._loose_obs: list = [None] * self.num_envs
    if self._seed_root is not None:
      self.action_space.seed(self._seed_root)

  @classmethod
  def from_id(cls, env_id: str, num_envs: int, num_workers: int = 0, seed: int | None = None,
              restart: RestartPolicy | bool | None = None, timeout: float = 60.0,
              context: str = "spawn", start_timeout: float = 120.0, spin: float = 0.002,
              **make_kwargs) -> "BatchEnv":
    """``num_envs`` copies of ``gymnasium.make(env_id, **make_kwargs)``."""
    process.check_env_id(env_id)
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
      raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    fn = functools.partial(process.make_from_id, env_id, **make_kwargs)
    return cls([fn] * num_envs, num_workers=num_workers, seed=seed, restart=restart,
               timeout=timeout, context=context, start_timeout=start_timeout, spin=spin)

  @staticmethod
  def _check_args(env_fns, num_workers, restart, context) -> list:
    fns = list(env_fns)
    if not fns:
      raise ValueError("env_fns is empty; a BatchEnv needs at least one environment constructor")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or not (
        0 <= num_workers <= len(fns)):
      raise ValueError(f"num_workers must be an int from 0 (in-process) to num_envs={len(fns)}, "
                       f"got {num_workers!r}")
    if not (restart is None or restart is True or isinstance(restart, RestartPolicy)):
      raise ValueError(f"restart must be None, True or a RestartPolicy, got {restart!r}")
    process.get_context(context)  # validates the name
    for fn in fns:
      if num_workers > 0:
        process.check_constructor(fn)
      elif isinstance(fn, str):
        process.check_env_id(fn)
      elif not callable(fn):
        raise TypeError(f"an environment constructor must be a callable or an env id string, "
                        f"got {type(fn).__name__}: {fn!r}")
    return fns

  def _setup_spaces(self, spaces: list[tuple[int, tuple]]) -> None:
    first_index, (obs_space, act_space) = spaces[0]
    for index, pair in spaces[1:]:
      if pair != (obs_space, act_space):
        raise ValueError(_space_mismatch(index, pair, first_index, (obs_space, act_space)))
    self.single_observation_space, self.single_action_space = obs_space, act_space
    self.observation_space = batch_space(obs_space, self.num_envs)
    self.action_space = batch_space(act_space, self.num_envs)
    self._layout = _Layout.build(self.num_envs, max(1, self._backend.num_workers), obs_space,
                                 act_space)

  # -- public API -------------------------------------------------------------------------

  @property
  def num_workers(self) -> int:
    return self._backend.num_workers

  @property
  def restarts(self) -> np.ndarray:
    """How many times each env was recreated by the restart policy ([N] int64, a copy)."""
    return self._restarts.copy()

  @property
  def worker_pids(self) -> list[int]:
    """Process ids of the workers (empty in-process)."""
    return [] if self.closed else self._backend.pids

  def reset(self, seed: int | Sequence[int | None] | None = None, options: dict | None = None,
            indices: Sequence[int] | None = None):
    """Resets all envs (or those in ``indices``); returns the full batch ``(obs, infos)``.

    ``seed``: an int (per-env seeds derived from it, as in the constructor), a list of one
    seed per reset env, or None (the constructor's seeds on each env's first reset, then
    unseeded). Envs outside ``indices`` keep their current observation in the batch.
    """
    self._check_open("reset")
    targets = self._reset_targets(self._check_indices(indices), seed)
    self._ready[[i for i, _ in targets]] = False
    reports = self._run_recovering(lambda: self._backend.reset(targets, options), "reset")
    self._ready[[i for i, _ in targets]] = True
    for report in reports:
      self._absorb(report)
    return self._read_obs(), _collect_infos(reports, self.num_envs)

  def step(self, actions):
    """Steps every env once; returns ``(obs, rewards, terminated, truncated, infos)``."""
    self._check_open("step")
    if not self._ready.all():
      never = np.flatnonzero(~self._ready).tolist()
      raise EnvError(f"call reset() before step(): environments {never} have not been reset "
                     "since they were created or since an error left them in an unknown state")
    loose_actions = self._write_actions(actions)
    reports, failures = self._interruptible(lambda: self._backend.step(loose_actions))
    restarted, extra = self._recover(reports, failures, "step")
    for report in reports + extra:
      self._absorb(report)
    return self._step_result(reports + extra, restarted)

  def call(self, name: str, *args, **kwargs) -> tuple:
    """Calls ``env.<name>(*args, **kwargs)`` on every env; returns the results in env order."""
    self._check_open("call")
    return tuple(self._backend.call([(i, name, args, kwargs) for i in range(self.num_envs)]))

  def get_attr(self, name: str) -> tuple:
    """The attribute ``name`` of every env, in env order."""
    self._check_open("get_attr")
    return tuple(self._backend.call([(i, name, None, {}) for i in range(self.num_envs)]))

  def render(self):
    return self.call("render")

  def close_extras(self, **kwargs) -> None:
    """Closes every env and worker and frees the shared memory. Idempotent (via close())."""
    self._bufs = None
    if self._backend is not None:
      self._backend.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()

  def __repr__(self) -> str:
    state = ", closed" if self.closed else ""
    return f"BatchEnv(num_envs={self.num_envs}, num_workers={self.num_workers}{state})"

  # -- internals ------------------------------------------------------------------------

  def _check_open(self, what: str) -> None:
    if self.closed:
      raise EnvClosedError(f"{what}() on a closed BatchEnv; create a new one")

  def _check_indices(self, indices) -> list[int]:
    if indices is None:
      return list(range(self.num_envs))
    arr = np.asarray(indices)
    if arr.dtype == np.bool_ and arr.shape == (self.num_envs,):
      arr = np.flatnonzero(arr)
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or (
        arr.size and (arr.min() < 0 or arr.max() >= self.num_envs)):
      raise ValueError(f"indices must be env indices in [0, {self.num_envs - 1}] or a boolean "
                       f"mask of length {self.num_envs}, got {indices!r}")
    return sorted(set(arr.tolist()))

  def _reset_targets(self, indices: list[int], seed) -> list[tuple[int, int | None]]:
    if seed is None:
      seeds = [self._first_seeds[i] for i in indices]
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
      self._seed_root = _check_seed(seed)
      derived = _derived_seeds(self._seed_root, self.num_envs)
      seeds = [derived[i] for i in indices]
      self.action_space.seed(self._seed_root)
    else:
      seeds = list(seed)
      if len(seeds) != len(indices):
        raise ValueError(f"seed lists need one seed per reset env ({len(indices)}), got {len(seeds)}")
      seeds = [_check_seed(s, "each seed") for s in seeds]
    for i in indices:
      self._first_seeds[i] = None  # constructor seeds apply to the first reset only
    return list(zip(indices, seeds))

  def _write_actions(self, actions) -> list | None:
    if self._bufs.actions is not None:
      self._bufs.actions[...] = _check_actions(actions, self.single_action_space, self.num_envs)
      return None
    items = list(iterate(self.action_space, actions))
    if len(items) != self.num_envs:
      raise ValueError(f"expected actions for {self.num_envs} environments, got {len(items)}")
    return items

  def _interruptible(self, command):
    """Runs a backend command; if it is interrupted (Ctrl-C) every env needs a reset."""
    try:
      return command()
    except BaseException:
      self._ready[:] = False
      raise

  def _run_recovering(self, command, during: str) -> list[_Report]:
    reports, failures = self._interruptible(command)
    _, extra = self._recover(reports, failures, during)
    return reports + extra

  # -- failures ---------------------------------------------------------------------------

  def _recover(self, reports: list[_Report], failures: list, during: str):
    """Applies the restart policy to one command's env errors and lost workers.

    Returns (mask of restarted envs or None, reports of the restarts' resets).
    """
    errors = [(i, record) for report in reports if report.errors for i, record in report.errors]
    if not errors and not failures:
      return None, []
    restarted = np.zeros(self.num_envs, np.bool_)
    extra: list[_Report] = []
    for w, error in failures:  # lost workers first: they are the more serious failures
      extra += self._restart_worker(w, error, restarted)
    for i, record in errors:
      extra += self._restart_env(i, record.to_error(i, during), restarted)
    return restarted, extra

  def _restart_env(self, i: int, error: EnvError, restarted: np.ndarray) -> list[_Report]:
    while True:
      self._check_restart_allowed([i], error)
      self._restarts[i] += 1
      restarted[i] = True
      try:
        report = self._backend.restart_env(i, self._restart_seed(i))
      except (EnvWorkerDied, EnvWorkerTimeout) as exc:  # the worker went down while restarting
        return self._restart_worker(self._backend.worker_of(i), exc, restarted)
      if not report.errors:
        return [report]
      error = report.errors[0][1].to_error(i, "restart")

  def _restart_worker(self, w: int, error: EnvError, restarted: np.ndarray) -> list[_Report]:
    indices = self._backend.parts[w]
    while True:
      self._check_restart_allowed(indices, error)
      self._restarts[indices] += 1
      restarted[indices] = True
      try:
        self._backend.respawn(w)
        reports, failures = self._backend.reset(
            [(i, self._restart_seed(i)) for i in indices], None)
      except EnvError as exc:  # a constructor failed in the new worker, or it died again
        error = exc
        continue
      if failures:
        error = failures[0][1]
        continue
      extra = list(reports)
      for i, record in reports[0].errors or ():
        extra += self._restart_env(i, record.to_error(i, "reset"), restarted)
      return extra

  def _check_restart_allowed(self, indices: list[int], error: EnvError) -> None:
    policy = self._policy
    if policy is None or not policy.allows(error):
      self._give_up(error)
    capped = [i for i in indices if self._restarts[i] >= policy.max_restarts]
    if capped:
      error.add_note(f"not restarted: environment(s) {capped} were already restarted "
                     f"{policy.max_restarts} times (RestartPolicy.max_restarts)")
      self._give_up(error)

  def _give_up(self, error: EnvError):
    self._ready[:] = False  # this command's results are lost: every env needs a reset
    if isinstance(error, (EnvWorkerDied, EnvWorkerTimeout)):
      error.add_note("the BatchEnv was closed: a worker process was lost and not replaced "
                     "(pass restart=RestartPolicy(...) to replace lost workers)")
      self.close()
    raise error

  def _restart_seed(self, i: int) -> int | None:
    """A reproducible seed for the k-th restart of env i (distinct from its first seed)."""
    if self._seed_root is None:
      return None
    sequence = np.random.SeedSequence(self._seed_root, spawn_key=(i, int(self._restarts[i])))
    return int(sequence.generate_state(1, np.uint64)[0])

  # -- results ----------------------------------------------------------------------------

  def _absorb(self, report: _Report) -> None:
    if report.loose_obs:
      for i, obs in report.loose_obs.items():
        self._loose_obs[i] = obs

  def _read_obs(self):
    if self._bufs.obs is not None:
      return self._bufs.obs.copy()  # a copy: the shared buffer is overwritten next step
    space = self.single_observation_space
    if any(obs is None for obs in self._loose_obs):  # envs never reset yet: zeros
      blank = next(iter(iterate(batch_space(space, 1), create_empty_array(space, 1))))
      items = [blank if obs is None else obs for obs in self._loose_obs]
    else:
      items = self._loose_obs
    return concatenate(space, items, create_empty_array(space, self.num_envs))

  def _step_result(self, reports: list[_Report], restarted: np.ndarray | None):
    bufs, n = self._bufs, self.num_envs
    obs = self._read_obs()
    rewards, terminated, truncated = (bufs.rewards.copy(), bufs.terminated.copy(),
                                      bufs.truncated.copy())
    infos = _collect_infos(reports, n)
    if any(report.ended for report in reports):
      self._add_finals(infos, reports)
    if restarted is not None and restarted.any():
      rewards[restarted], terminated[restarted], truncated[restarted] = 0.0, False, True
      infos["env_restarted"], infos["_env_restarted"] = restarted, restarted.copy()
    return obs, rewards, terminated, truncated, infos

  def _add_finals(self, infos: dict, reports: list[_Report]) -> None:
    n, index = self.num_envs, [i for report in reports if report.ended for i in report.ended]
    mask = np.zeros(n, np.bool_)
    mask[index] = True
    if self._bufs.final_obs is not None:
      final_obs = np.zeros_like(self._bufs.final_obs)
      final_obs[index] = self._bufs.final_obs[index]
    else:
      final_obs = np.full(n, None, dtype=object)
      for report in reports:
        for i, obs in (report.loose_final or {}).items():
          final_obs[i] = obs
    infos["final_obs"], infos["_final_obs"] = final_obs, mask
    final_infos = _merge_infos([report.final_infos for report in reports if report.ended], n)
    infos["final_info"], infos["_final_info"] = final_infos, mask.copy()


__all__ = ["BatchEnv", "RestartPolicy", "EnvError", "EnvWorkerError", "EnvWorkerDied",
           "EnvWorkerTimeout", "EnvClosedError"]
