"""Optuna, the optional dependency of ``batchrl tune`` (``pip install "batchrl[tune]"``).

Imported in this one place, when a search starts, so that ``batchrl`` and its other commands
never need it (as ``batchrl.plot`` imports matplotlib and ``batchrl.distributed`` Ray).
"""
from __future__ import annotations

from batchrl.errors import missing_extra


def require_optuna():
  """The ``optuna`` module, quiet below warnings (batchrl logs one line per trial itself);
  without Optuna installed, a ``UserInputError`` that says how to install it."""
  try:
    import optuna
  except ImportError as e:
    raise missing_extra("batchrl tune", "tune", e) from e
  optuna.logging.set_verbosity(optuna.logging.WARNING)
  return optuna
