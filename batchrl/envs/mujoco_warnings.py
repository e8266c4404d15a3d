"""MuJoCo's own warnings while batchrl makes an env: one known deprecation is left out.

MuJoCo reports compiler warnings through a C callback, not Python's ``warnings`` (so no
``warnings`` filter reaches them): without a handler of its own it prints ``WARNING: ...`` to
stderr and appends the line to ``MUJOCO_LOG.TXT`` in the working directory. Gymnasium's
MuJoCo models (HalfCheetah, Ant, ...) still set ``settotalmass``, which MuJoCo 4 deprecates,
so every env made printed that line: a training run printed it once per env, eval env and
worker. ``known_warnings_dropped`` installs a handler while an env is made that drops exactly
that message and prints any other one as MuJoCo does (a handler installed before, e.g. by the
user, gets them instead).
"""
from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Callable, Iterator

import gymnasium as gym

# The deprecation MuJoCo 4 reports for Gymnasium's own models; nothing the user can change.
KNOWN = re.compile(r"compiler attribute 'settotalmass' is deprecated\b")

_lock = threading.Lock()
_depth = 0  # makes under way, over all threads: the handler stays until the last one ends
_previous: Callable[[str], None] | None = None


def is_known(message: str) -> bool:
  """Whether ``message`` (MuJoCo's text, without its ``WARNING: `` prefix) is left out."""
  return KNOWN.match(message) is not None


def _handler(message: str) -> None:
  if is_known(message):
    return
  if _previous is not None:
    _previous(message)
  else:  # MuJoCo's own output when no handler is set
    sys.stderr.write(f"WARNING: {message}\n\n")


def _mujoco_for(env_id: str):
  """The ``mujoco`` module when making ``env_id`` may load a MuJoCo model (the id's entry
  point is one of Gymnasium's MuJoCo envs, or mujoco is imported already), else None."""
  if "mujoco" not in sys.modules:
    entry = str(getattr(gym.registry.get(env_id), "entry_point", "") or "")
    if "mujoco" not in entry:
      return None  # CartPole & co. never import MuJoCo for it
  try:
    import mujoco  # an optional extra (batchrl[mujoco]); gym.make says when it is missing
  except ImportError:
    return None
  return mujoco


@contextlib.contextmanager
def known_warnings_dropped(env_id: str) -> Iterator[None]:
  """While making ``env_id``: MuJoCo's known deprecation warning is not printed (nor
  logged to ``MUJOCO_LOG.TXT``); any other MuJoCo warning is, as before."""
  global _depth, _previous
  mujoco = _mujoco_for(env_id)
  if mujoco is None:
    yield
    return
  with _lock:
    if _depth == 0:
      _previous = mujoco.get_mju_user_warning()
      mujoco.set_mju_user_warning(_handler)
    _depth += 1
  try:
    yield
  finally:
    with _lock:
      _depth -= 1
      if _depth == 0:
        mujoco.set_mju_user_warning(_previous)
        _previous = None
