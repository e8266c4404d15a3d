"""Atari ids through the optional ``batchrl[atari]`` extra (``ale-py``, which ships the ROMs).

``gymnasium.make`` knows the ALE ids (``ALE/Breakout-v5``, ``BreakoutNoFrameskip-v4``...)
only after ``gymnasium.register_envs(ale_py)``. ``make_gym`` (``batchrl.envs.core``) calls
``ensure_registered`` for any id gymnasium does not know yet, so the ids work everywhere an
id is accepted (``batchrl train`` / ``run``, ``Agent.create(environment=...)``, ``Runner``,
worker processes); without the extra an Atari-looking id is one line naming it.
"""
from __future__ import annotations

import importlib
import re

import gymnasium as gym

from batchrl.errors import UserInputError, missing_extra

# ALE/<Game>-v5 and the legacy <Game>[NoFrameskip|Deterministic]-v0/v4 ids of ale-py.
_ATARI_ID = re.compile(r"^(ALE/.+|[A-Z][A-Za-z]*(NoFrameskip|Deterministic)-v[04])$")

_registered = False


def looks_like_atari(env_id: str) -> bool:
  """Whether an id has the shape of an ALE id (decided without importing ale-py)."""
  return bool(_ATARI_ID.match(env_id))


def is_atari(env_id: str) -> bool:
  """Whether gymnasium builds ``env_id`` with ale-py (registering the ALE ids first)."""
  ensure_registered(env_id)
  spec = gym.registry.get(env_id)
  return spec is not None and str(spec.entry_point).startswith("ale_py")


def import_ale():
  """``ale_py``, or a one-line error naming ``pip install "batchrl[atari]"``.

  The one place the optional extra is imported (lazily: most users never need it)."""
  try:
    return importlib.import_module("ale_py")
  except ImportError as error:
    raise missing_extra("Atari environments", "atari", error) from None


def ensure_registered(env_id: str) -> None:
  """Registers the ALE ids with gymnasium when ``env_id`` is not known yet and ale-py is
  installed; an unknown Atari-looking id without ale-py is the missing-extra error."""
  global _registered
  if _registered or env_id in gym.registry:
    return
  try:
    ale_py = importlib.import_module("ale_py")
  except ImportError as error:
    if looks_like_atari(env_id):
      raise missing_extra(f"environment {env_id!r}", "atari", error) from None
    return  # not an Atari id: gymnasium's unknown-id error follows
  gym.register_envs(ale_py)
  _registered = True


def rom_error(env_id: str, error: Exception) -> UserInputError | None:
  """A clear error when ale-py could not load the game's ROM (None for other errors)."""
  text = str(error)
  if "rom" not in text.lower():
    return None
  return UserInputError(f"environment {env_id!r}: ale-py could not load the game's ROM "
                        f"({text}); ale-py >= 0.9 ships the ROMs: pip install -U "
                        "\"batchrl[atari]\"")
