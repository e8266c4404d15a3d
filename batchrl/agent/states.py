"""Users' states checked against the agent's state spec before anything reaches the device.

``check_states`` turns what ``agent.act(states)`` was given into numpy arrays with a leading
batch axis, of the dtype the spec's kind stands for, or raises a ``StateError`` that names
the state and what is wrong with it (shape, dtype, names, NaN, a mask allowing nothing).
"""
from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym
import numpy as np

from batchrl.agent.errors import StateError
from batchrl.specs import named_spaces, space_kinds


def all_finite(x: np.ndarray) -> bool:
  # np.count_nonzero instead of .all(): numpy's reductions cost several times more on the
  # small arrays of one step
  return np.count_nonzero(np.isfinite(x)) == x.size


def check_states(raw: gym.Space, masks: dict, states, kinds=None):
  """User states -> (numpy arrays with a leading batch axis k, whether batched).

  ``masks``: the mask states (``<action>_mask``); one not given allows every action.
  ``kinds``: ``space_kinds(raw)`` if the caller has it (it is slow to compute).
  """
  kinds = space_kinds(raw) if kinds is None else kinds
  named = named_spaces(raw)
  if named is None:
    if isinstance(states, Mapping):
      raise StateError(f"expected one state of shape {raw.shape}, got a dict with "
                       f"{sorted(states)}; this agent has a single unnamed state.")
    return check_leaf("state", raw, states, kinds)
  if not isinstance(states, Mapping):
    raise StateError(f"expected a dict of named states {sorted(named)}, got "
                     f"{type(states).__name__}.")
  missing = [n for n in named if n not in states and n not in masks]
  extra = [n for n in states if n not in named]
  if missing or extra:
    raise StateError(f"states must be named {sorted(named)}; missing {missing}, "
                     f"unknown {extra}.")
  out, batch = {}, None
  for name, space in named.items():
    if name not in states:
      continue
    out[name], batched = check_leaf(name, space, states[name], kinds[name])
    if batch is not None and batched != batch[0]:
      raise StateError("give every named state either as one value or as a batch, not mixed.")
    if batch is not None and out[name].shape[0] != batch[1]:
      raise StateError(f"state {name!r} has a batch of {out[name].shape[0]}, others "
                       f"{batch[1]}.")
    batch = (batched, out[name].shape[0])
  for name in masks:
    if name not in out:
      out[name] = np.ones((batch[1],) + tuple(named[name].shape), bool)
    elif not out[name].any(axis=-1).all():
      raise StateError(f"mask {name!r} allows no action for some element; at least one "
                       "value must be True (allowed).")
  return out, batch[0]


def check_leaf(name: str, space: gym.Space, value, kind: str):
  """One state -> (``[k, *shape]`` array of ``DTYPES[kind]``, whether it was a batch)."""
  try:
    array = np.asarray(value)
  except Exception as e:  # ragged lists and the like
    raise StateError(f"state {name!r} cannot be read as an array: {e}") from None
  shape = tuple(space.shape)
  if array.shape == shape:
    batched = False
    array = array[None]
  elif array.ndim == len(shape) + 1 and array.shape[1:] == shape:
    batched = True
  else:
    raise StateError(f"state {name!r} must have shape {shape} (or a batch [k, *{shape}]), "
                     f"got {array.shape}.")
  if kind == "float":
    if array.dtype.kind not in "fiub":
      raise StateError(f"state {name!r} must be numbers, got dtype {array.dtype}.")
    array = array.astype(np.float32, copy=False)
    if not all_finite(array):
      raise StateError(f"state {name!r} contains NaN or inf.")
  elif kind == "int":
    if array.dtype.kind not in "iub":
      raise StateError(f"state {name!r} must be ints, got dtype {array.dtype}.")
    array = array.astype(np.int32, copy=False)
  else:
    if array.dtype.kind not in "bi":
      raise StateError(f"state {name!r} must be bools, got dtype {array.dtype}.")
    array = array.astype(bool, copy=False)
  return array, batched
