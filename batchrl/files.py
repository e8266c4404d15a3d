"""Writing files so that a crash never leaves half of one: the one atomic writer.

``write_atomic`` writes into a temporary file beside the target, flushes it to disk
(``fsync``), renames it over the target and syncs the directory, so after a crash the path
holds either the old content or the new one, whole. Every file batchrl writes for a user
to keep (configs, agent specs, exported policies, metric rewrites, checkpoint manifests)
goes through it.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def fsync_dir(path: str | os.PathLike) -> None:
  """Flushes a directory's entries (a rename into it) to disk; a no-op where directories
  cannot be opened (Windows: the rename is all there is)."""
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
  """Writes ``data`` (text as UTF-8, or bytes) to ``path`` whole or not at all; makes the
  parent directories; returns the path."""
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(payload)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    Path(tmp).unlink(missing_ok=True)
    raise
  fsync_dir(path.parent)
  return path
