"""The one error type for mistakes in what a user gave us (a config key, an env id, a spec,
a path), as opposed to bugs.

Every such error derives from ``UserInputError`` (itself a ``ValueError``, so existing
``except ValueError`` code keeps working). The command line catches it and prints one line
with exit code 2; anything else is a genuine bug and keeps its traceback.
"""
from __future__ import annotations

import difflib
from typing import Any, Iterable

SUGGESTION_CUTOFF = 0.6  # difflib's similarity ratio a valid name needs to be suggested


def close_matches(word: Any, options: Iterable[Any], n: int = 3) -> list[str]:
  """Up to ``n`` of ``options`` close to ``word`` (best first), by one rule everywhere."""
  return difflib.get_close_matches(str(word), [str(o) for o in options], n=n,
                                   cutoff=SUGGESTION_CUTOFF)


def did_you_mean(word: Any, options: Iterable[Any], n: int = 1) -> str:
  """`` (did you mean 'x'?)`` (or ``'x' or 'y'`` for ``n`` > 1) when a close option
  exists, else an empty string: the one way a "did you mean" hint is written."""
  close = close_matches(word, options, n)
  return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


class UserInputError(ValueError):
  """Something the user gave is wrong; the message says what, and what is valid."""


def missing_extra(what: str, extra: str, error: BaseException | None = None) -> UserInputError:
  """The error for an optional dependency that is not installed."""
  cause = f" ({error})" if error else ""
  return UserInputError(f"{what} needs an optional dependency that is not installed{cause}; "
                        f"install it with: pip install \"batchrl[{extra}]\"")


class CheckpointError(RuntimeError):
  """A checkpoint cannot be written or restored; the message says which and why
  (``batchrl.checkpoint`` raises it; here so that the command line catches it without
  importing JAX)."""


class RunFailure(RuntimeError):
  """A run that cannot go on for a reason outside the code (e.g. env runners that keep
  dying); the CLI prints it in one line. The run's checkpoints are kept."""
