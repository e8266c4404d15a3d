"""Worker processes that never run the user's main module, and what is sent to them.

Why not ``multiprocessing``'s own start: its ``spawn`` and ``forkserver`` children re-run
the parent's ``__main__`` (as ``__mp_main__``) so that objects defined there can be found
by name. That breaks what people write with ``gymnasium.vector``: a script without an
``if __name__ == "__main__":`` guard (every worker runs the whole script again, and starting
a process while bootstrapping fails), a script piped on standard input (there is no file to
re-run), and lambdas, closures or env classes defined in a script or a notebook (pickled by
reference to a ``__main__`` the worker does not have). ``fork`` would avoid all that, but
forking a process with live threads (JAX has them) can deadlock the child.

So a worker here is a fresh interpreter (``spawn``: ``python -c`` with a stdlib-only
bootstrap) or a fork of a clean server process that never loaded JAX (``forkserver``). It
receives the parent's ``sys.path``, then its job: a batchrl function (by reference) and its
arguments. Whatever the user wrote (env constructors, arguments of ``call``) travels by
value with cloudpickle, as gymnasium.vector does, so nothing needs the user's ``__main__``.
What re-running ``__main__`` used to provide besides, env ids registered with gymnasium by
the script, comes with the job: the worker registers the ids it lacks.

    process, conn = start(serve_env, (pack_constructors([make], [0]),), context="spawn")
"""
from __future__ import annotations

import dataclasses
import multiprocessing.connection
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback
import weakref
from typing import Any, Callable, Sequence

import cloudpickle

CONTEXTS = ("spawn", "forkserver")
# Modules the fork server imports once, so that every worker forked from it starts warm.
# Deliberately light: never JAX.
FORKSERVER_PRELOAD = ("numpy", "gymnasium", "batchrl.envs.process", "batchrl.envs.batch",
                      "batchrl.envs.batch_group")

# The fresh interpreter's first lines: stdlib only, because batchrl itself may be importable
# only through the parent's sys.path (a script that inserts its checkout, say).
_BOOTSTRAP = """\
import pickle, sys
from multiprocessing.connection import Connection
conn = Connection(int(sys.argv[1]))
sys.path[:], _, _ = pickle.loads(conn.recv_bytes())  # cwd and environ: inherited already
from batchrl.envs.launch import {entry}
{entry}(conn, *map(int, sys.argv[2:]))
"""
_PID = struct.Struct("<q")
_STATUS = struct.Struct("<i")


def check_context(context: str) -> str:
  if context not in CONTEXTS:
    raise ValueError(f"context must be one of {CONTEXTS} (fork is unsafe once JAX is loaded), "
                     f"got {context!r}")
  return context


# ---------------------------------------------------------------------------------------
# Sending values.


def dumps(value: Any) -> bytes:
  """Pickles ``value``, sending functions and classes of ``__main__`` (or of no module) by value."""
  return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def pack_constructors(constructors: Sequence, indices: Sequence[int | None]) -> bytes:
  """The constructors of envs ``indices`` as one message (a constructor repeated is sent once).

  Raises TypeError naming the first env whose constructor cannot be sent, and why.
  """
  try:
    return dumps(list(constructors))
  except Exception as exc:  # pickling raises PicklingError, TypeError, AttributeError, ...
    error = exc
  tried: set[int] = set()
  for constructor, index in zip(constructors, indices):
    if id(constructor) in tried:
      continue
    tried.add(id(constructor))
    try:
      dumps(constructor)
    except Exception as exc:
      where = "an environment" if index is None else f"environment {index}"
      raise TypeError(_unsendable(f"the constructor of {where}, {constructor!r},", exc)) from exc
  raise TypeError(_unsendable("the environment constructors", error)) from error


def _unsendable(what: str, exc: Exception) -> str:
  return (f"{what} cannot be sent to a worker process ({type(exc).__name__}: {exc}). A "
          "constructor travels by value together with everything it refers to: create "
          "open files, locks, sockets, simulators or an already made env inside the "
          "constructor rather than capturing them, or pass num_workers=0 to keep the envs "
          "in this process.")


def send_fd(conn, fd: int) -> None:
  """Sends a file descriptor over a worker's connection (a Unix socket); see ``recv_fd``."""
  sock = socket.socket(fileno=os.dup(conn.fileno()))
  try:
    socket.send_fds(sock, [b"d"], [fd])
  finally:
    sock.close()


def recv_fd(conn) -> int:
  """Receives a descriptor sent by ``send_fd``; call right after the message announcing it."""
  sock = socket.socket(fileno=os.dup(conn.fileno()))
  try:
    _, fds, _, _ = socket.recv_fds(sock, 1, 1)
  finally:
    sock.close()
  if not fds:
    raise EOFError("the other end sent no file descriptor")
  return fds[0]


# ---------------------------------------------------------------------------------------
# Parent side: starting a worker.


def start(target: Callable, args: tuple, context: str = "spawn"):
  """Starts ``target(conn, *args)`` in a new worker; returns (process, connection).

  ``target`` must be a module-level function of an importable module (it is sent by name);
  ``args`` are pickled (values of the user's are best packed with ``dumps`` first). Does not
  wait for the worker to start.
  """
  check_context(context)
  conn, child = multiprocessing.Pipe()
  alive_r, alive_w = os.pipe()
  try:
    if context == "spawn":
      process = _spawn(child.fileno(), alive_r)
    else:
      process = _fork_server().fork(child.fileno(), alive_r)
  except BaseException:
    os.close(alive_w)
    conn.close()
    raise
  finally:
    child.close()  # only the worker may hold its end, so that its death shows here as EOF
    os.close(alive_r)
  # The worker watches the read end of this pipe: EOF means this process is gone.
  weakref.finalize(process, os.close, alive_w)
  conn.send_bytes(_header())
  job = (target, args, _registrations())
  conn.send_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
  return process, conn


def _header() -> bytes:
  """What a worker takes from this process: sys.path, working directory, environment.

  A spawned worker gets the directory and environment at its start anyway; a forked one
  gets the fork server's, which may be older.
  """
  cwd = os.getcwd()
  path = [cwd if entry == "" else entry for entry in sys.path]
  return pickle.dumps((path, cwd, dict(os.environ)))


def _registrations() -> list[bytes]:
  """This process's gymnasium registry, one pickled EnvSpec each (empty if not imported).

  Ids registered by the user's script or notebook, or by packages it imported, exist in a
  worker only if they are registered there too; a worker adds those it lacks. An entry
  point given as a '__main__:Name' string is sent as the object itself (by value).
  """
  gym = sys.modules.get("gymnasium")
  if gym is None:
    return []
  main = sys.modules.get("__main__")
  specs = []
  for spec in list(gym.registry.values()):
    entry = spec.entry_point
    if isinstance(entry, str) and entry.startswith("__main__:"):
      entry = getattr(main, entry.partition(":")[2], None)
      if entry is None:
        continue
      spec = dataclasses.replace(spec, entry_point=entry)
    try:
      specs.append(dumps(spec))
    except Exception:  # e.g. kwargs holding a lock: that id cannot be made in a worker
      continue
  return specs


def _register_missing(specs: list[bytes]) -> None:
  if not specs:
    return
  import gymnasium
  registry = gymnasium.envs.registration.registry
  for data in specs:
    try:
      spec = pickle.loads(data)
    except Exception:  # e.g. an entry point of a module this worker cannot import
      continue
    if spec.id not in registry:
      registry[spec.id] = spec


def _spawn(fd: int, alive_fd: int) -> "SpawnedProcess":
  code = _BOOTSTRAP.format(entry="run_worker")
  popen = subprocess.Popen([sys.executable, "-c", code, str(fd), str(alive_fd)],
                           pass_fds=(fd, alive_fd), stdin=subprocess.DEVNULL)
  return SpawnedProcess(popen)


class SpawnedProcess:
  """A worker that is our child: ``subprocess.Popen`` behind multiprocessing's names."""

  def __init__(self, popen: subprocess.Popen):
    self._popen = popen
    self.pid = popen.pid

  @property
  def exitcode(self) -> int | None:
    """None while running; negative for a signal, as in multiprocessing."""
    return self._popen.poll()

  def is_alive(self) -> bool:
    return self._popen.poll() is None

  def join(self, timeout: float | None = None) -> None:
    try:
      self._popen.wait(timeout)
    except subprocess.TimeoutExpired:
      pass

  def terminate(self) -> None:
    self._send(signal.SIGTERM)

  def kill(self) -> None:
    self._send(signal.SIGKILL)

  def _send(self, sig: int) -> None:
    if self._popen.poll() is None:
      try:
        self._popen.send_signal(sig)
      except ProcessLookupError:
        pass


class ForkedProcess:
  """A worker forked by the fork server; its exit code comes through a status pipe."""

  def __init__(self, pid: int, status_fd: int):
    self.pid = pid
    self._status_fd = status_fd
    self._exitcode: int | None = None
    self._close = weakref.finalize(self, os.close, status_fd)

  @property
  def exitcode(self) -> int | None:
    self.join(0)
    return self._exitcode

  def is_alive(self) -> bool:
    return self.exitcode is None

  def join(self, timeout: float | None = None) -> None:
    if self._exitcode is not None:
      return
    if not select.select([self._status_fd], [], [], timeout)[0]:
      return
    data = os.read(self._status_fd, _STATUS.size)
    # No status at all: the fork server itself died; the worker is gone or orphaned.
    self._exitcode = _STATUS.unpack(data)[0] if len(data) == _STATUS.size else 255
    self._close()

  def terminate(self) -> None:
    self._send(signal.SIGTERM)

  def kill(self) -> None:
    self._send(signal.SIGKILL)

  def _send(self, sig: int) -> None:
    if self.is_alive():
      try:
        os.kill(self.pid, sig)
      except ProcessLookupError:
        pass


class _ForkServer:
  """A clean process (no JAX, preloaded gymnasium) that forks workers on request."""

  def __init__(self):
    self.owner = os.getpid()
    self.lock = threading.Lock()
    self.sock, child = socket.socketpair()
    try:
      code = _BOOTSTRAP.format(entry="serve_forks")
      self.popen = subprocess.Popen([sys.executable, "-c", code, str(child.fileno())],
                                    pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL)
    finally:
      child.close()
    conn = multiprocessing.connection.Connection(os.dup(self.sock.fileno()))
    conn.send_bytes(_header())
    conn.send_bytes(pickle.dumps(FORKSERVER_PRELOAD))
    conn.close()
    # At exit finalizers run newest first: the workers forked from this server are closed
    # (politely, through their status pipes) before the server itself goes.
    weakref.finalize(self, _stop_fork_server, self.owner, self.sock, self.popen)

  def fork(self, fd: int, alive_fd: int) -> ForkedProcess:
    status_r, status_w = os.pipe()
    try:
      with self.lock:
        socket.send_fds(self.sock, [b"f"], [fd, alive_fd, status_w])
        pid = _PID.unpack(_recv_exactly(self.sock, _PID.size))[0]
    except BaseException:
      os.close(status_r)
      raise
    finally:
      os.close(status_w)
    return ForkedProcess(pid, status_r)


_server: _ForkServer | None = None
_server_lock = threading.Lock()


def _fork_server() -> _ForkServer:
  global _server
  with _server_lock:
    if _server is None or _server.owner != os.getpid() or _server.popen.poll() is not None:
      _server = _ForkServer()
    return _server


def _stop_fork_server(owner: int, sock: socket.socket, popen: subprocess.Popen) -> None:
  """Closes the server's socket (it returns on EOF) and reaps it, rather than leaving an
  open socket and a running child to the interpreter's teardown (ResourceWarnings)."""
  if os.getpid() != owner:
    return
  sock.close()
  try:
    popen.wait(2.0)
  except subprocess.TimeoutExpired:
    popen.kill()
    popen.wait()


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
  data = b""
  while len(data) < size:
    chunk = sock.recv(size - len(data))
    if not chunk:
      raise EOFError("the fork server closed its socket")
    data += chunk
  return data


# ---------------------------------------------------------------------------------------
# Worker side.


def run_worker(conn, alive_fd: int) -> None:
  """A worker's main: stay quiet on Ctrl-C, die with the parent, run the job."""
  # Ctrl-C reaches the whole process group; the parent handles it and closes us. A worker
  # that died of KeyboardInterrupt mid-step would only add a second, confusing traceback.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  # A worker stuck inside a hung env never reads EOF on its pipe; this watchdog ends it
  # when the parent is gone, even if the parent was killed without closing anything.
  threading.Thread(target=_exit_when_orphaned, args=(alive_fd,), daemon=True).start()
  target, args, specs = pickle.loads(conn.recv_bytes())
  _register_missing(specs)
  target(conn, *args)


def _exit_when_orphaned(alive_fd: int) -> None:
  select.select([alive_fd], [], [])  # readable only at EOF: nothing is ever written to it
  os._exit(1)


def serve_forks(conn) -> None:
  """The fork server's main: preload, then fork one worker per request until EOF."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  for name in pickle.loads(conn.recv_bytes()):
    try:
      __import__(name)
    except Exception:  # a worker that needs it imports it again, and reports the error
      pass
  sock = socket.socket(fileno=os.dup(conn.fileno()))
  conn.close()
  wake_r, wake_w = os.pipe()
  os.set_blocking(wake_w, False)
  signal.set_wakeup_fd(wake_w)
  signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select() through wake_w
  children: dict[int, int] = {}  # pid -> write end of its status pipe
  while True:
    ready = select.select([sock, wake_r], [], [])[0]
    if wake_r in ready:
      os.read(wake_r, 4096)
      _reap(children)
    if sock in ready:
      message, fds, _, _ = socket.recv_fds(sock, 16, 3)
      if not message:  # the parent is gone
        return
      pid = os.fork()
      if pid == 0:
        _forked_child(fds, sock, [wake_r, wake_w, *children.values()])
      for fd in fds[:2]:
        os.close(fd)
      children[pid] = fds[2]
      sock.sendall(_PID.pack(pid))


def _reap(children: dict[int, int]) -> None:
  while children:
    try:
      pid, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
      return
    if pid == 0:
      return
    fd = children.pop(pid, None)
    if fd is not None:
      os.write(fd, _STATUS.pack(os.waitstatus_to_exitcode(status)))
      os.close(fd)


def _forked_child(fds: list[int], sock: socket.socket, server_fds: list[int]) -> None:
  """Runs in a fresh fork of the server; never returns."""
  code = 1
  try:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sock.close()
    for fd in [*server_fds, fds[2]]:
      os.close(fd)
    conn = multiprocessing.connection.Connection(fds[0])
    sys.path[:], cwd, environ = pickle.loads(conn.recv_bytes())
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environ)
    run_worker(conn, fds[1])
    code = 0
  except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
  except BaseException:
    traceback.print_exc()
  finally:
    for stream in (sys.stdout, sys.stderr):
      try:
        stream.flush()
      except Exception:  # a closed or broken stream: nothing more to say
        pass
    os._exit(code)


__all__ = ["CONTEXTS", "check_context", "dumps", "pack_constructors", "start", "run_worker",
           "serve_forks", "SpawnedProcess", "ForkedProcess"]
