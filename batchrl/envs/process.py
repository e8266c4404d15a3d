"""One environment in its own process, and the worker plumbing that BatchEnv builds on.

Why processes: a Python environment holds the GIL while it steps, so threads would step
one environment at a time. Why never ``fork``: JAX (with its thread pools) may already be
loaded in the parent, and forking a process that has live threads can deadlock the child.
Workers therefore start with ``spawn`` (a fresh interpreter) or ``forkserver`` (forked from
a clean server process that never loaded JAX), through ``batchrl.envs.launch``: they never
re-run the user's main module, and constructors travel by value (cloudpickle), so lambdas,
closures and classes of a script or notebook work as with ``gymnasium.vector``.

Wire format: every message is ``HEADER`` (kind, request id) followed by an optional pickled
body. Request ids grow by one per request, so a late reply (say, to a step that timed out)
is recognised and dropped instead of being taken as the answer to a later request.

    env = ExternalProcess("CartPole-v1", timeout=10.0, index=0)
    obs, info = env.reset(seed=0)
    promise = env.step(0, blocking=False)   # returns at once
    obs, reward, terminated, truncated, info = promise()
    env.close()
"""
from __future__ import annotations

import functools
import multiprocessing
import os
import pickle
import signal
import struct
import sys
import time
import traceback
import weakref
from typing import Any, Callable, NamedTuple

from gymnasium.error import ClosedEnvironmentError

from batchrl.envs import launch
from batchrl.errors import did_you_mean

HEADER = struct.Struct("<BQ")  # (message kind, request id)

# Requests (parent -> worker).
ACCESS, CALL, STEP, RESET, CLOSE, ATTACH, RESTART, SETATTR = 1, 2, 3, 4, 5, 6, 7, 8
# Replies (worker -> parent). READY always carries request id 0.
READY, RESULT, EXCEPTION = 101, 102, 103

# Requests whose bodies may hold the user's own objects (call arguments, reset options).
_BY_VALUE = frozenset((CALL, RESET, SETATTR))
KIND_NAMES = {ACCESS: "attribute access", CALL: "call", STEP: "step", RESET: "reset",
              CLOSE: "close", ATTACH: "shared-memory attach", RESTART: "restart",
              SETATTR: "set_attr", READY: "start-up"}
CONTEXTS = launch.CONTEXTS


class EnvError(RuntimeError):
  """Base class: something went wrong with environment ``index`` (None when unknown)."""

  def __init__(self, message: str, *, index: int | None = None):
    super().__init__(message)
    self.index = index


class EnvWorkerError(EnvError):
  """The environment raised inside its worker; ``traceback`` is the worker's traceback text."""

  def __init__(self, message: str, *, index: int | None = None, traceback: str = "",
               exc_type: str = ""):
    super().__init__(message, index=index)
    self.traceback = traceback
    self.exc_type = exc_type


class EnvWorkerDied(EnvError):
  """The worker process exited unexpectedly (``os._exit``, a segfault, killed)."""

  def __init__(self, message: str, *, index: int | None = None, exitcode: int | None = None):
    super().__init__(message, index=index)
    self.exitcode = exitcode


class EnvWorkerTimeout(EnvError, multiprocessing.TimeoutError):
  """The worker did not answer within ``timeout`` seconds (hung or far too slow).

  Also a ``multiprocessing.TimeoutError``, what Gymnasium's ``AsyncVectorEnv`` raises.
  """

  def __init__(self, message: str, *, index: int | None = None, timeout: float | None = None):
    super().__init__(message, index=index)
    self.timeout = timeout


class EnvClosedError(EnvError, ClosedEnvironmentError):
  """The environment (or its worker) was closed; it cannot be used any more.

  Also a ``gymnasium.error.ClosedEnvironmentError``: what Gymnasium's vector envs raise.
  """


class SpaceMismatchError(EnvError, ValueError, AssertionError):
  """The environments of a batch have spaces that cannot be batched together.

  Also a ValueError (what batchrl raised before) and an AssertionError: Gymnasium's
  ``SyncVectorEnv`` asserts, its ``AsyncVectorEnv`` raises RuntimeError (an ``EnvError`` is
  one), so code written for either catches it.
  """


class ErrorRecord(NamedTuple):
  """A picklable description of an exception raised in a worker (and of which env raised it).

  ``exception`` is the exception itself, pickled (None if it cannot be): the parent raises
  an error of its class (see ``to_error``).
  """

  exc_type: str
  message: str
  traceback: str
  index: int | None = None
  exception: bytes | None = None

  @classmethod
  def current(cls, index: int | None = None) -> "ErrorRecord":
    """Describes the exception being handled (call inside ``except``)."""
    exc = sys.exc_info()[1]
    return cls(type(exc).__qualname__, str(exc), traceback.format_exc(), index,
               pickle_exception(exc))

  def to_error(self, index: int | None, during: str) -> EnvWorkerError:
    """An EnvWorkerError that is also of the env's exception class, where that class allows
    (code that catches the env's own exception, as with Gymnasium's vector envs, catches it)."""
    index = self.index if self.index is not None else index
    where = _env_name(index)
    text = (f"{where} raised {self.exc_type} during {during}: {self.message}\n"
            f"--- worker traceback ---\n{self.traceback.rstrip()}")
    fields = dict(index=index, traceback=self.traceback, exc_type=self.exc_type)
    original = _unpickled(self.exception)
    kept = None if original is None else _of_class(type(original), text, original, fields)
    if kept is not None:
      return kept
    error = EnvWorkerError(text, **fields)
    error.__cause__ = original
    return error


def pickle_exception(exc: BaseException | None) -> bytes | None:
  if exc is None:
    return None
  try:  # by value where needed: the class may have reached this worker by value
    return launch.dumps(exc)
  except Exception:  # an exception holding unpicklable state: its class is lost, not the error
    return None


def _unpickled(data: bytes | None) -> BaseException | None:
  if data is None:
    return None
  try:
    value = pickle.loads(data)
  except Exception:  # e.g. an __init__ whose arguments are not its args
    return None
  return value if isinstance(value, BaseException) else None


@functools.lru_cache(maxsize=128)
def _worker_error_class(base: type) -> type | None:
  """``EnvWorkerError[base]``: an EnvWorkerError that is also a ``base``; None where Python
  refuses the combination (conflicting layouts, an inconsistent method order)."""
  if issubclass(base, EnvError) or not issubclass(base, Exception):
    return None
  namespace = {"__str__": BaseException.__str__, "__reduce__": _reduce_kept,
               "__module__": __name__, "__qualname__": f"EnvWorkerError[{base.__qualname__}]"}
  try:
    return type(f"EnvWorkerError[{base.__name__}]", (EnvWorkerError, base), namespace)
  except TypeError:
    return None


def _of_class(base: type, text: str, original: BaseException | None, fields: dict):
  """An ``EnvWorkerError[base]`` with ``original``'s attributes, or None if one cannot be made."""
  cls = _worker_error_class(base)
  if cls is None:
    return None
  try:
    error = base.__new__(cls)  # the base's __new__: some (OSError) have their own layout
    if original is not None:
      error.__dict__.update(vars(original))  # its attributes, as the env set them
    EnvWorkerError.__init__(error, text, **fields)
  except Exception:  # a __new__ that needs arguments
    return None
  return error


def _reduce_kept(error):
  base = type(error).__bases__[1]  # (EnvWorkerError, base)
  return _rebuild_kept, (base, error.args[0], dict(vars(error)))


def _rebuild_kept(base: type, text: str, state: dict):
  fields = {key: state.get(key) for key in ("index", "traceback", "exc_type")}
  error = _of_class(base, text, None, fields) or EnvWorkerError(text, **fields)
  error.__dict__.update(state)
  return error


def _env_name(index: int | None) -> str:
  return "environment" if index is None else f"environment {index}"


# ---------------------------------------------------------------------------------------
# Constructors: what may be sent to a worker.


def make_env(constructor: Callable[[], Any] | str):
  """Builds an environment from an env id string or a zero-argument callable."""
  if isinstance(constructor, str):
    env = make_from_id(constructor)
  else:
    env = constructor()
  if not (callable(getattr(env, "step", None)) and callable(getattr(env, "reset", None))):
    raise TypeError(f"the constructor returned {type(env).__name__}, which has no step()/reset(); "
                    "it must return an environment")
  return env


def make_from_id(env_id: str, **kwargs):
  """``gymnasium.make(env_id, **kwargs)`` through ``batchrl.envs.core.make_gym`` (the one
  place ids are resolved); module level so that ``functools.partial`` of it pickles."""
  from batchrl.envs.core import make_gym  # lazily: keeps this module's import light
  return make_gym(env_id, **kwargs)


def check_env_id(env_id: str) -> None:
  """Raises ValueError naming close matches when ``env_id`` is not a registered gymnasium id."""
  import gymnasium
  if ":" in env_id:  # "module:Env-v0" registers on import inside the worker; cannot check here
    return
  registry = gymnasium.envs.registration.registry
  if env_id in registry:
    return
  hint = did_you_mean(env_id, registry.keys(), n=5) or (
      " (see gymnasium.pprint_registry() for the registered ids)")
  raise ValueError(f"unknown environment id {env_id!r}{hint}")


def check_constructor(constructor) -> None:
  """Raises for what is neither a callable nor a registered env id (sending is checked by
  ``launch.pack_constructors``, which says why a constructor cannot travel)."""
  if isinstance(constructor, str):
    check_env_id(constructor)
    return
  if not callable(constructor):
    raise TypeError(f"an environment constructor must be a callable or an env id string, "
                    f"got {type(constructor).__name__}: {constructor!r}")


def get_context(context: str) -> str:
  """Validates a start method: 'spawn' or 'forkserver' (never fork)."""
  return launch.check_context(context)


def check_timeout(value, name: str = "timeout") -> float:
  if not isinstance(value, (int, float)) or not value > 0:
    raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
  return float(value)


# ---------------------------------------------------------------------------------------
# Messages.


def encode(kind: int, rid: int, body: Any = None, by_value: bool = False) -> bytes:
  """One message. ``by_value`` for bodies that may hold the user's own objects (arguments of
  ``call``, reset options): a worker has no ``__main__`` of the user's to find them in."""
  header = HEADER.pack(kind, rid)
  if body is None:
    return header
  if by_value:
    return header + launch.dumps(body)
  try:
    return header + pickle.dumps(body, protocol=pickle.HIGHEST_PROTOCOL)
  except Exception:  # e.g. an instance of a class that reached this worker by value
    return header + launch.dumps(body)


_FRAME = struct.Struct("!i")  # multiprocessing.Connection's length prefix


def send_bytes(conn, data: bytes) -> None:
  """``conn.send_bytes(data)`` in one write() call, without Connection's Python overhead.

  Same framing as Connection, so the other end reads it with ``recv_bytes``. Messages
  here are mostly a few dozen bytes and this is on every step's path.
  """
  frame = _FRAME.pack(len(data)) + data
  view, fd = memoryview(frame), conn.fileno()
  while view:  # a blocking write() sends it all at once in practice; loop to be exact
    view = view[os.write(fd, view):]


def recv_bytes(conn) -> bytes:
  """``conn.recv_bytes()`` without Connection's Python overhead (same framing): one read()
  for the length, one for the message. EOFError when the other end is gone."""
  fd = conn.fileno()
  size = _FRAME.unpack(_read_exactly(fd, _FRAME.size))[0]
  if size == -1:  # Connection's escape for messages over 2 GiB
    size = struct.unpack("!Q", _read_exactly(fd, 8))[0]
  return _read_exactly(fd, size)


def _read_exactly(fd: int, size: int) -> bytes:
  data = os.read(fd, size)
  if len(data) == size:
    return data
  parts = [data]
  size -= len(data)
  while data and size:
    data = os.read(fd, size)
    parts.append(data)
    size -= len(data)
  if size:
    raise EOFError("the other end of the pipe is gone")
  return b"".join(parts)


def decode(data: bytes) -> tuple[int, int, Any]:
  kind, rid = HEADER.unpack_from(data)
  body = pickle.loads(data[HEADER.size:]) if len(data) > HEADER.size else None
  return kind, rid, body


# ---------------------------------------------------------------------------------------
# Worker side.


def send_exception(conn, rid: int, index: int | None = None) -> None:
  """Sends the exception being handled to the parent (call inside ``except``)."""
  send_bytes(conn, encode(EXCEPTION, rid, ErrorRecord.current(index)))


def send_result(conn, rid: int, value: Any) -> None:
  try:
    data = encode(RESULT, rid, (value,))  # wrapped so that a None result still has a body
  except Exception:  # an unpicklable result is the request's error, not the worker's death
    send_exception(conn, rid)
    return
  send_bytes(conn, data)


def serve_env(conn, packed: bytes) -> None:
  """Worker main of an ExternalProcess: one env, requests answered in order."""
  try:
    env = make_env(pickle.loads(packed)[0])
  except Exception:
    send_exception(conn, 0)
    conn.close()
    return
  try:
    conn.send_bytes(encode(READY, 0))
    _serve_requests(conn, env)
  except (EOFError, OSError):  # the parent is gone (or closed the pipe): nothing to answer
    pass
  finally:
    _close_quietly(env)


def _serve_requests(conn, env) -> None:
  while True:
    data = recv_bytes(conn)
    kind, rid = HEADER.unpack_from(data)
    if kind == CLOSE:  # the env is closed by the caller's `finally`
      conn.send_bytes(encode(RESULT, rid, (None,)))
      return
    try:  # a body that cannot be unpickled here is this request's error, not the worker's
      body = pickle.loads(data[HEADER.size:]) if len(data) > HEADER.size else None
      value = _handle_request(env, kind, body)
    except Exception:
      send_exception(conn, rid)
      continue
    send_result(conn, rid, value)


def _handle_request(env, kind: int, body):
  if kind == ACCESS:
    return getattr(env, body)
  if kind == CALL:
    name, args, kwargs = body
    return getattr(env, name)(*args, **kwargs)
  if kind == STEP:
    return env.step(body)
  if kind == RESET:
    seed, options = body
    return env.reset(seed=seed, options=options)
  raise ValueError(f"unknown request kind {kind}")


def _close_quietly(env) -> None:
  try:
    env.close()
  except Exception:  # closing is best effort; the process ends right after
    pass


# ---------------------------------------------------------------------------------------
# Parent side.


def _shutdown(process, conn, grace: float) -> None:
  """Ends a worker: ask politely, then SIGTERM, then SIGKILL. Safe to call twice."""
  if process.is_alive() and grace > 0:
    try:
      conn.send_bytes(encode(CLOSE, 0))
    except (OSError, ValueError):  # pipe already broken or closed
      pass
    process.join(grace)
  if process.is_alive():
    process.terminate()
    process.join(1.0)
  if process.is_alive():
    process.kill()
    process.join(1.0)
  try:
    conn.close()
  except OSError:
    pass


def describe_exit(exitcode: int | None) -> str:
  if exitcode is None:
    return "no exit code yet"
  if exitcode < 0:
    try:
      return f"killed by signal {signal.Signals(-exitcode).name}"
    except ValueError:
      return f"killed by signal {-exitcode}"
  return f"exit code {exitcode}"


class WorkerHandle:
  """A worker process, its pipe, request numbering, timeouts and clean-up.

  ``target(conn, *args)`` runs in the worker. It must first send READY (request id 0) or an
  EXCEPTION for id 0, then answer requests. The handle is ended by ``close()``, by garbage
  collection or at interpreter exit (``weakref.finalize`` runs its callback from an atexit
  hook), so no process outlives the parent.
  """

  def __init__(self, target, args: tuple, *, context: str = "spawn", index: int | None = None,
               timeout: float = 60.0, start_timeout: float = 120.0):
    self.index = index
    self.timeout = check_timeout(timeout)
    self.start_timeout = check_timeout(start_timeout, "start_timeout")
    self.process, self.conn = launch.start(target, args, get_context(context))
    self._finalizer = weakref.finalize(self, _shutdown, self.process, self.conn, 1.0)
    self._next_rid = 1
    self._pending: dict[int, str] = {}  # rid -> what it asked, for messages
    self._stash: dict[int, tuple[int, Any]] = {}  # replies that came before their turn
    self._ready: Any = None
    self._started = False
    self._failure: EnvError | None = None  # once set, every later request raises it

  @property
  def pid(self) -> int | None:
    return self.process.pid

  @property
  def closed(self) -> bool:
    return not self._finalizer.alive

  def wait_ready(self) -> Any:
    """Blocks until the worker constructed its environment; returns READY's body."""
    if not self._started:
      self._check_usable()
      kind, body = self._receive_for(0, self.start_timeout, "start-up")
      if kind == EXCEPTION:
        self._failure = body.to_error(self.index, "construction")
        raise self._failure
      self._started, self._ready = True, body
    return self._ready

  def request(self, kind: int, body: Any = None) -> int:
    """Sends a request; returns its id for ``result``."""
    self._check_usable()
    rid = self._next_rid
    self._next_rid += 1
    self._pending[rid] = KIND_NAMES.get(kind, str(kind))
    self.send_bytes(encode(kind, rid, body, by_value=kind in _BY_VALUE))
    return rid

  def send_bytes(self, data: bytes) -> None:
    try:
      send_bytes(self.conn, data)
    except (OSError, ValueError) as exc:  # BrokenPipe/ConnectionReset: the worker is gone
      raise self.died("sending a request") from exc

  def result(self, rid: int, timeout: float | None = None) -> Any:
    """Waits for the reply to ``rid``; raises the worker's error as EnvWorkerError."""
    self.wait_ready()
    during = self._pending.get(rid, "request")
    if rid in self._stash:
      kind, body = self._stash.pop(rid)
    else:
      kind, body = self._receive_for(rid, self.timeout if timeout is None else timeout, during)
    self._pending.pop(rid, None)
    if kind == EXCEPTION:
      raise body.to_error(self.index, during)
    return None if body is None else body[0]

  def take(self, rid: int) -> tuple[int, Any] | None:
    """Reads ONE waiting message: its (kind, body) if it answers ``rid``, else None.

    For callers that poll several workers at once and know this pipe is readable.
    """
    try:
      kind, got, body = decode(recv_bytes(self.conn))
    except (EOFError, OSError) as exc:
      raise self.died(self._pending.get(rid, "request")) from exc
    if got == rid:
      self._pending.pop(rid, None)
      return kind, body
    if got in self._pending:
      self._stash[got] = (kind, body)
    return None

  def abandon(self, rid: int) -> None:
    """Forgets ``rid``: its reply, if it ever comes, will be dropped as stale."""
    self._pending.pop(rid, None)
    self._stash.pop(rid, None)

  def _receive_for(self, rid: int, timeout: float, during: str) -> tuple[int, Any]:
    deadline = time.monotonic() + timeout
    while True:
      remaining = deadline - time.monotonic()
      try:
        ready = self.conn.poll(max(remaining, 0.0))
        data = recv_bytes(self.conn) if ready else None
      except (EOFError, OSError) as exc:
        raise self.died(during) from exc
      if data is None:
        self._pending.pop(rid, None)  # its reply, should it ever come, is now stale
        raise self.timed_out(during, timeout)
      kind, got, body = decode(data)
      if got == rid:
        return kind, body
      if got in self._pending:  # an earlier non-blocking request: keep for its promise
        self._stash[got] = (kind, body)
      # Anything else answers a request that timed out or was abandoned: drop it.

  def died(self, during: str) -> EnvWorkerDied:
    """Marks the worker dead and returns the error to raise (exit code included)."""
    self.process.join(2.0)
    code = self.process.exitcode
    error = EnvWorkerDied(
        f"{_env_name(self.index)}: worker process {self.pid} died during {during} "
        f"({describe_exit(code)})", index=self.index, exitcode=code)
    self._failure = error
    self._finalizer()
    return error

  def timed_out(self, during: str, timeout: float) -> EnvWorkerTimeout:
    return EnvWorkerTimeout(
        f"{_env_name(self.index)}: worker process {self.pid} did not answer {during} within "
        f"{timeout:g} s (the environment may be hung; raise `timeout` if it is just slow)",
        index=self.index, timeout=timeout)

  def _check_usable(self) -> None:
    if self._failure is not None:
      raise self._failure
    if self.closed:
      raise EnvClosedError(f"{_env_name(self.index)}: its worker process was closed; "
                           "create a new one", index=self.index)

  def kill(self) -> None:
    """Ends the worker at once (it is hung or no longer trusted)."""
    self._finalizer.detach()
    _shutdown(self.process, self.conn, 0.0)

  def close(self, grace: float = 1.0) -> None:
    """Ends the worker, politely if it answers within ``grace`` seconds. Idempotent."""
    if self._finalizer.detach() is not None:
      _shutdown(self.process, self.conn, grace)

  def request_close(self) -> None:
    """First half of a parallel close: tell the worker to stop without waiting for it."""
    if not self.closed and self.process.is_alive():
      try:
        self.conn.send_bytes(encode(CLOSE, 0))
      except (OSError, ValueError):
        pass


class _Promise:
  """The pending result of a non-blocking request; call it to wait for the value."""

  __slots__ = ("_worker", "_rid", "_done", "_value", "_error")

  def __init__(self, worker: WorkerHandle, rid: int):
    self._worker, self._rid = worker, rid
    self._done, self._value, self._error = False, None, None

  def __call__(self):
    if not self._done:
      try:
        self._value = self._worker.result(self._rid)
      except EnvError as exc:
        self._error = exc
      self._done = True
    if self._error is not None:
      raise self._error
    return self._value


class ExternalProcess:
  """One environment in its own process; attribute access and method calls are forwarded.

  Args:
    constructor: a zero-argument callable returning the env (a function, lambda, closure or
      class, from a module, a script or a notebook: it is sent by value with cloudpickle),
      or a gymnasium env id string.
    timeout: seconds to wait for any single reply before EnvWorkerTimeout.
    context: 'spawn' or 'forkserver'.
    index: the env's index, named in every error (e.g. its place in a batch).
    start_timeout: seconds allowed for the worker to start and build the environment.

  Errors: exceptions in the worker come back as EnvWorkerError (with the worker traceback),
  a dead worker as EnvWorkerDied, a silent one as EnvWorkerTimeout. Construction does not
  block; a failing constructor is reported by the first request.
  """

  def __init__(self, constructor, timeout: float = 60.0, context: str = "spawn", *,
               index: int | None = None, start_timeout: float = 120.0):
    check_constructor(constructor)
    packed = launch.pack_constructors([constructor], [index])
    self.index = index
    self._worker = WorkerHandle(serve_env, (packed,), context=context, index=index,
                                timeout=timeout, start_timeout=start_timeout)
    self._spaces: dict[str, Any] = {}
    self._closed = False

  @property
  def pid(self) -> int | None:
    return self._worker.pid

  @property
  def closed(self) -> bool:
    return self._worker.closed

  @property
  def observation_space(self):
    return self._space("observation_space")

  @property
  def action_space(self):
    return self._space("action_space")

  def _space(self, name: str):
    if name not in self._spaces:  # spaces never change, and asking costs a round trip
      self._spaces[name] = self._blocking(ACCESS, name)
    return self._spaces[name]

  def __getattr__(self, name: str):
    # Only called for names not found here. Private names are never forwarded: copy,
    # pickle and half-built objects probe them and must get a plain AttributeError.
    if name.startswith("_"):
      raise AttributeError(name)
    try:
      return self._blocking(ACCESS, name)
    except EnvWorkerError as exc:
      if exc.exc_type == "AttributeError":
        raise AttributeError(f"{_env_name(self.index)} has no attribute {name!r}") from exc
      raise

  def call(self, name: str, *args, **kwargs):
    """Calls ``env.<name>(*args, **kwargs)`` in the worker and returns the result."""
    return self._blocking(CALL, (name, args, kwargs))

  def step(self, action, blocking: bool = True):
    """``env.step(action)``; with ``blocking=False`` returns a promise (call it for the result)."""
    return self._send(STEP, action, blocking)

  def reset(self, seed: int | None = None, options: dict | None = None, blocking: bool = True):
    """``env.reset(seed=..., options=...)``; with ``blocking=False`` returns a promise."""
    return self._send(RESET, (seed, options), blocking)

  def _blocking(self, kind: int, body):
    return self._send(kind, body, True)

  def _send(self, kind: int, body, blocking: bool):
    if self._closed:
      raise EnvClosedError(f"{_env_name(self.index)}: {KIND_NAMES[kind]} after close(); "
                           "create a new ExternalProcess", index=self.index)
    rid = self._worker.request(kind, body)
    promise = _Promise(self._worker, rid)
    return promise() if blocking else promise

  def close(self) -> None:
    """Closes the env and ends its process. Idempotent."""
    self._closed = True
    self._worker.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()

  def __repr__(self) -> str:
    state = "closed" if self.closed else f"pid {self.pid}"
    return f"ExternalProcess({_env_name(self.index)}, {state})"


__all__ = ["ExternalProcess", "EnvError", "EnvWorkerError", "EnvWorkerDied", "EnvWorkerTimeout",
           "EnvClosedError", "SpaceMismatchError", "WorkerHandle", "make_env", "make_from_id",
           "check_constructor", "check_env_id"]
