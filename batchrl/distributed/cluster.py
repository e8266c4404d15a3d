"""Starting or joining the Ray instance a distributed run uses, and leaving it clean.

Without an address a run starts a private local Ray instance: its temp dir (sockets, logs,
object spill) lives under the run directory, its token is held in this process's
environment, and nothing is written to the home directory. With an address the run joins an
existing cluster (``ray start --head`` on one machine, ``ray start --address=HEAD:6379`` on
the others). Either way a run only ever stops what it started.
"""
from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import socket
import tempfile
import warnings
from pathlib import Path
from typing import Iterator

from batchrl.errors import UserInputError, missing_extra

log = logging.getLogger("batchrl")

# A Unix socket path has at most 107 bytes; Ray puts its sockets about 70 bytes below its
# temp dir ("session_<date>_<pid>/sockets/plasma_store"), so long run directories are
# reached through a short symbolic link in the system temp dir.
_SOCKET_ROOM = 38
# Ray's driver reads its token once per process and caches it, so every local instance this
# process starts must use the same one: a fresh token per instance fails the second start.
_LOCAL_TOKEN = secrets.token_hex(32)


def import_ray():
  """``ray``, or the one-line error that says how to install it."""
  try:
    import ray
  except ImportError as e:
    raise missing_extra("--ray (distributed training)", "ray", e) from None
  return ray


def check_address(address: str, timeout: float = 5.0) -> None:
  """Fails fast, in one line, when ``HOST:PORT`` cannot be reached (Ray itself would
  retry for a minute and then print a traceback)."""
  if address in ("auto", "local") or address.startswith("ray://"):
    return
  host, sep, port = address.rpartition(":")
  if not sep or not host or not port.isdigit():
    raise UserInputError(f"--address must be HOST:PORT of a Ray head (e.g. 10.0.0.1:6379) "
                         f"or 'auto', got {address!r}.")
  try:
    with socket.create_connection((host, int(port)), timeout=timeout):
      pass
  except OSError as e:
    reason = e.strerror or type(e).__name__
    raise UserInputError(f"cannot reach a Ray cluster at {address}: {reason}. Start one with "
                         "`ray start --head` there, or leave out --address for a local "
                         "instance.") from None


def _short_path(target: Path) -> tuple[str, str | None]:
  """A path to ``target`` short enough for Ray's sockets, and the link made for it."""
  target.mkdir(parents=True, exist_ok=True)
  if len(str(target)) <= _SOCKET_ROOM:
    return str(target), None
  link = os.path.join(tempfile.mkdtemp(prefix="batchrl-ray-"), "t")
  os.symlink(target, link)
  return link, link


def processes_under(temp_dir: Path) -> list[int]:
  """Pids of other processes that hold a file under ``temp_dir`` open (a Ray instance's
  logs and sockets live there). Linux only (reads /proc); elsewhere an empty list."""
  root = os.path.realpath(temp_dir) + os.sep
  proc = Path("/proc")
  if not proc.is_dir() or not os.path.isdir(root):
    return []
  pids = []
  for entry in proc.iterdir():
    if not entry.name.isdigit() or int(entry.name) == os.getpid():
      continue
    try:
      targets = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
    except OSError:  # gone, or not ours to look at
      continue
    if any(t.startswith(root) for t in targets):
      pids.append(int(entry.name))
  return pids


def stop_leftovers(temp_dir: Path) -> list[int]:
  """Kills what is left of an earlier local instance under ``temp_dir`` (a driver killed
  with SIGKILL takes Ray's core with it, but its agents live on); returns their pids. Only
  processes with files open under this run's temp dir are touched."""
  killed = []
  for pid in processes_under(temp_dir):
    try:
      os.kill(pid, signal.SIGKILL)
      killed.append(pid)
    except OSError:
      pass
  if killed:
    log.info("Stopped %d leftover Ray process(es) of an earlier run in %s.", len(killed),
             temp_dir)
  return killed


def stop_autoscaler(temp_dir: Path) -> list[int]:
  """Kills the autoscaler monitor of the local instance under ``temp_dir``; returns its pid.

  Why: ``ray.shutdown()`` stops a local instance's processes one after the other, each with
  SIGTERM and up to a second's wait; the monitor (it sleeps between updates) takes that
  whole second, and so does the GCS while the monitor lives: 1.35-2.1 s of every run's end
  here, against 0.1-0.35 s after this. A local instance's autoscaler holds nothing to save.
  """
  killed = []
  for pid in processes_under(temp_dir):
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        is_monitor = b"autoscaler/_private/monitor.py" in f.read()
      if is_monitor:
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
    except OSError:  # gone meanwhile
      pass
  return killed


@contextlib.contextmanager
def connect(address: str | None, temp_dir: Path, num_cpus: int) -> Iterator[object]:
  """Runs the body connected to Ray: joins ``address``, or starts a local instance with
  ``num_cpus`` CPUs and its temp dir at ``temp_dir``. Yields the ``ray`` module."""
  ray = import_ray()
  if ray.is_initialized():  # e.g. a notebook that called ray.init() itself: use it as is
    yield ray
    return
  link = None
  saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
  try:
    if address is None:
      stop_leftovers(temp_dir)
      path, link = _short_path(Path(temp_dir))
      # Ray turns token auth on for a new local instance and, without a token, writes one
      # to ~/.ray; a token in this process tree's environment keeps the home dir clean.
      if "RAY_AUTH_TOKEN_PATH" not in os.environ:
        os.environ.setdefault("RAY_AUTH_TOKEN", _LOCAL_TOKEN)
      # (its notice that token auth is on is not news to our users)
      notice = logging.getLogger("ray._private.authentication.authentication_token_setup")
      level, notice.level = notice.level, logging.ERROR
      try:
        with warnings.catch_warnings():
          # Ray starts its processes with fork+exec (subprocess), which JAX's warning about
          # fork in a multithreaded process cannot tell apart from a bare fork; JAX may run
          # by now (the learner is built while Ray starts)
          warnings.filterwarnings("ignore", "os.fork\\(\\) was called", RuntimeWarning)
          ray.init(num_cpus=num_cpus, _temp_dir=path, include_dashboard=False,
                   log_to_driver=False, configure_logging=True, logging_level=logging.WARNING)
      finally:
        notice.setLevel(level)
    else:
      try:
        ray.init(address=address, log_to_driver=False, configure_logging=True,
                 logging_level=logging.WARNING)
      except (ConnectionError, RuntimeError) as e:
        raise UserInputError(
            f"cannot join the Ray cluster at {address}: {str(e).splitlines()[0]}. If the "
            "cluster uses token authentication (the default of `ray start --head`), give "
            "this process the head's token: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or "
            "RAY_AUTH_TOKEN_PATH).") from None
    yield ray
  finally:
    if address is None and ray.is_initialized():
      stop_autoscaler(temp_dir)
    if ray.is_initialized():
      ray.shutdown()
    if address is None:
      stop_leftovers(temp_dir)
    for key, value in saved.items():
      if value is None:
        os.environ.pop(key, None)
      else:
        os.environ[key] = value
    if link is not None:
      shutil.rmtree(os.path.dirname(link), ignore_errors=True)
