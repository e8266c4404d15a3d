"""Spec dicts (TensorForce style) <-> Gymnasium spaces, and the EnvSpec pair.

EnvSpec is what agents are initialised from: the single-env observation and action spaces.

Spec dicts, the one place they are converted (``to_space`` / ``from_space``):

================================================================  ==========================
spec                                                              space
================================================================  ==========================
``dict(type='float', shape=(3,))``                                ``Box(-inf, inf, (3,))``
``dict(type='float', shape=(2,), min_value=-1., max_value=1.)``   ``Box(-1, 1, (2,))``
``dict(type='int', num_values=2)`` (alias ``num_actions``)        ``Discrete(2)``
``dict(type='int', shape=(3,), num_values=4)``                    ``MultiDiscrete([4, 4, 4])``
``dict(type='int', shape=(2,), min_value=0, max_value=255,        ``Box(0, 255, (2,), uint8)``
dtype='uint8')`` (bounds and no ``num_values``)
``dict(type='bool', shape=(4,))`` (shape ``()`` by default)       ``MultiBinary(4)``
``dict(type='tuple', items=[spec, ...])``                         ``Tuple([...])``
``dict(pos=spec, grip=spec)`` (every value a spec)                ``Dict(pos=..., grip=...)``
================================================================  ==========================

Optional keys: ``dtype`` (float: float16/32/64, default float32; int: any int dtype, default
int64), ``start`` (int with ``num_values``: first value, default 0). ``min_value`` /
``max_value`` are scalars or arrays broadcastable to ``shape``; ``num_values`` and ``start``
may be arrays of ``shape``. A mapping is one spec when its ``type`` is a string, otherwise a
dict of named specs. ``from_space`` writes ``num_values`` and leaves out keys at their defaults,
so ``to_space(from_space(space))`` gives back the same shape, dtype and bounds.

The kind of a state or action space (``space_kind``: 'bool', 'int' or 'float', with its host
dtype in ``DTYPES``) is how ``batchrl.Agent`` checks and stores its values, and the dtype of
an exported policy's inputs.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from batchrl.configclass import ConfigError
from batchrl.errors import UserInputError, did_you_mean


@dataclasses.dataclass(frozen=True)
class EnvSpec:
  """Observation and action space of ONE environment (not the batch)."""

  observation_space: gym.Space
  action_space: gym.Space
  num_envs: int = 1  # how many environments the agent acts for at once (batch size of act)

  @classmethod
  def from_env(cls, env) -> "EnvSpec":
    """From a gymnasium env, a gymnasium vector env / BatchEnv (single_* spaces) or an
    in-graph env."""
    obs = getattr(env, "single_observation_space", None) or env.observation_space
    act = getattr(env, "single_action_space", None) or env.action_space
    return cls(obs, act, int(getattr(env, "num_envs", 1)))


class SpecError(UserInputError):
  """A spec dict that cannot describe a space; the message names the key and what is valid."""


SPEC_TYPES = ("float", "int", "bool", "tuple")
_SPEC_KEYS = {
  "float": ("type", "shape", "min_value", "max_value", "dtype"),
  "int": ("type", "shape", "num_values", "num_actions", "start", "min_value", "max_value", "dtype"),
  "bool": ("type", "shape"),
  "tuple": ("type", "items"),
}
_FLOAT_DTYPES = ("float16", "float32", "float64")
_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
SUPPORTED_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary,
                    spaces.Dict, spaces.Tuple)


def to_space(spec: Any) -> gym.Space:
  """The gymnasium space a spec dict describes; raises ``SpecError`` for a bad spec."""
  return _parse(spec, "spec")


def validate_spec(spec: Any) -> None:
  """Raises ``SpecError`` naming the offending key (with its path) and what is valid."""
  _parse(spec, "spec")


def _is_int(value: Any) -> bool:
  return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _parse(spec: Any, path: str) -> gym.Space:
  # Validation and construction share one walk so they can never disagree.
  if not isinstance(spec, Mapping):
    raise SpecError(
      f"{path}: expected a spec dict such as dict(type='float', shape=(3,)) or a dict of "
      f"named specs, got {type(spec).__name__} {spec!r}")
  if isinstance(spec.get("type"), str):
    return _parse_leaf(spec, path)
  if "type" in spec and not isinstance(spec["type"], Mapping):
    raise SpecError(
      f"{path}['type'] must be a string, one of {list(SPEC_TYPES)}, got {spec['type']!r}")
  if spec and all(isinstance(value, Mapping) for value in spec.values()):
    for name in spec:
      if not isinstance(name, str):
        raise SpecError(f"{path}: names of named specs must be strings, got {name!r}")
    return spaces.Dict({name: _parse(sub, f"{path}[{name!r}]") for name, sub in spec.items()})
  typos = [key for key in spec if did_you_mean(key, ["type"])]
  hint = f"; {typos[0]!r} looks like a misspelled 'type'" if typos else ""
  raise SpecError(
    f"{path}: a spec needs 'type', one of {list(SPEC_TYPES)}{hint}; a dict of named specs "
    f"needs every value to be a spec dict. Got keys {sorted(map(str, spec))}")


def _parse_leaf(spec: Mapping, path: str) -> gym.Space:
  kind = spec["type"]
  if kind not in _SPEC_KEYS:
    raise SpecError(
      f"{path}['type'] = {kind!r} is not a spec type{did_you_mean(kind, SPEC_TYPES)}; "
      f"valid types: {list(SPEC_TYPES)}")
  valid = _SPEC_KEYS[kind]
  for key in spec:
    if key not in valid:
      raise SpecError(
        f"{path}: unknown key {key!r} for a {kind!r} spec{did_you_mean(key, valid)}; "
        f"valid keys: {list(valid)}")
  if kind == "tuple":
    return _parse_tuple(spec, path)
  shape = _parse_shape(spec, path)
  if kind == "bool":
    # MultiBinary(n) and MultiBinary((n,)) compare unequal in gymnasium; use the common form.
    return spaces.MultiBinary(shape[0] if len(shape) == 1 else shape)
  if kind == "float":
    dtype = _parse_dtype(spec, _FLOAT_DTYPES, "float32", path)
    low, high = _parse_bounds(spec, shape, dtype, path)
    return spaces.Box(low.astype(dtype), high.astype(dtype), shape, dtype)
  return _parse_int(spec, shape, path)


def _parse_tuple(spec: Mapping, path: str) -> spaces.Tuple:
  items = spec.get("items")
  if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
    raise SpecError(
      f"{path}['items'] must be a list of specs, e.g. dict(type='tuple', "
      f"items=[dict(type='float', shape=(2,)), dict(type='int', num_values=3)]), got {items!r}")
  return spaces.Tuple([_parse(item, f"{path}['items'][{i}]") for i, item in enumerate(items)])


def _parse_shape(spec: Mapping, path: str) -> tuple[int, ...]:
  """The spec's shape as a tuple; an int ``n`` means ``(n,)``; default ``()``."""
  shape = spec.get("shape", ())
  if _is_int(shape):
    shape = (shape,)
  elif isinstance(shape, np.ndarray):
    shape = shape.tolist()
  if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
    raise SpecError(f"{path}['shape'] must be a tuple of ints >= 1 such as (3,), got {shape!r}")
  for index, dim in enumerate(shape):
    if not _is_int(dim) or dim < 1:
      raise SpecError(
        f"{path}['shape'] = {tuple(shape)!r} has dimension {dim!r} at index {index}; "
        f"every dimension must be an int >= 1 (use shape=() for a scalar)")
  return tuple(int(dim) for dim in shape)


def _parse_dtype(spec: Mapping, valid: Sequence[str], default: str, path: str) -> np.dtype:
  name = spec.get("dtype", default)
  try:
    dtype = np.dtype(name)
  except TypeError:
    dtype = None
  if dtype is None or dtype.name not in valid:
    raise SpecError(
      f"{path}['dtype'] = {name!r} is not valid for a {spec['type']!r} spec"
      f"{did_you_mean(name, valid)}; valid dtypes: {list(valid)}")
  return dtype


def _parse_bounds(spec: Mapping, shape: tuple, dtype: np.dtype, path: str):
  """``(low, high)`` arrays of ``shape`` (float64 or int64 / uint64), checked low <= high."""
  low = _parse_bound(spec, "min_value", shape, dtype, path, -np.inf)
  high = _parse_bound(spec, "max_value", shape, dtype, path, np.inf)
  bad = low > high
  if bad.any():
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    at = f" at index {index}" if index else ""
    raise SpecError(
      f"{path}: min_value {low[index]} > max_value {high[index]}{at}; "
      f"min_value must be <= max_value everywhere")
  return low, high


def _parse_bound(spec, key, shape, dtype, path, default) -> np.ndarray:
  where = f"{path}[{key!r}]"
  value = spec.get(key, default)
  array = np.asarray(value)
  if array.dtype.kind not in "iuf":
    raise SpecError(f"{where} must be a number or an array of numbers, got {value!r}")
  if array.dtype.kind == "f" and np.isnan(array).any():
    raise SpecError(f"{where} contains NaN; use a number, or leave the key out for no bound")
  try:
    array = np.broadcast_to(array, shape)
  except ValueError:
    raise SpecError(
      f"{where} has shape {array.shape}, which does not broadcast to the spec's shape {shape}"
    ) from None
  if dtype.kind == "f":
    if (np.abs(array[np.isfinite(array)]) > np.finfo(dtype).max).any():
      raise SpecError(f"{where} = {value!r} is outside the range of {dtype.name}")
    return array.astype(np.float64)
  if array.dtype.kind == "f" and (~np.isfinite(array) | (array != np.round(array))).any():
    raise SpecError(f"{where} = {value!r} must be whole numbers for an int spec")
  info = np.iinfo(dtype)
  if array.size and (int(array.min()) < info.min or int(array.max()) > info.max):
    raise SpecError(f"{where} = {value!r} is outside the range of {dtype.name} "
                    f"[{info.min}, {info.max}]")
  return array.astype(dtype)


def _parse_int(spec: Mapping, shape: tuple, path: str) -> gym.Space:
  dtype = _parse_dtype(spec, _INT_DTYPES, "int64", path)
  if "num_values" in spec and "num_actions" in spec:
    raise SpecError(f"{path}: give num_values or its alias num_actions, not both")
  key = "num_values" if "num_values" in spec else "num_actions"
  if key not in spec:
    return _parse_int_box(spec, shape, dtype, path)
  for bound in ("min_value", "max_value"):
    if bound in spec:
      raise SpecError(
        f"{path}[{bound!r}]: a categorical int spec (with {key}) takes no bounds; its values "
        f"are start .. start + {key} - 1, use 'start' to shift them")
  num = _parse_int_array(spec, key, shape, path, minimum=1)
  start = _parse_int_array(spec, "start", shape, path, minimum=None)
  if shape == ():
    extra = {} if dtype == np.int64 else {"dtype": dtype}
    return spaces.Discrete(int(num), start=int(start), **extra)
  return spaces.MultiDiscrete(num, dtype=dtype, start=start)


def _parse_int_box(spec: Mapping, shape: tuple, dtype: np.dtype, path: str) -> spaces.Box:
  if "min_value" not in spec or "max_value" not in spec:
    raise SpecError(
      f"{path}: an int spec needs num_values (categorical, e.g. dict(type='int', "
      f"num_values=2) -> Discrete) or both min_value and max_value (an integer Box)")
  if "start" in spec:
    raise SpecError(f"{path}['start'] only applies with num_values; an integer Box uses "
                    f"min_value and max_value")
  low, high = _parse_bounds(spec, shape, dtype, path)
  return spaces.Box(low, high, shape, dtype)


def _parse_int_array(spec, key, shape, path, minimum) -> np.ndarray:
  value = spec.get(key, 0)
  array = np.asarray(value)
  if array.dtype.kind not in "iu":
    raise SpecError(f"{path}[{key!r}] must be an int or an array of ints, got {value!r}")
  if minimum is not None and (array < minimum).any():
    raise SpecError(f"{path}[{key!r}] = {value!r} must be >= {minimum} "
                    f"(the number of choices)")
  try:
    return np.broadcast_to(array, shape).astype(np.int64)
  except ValueError:
    raise SpecError(f"{path}[{key!r}] has shape {array.shape}, which does not broadcast to "
                    f"the spec's shape {shape}") from None


def from_space(space: gym.Space) -> dict:
  """The spec dict of a Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple space."""
  if isinstance(space, spaces.Box):
    return _box_spec(space)
  if isinstance(space, spaces.Discrete):
    spec = dict(type="int", shape=(), num_values=int(space.n))
    return _with_defaults_left_out(spec, start=int(space.start), dtype=space.dtype)
  if isinstance(space, spaces.MultiDiscrete):
    if space.shape == ():
      raise SpecError(f"{space} has shape (); it has no spec form, use Discrete({space.nvec})")
    spec = dict(type="int", shape=tuple(space.shape), num_values=_compact(space.nvec))
    return _with_defaults_left_out(spec, start=_compact(space.start), dtype=space.dtype)
  if isinstance(space, spaces.MultiBinary):
    return dict(type="bool", shape=tuple(int(d) for d in space.shape))
  if isinstance(space, spaces.Tuple):
    return dict(type="tuple", items=[from_space(item) for item in space.spaces])
  if isinstance(space, spaces.Dict):
    return _dict_spec(space)
  names = [cls.__name__ for cls in SUPPORTED_SPACES]
  raise SpecError(f"space {space!r} ({type(space).__name__}) has no spec form; "
                  f"supported spaces: {names}")


def _dict_spec(space: spaces.Dict) -> dict:
  if not space.spaces:
    raise SpecError("an empty Dict space has no spec form; give it at least one named space")
  for name in space.spaces:
    if not isinstance(name, str):
      raise SpecError(f"Dict space key {name!r} must be a string to become a named spec")
  return {name: from_space(sub) for name, sub in space.spaces.items()}


def _box_spec(space: spaces.Box) -> dict:
  dtype = np.dtype(space.dtype)
  if dtype.kind == "f":
    spec = dict(type="float", shape=tuple(space.shape))
    # Infinite bounds are the float default, so an unbounded Box writes no bounds.
    if not np.all(np.isneginf(space.low)):
      spec["min_value"] = _compact(space.low)
    if not np.all(np.isposinf(space.high)):
      spec["max_value"] = _compact(space.high)
    return _with_defaults_left_out(spec, dtype=dtype, default_dtype="float32")
  if dtype.kind in "iu":
    spec = dict(type="int", shape=tuple(space.shape), min_value=_compact(space.low),
                max_value=_compact(space.high))
    return _with_defaults_left_out(spec, dtype=dtype)
  raise SpecError(f"Box of dtype {dtype.name} has no spec form; use a float or int dtype")


def _compact(array: np.ndarray):
  """A Python scalar when every element is equal (or the array is 0-d), else a nested list."""
  array = np.asarray(array)
  if array.size and np.all(array == array.flat[0]):
    return array.flat[0].item()
  return array.tolist()


def _with_defaults_left_out(spec: dict, dtype, start=0, default_dtype="int64") -> dict:
  if start != 0:
    spec["start"] = start
  if np.dtype(dtype).name != default_dtype:
    spec["dtype"] = np.dtype(dtype).name
  return spec


DTYPES = {"float": np.float32, "int": np.int32, "bool": np.bool_}  # per kind, on the host


def space_kind(space: gym.Space) -> str:
  """'bool', 'int' or 'float': how values of ``space`` are checked and stored."""
  if isinstance(space, gym.spaces.MultiBinary):
    return "bool"
  if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
    return "int"
  if isinstance(space, gym.spaces.Box):
    return "float" if np.issubdtype(space.dtype, np.floating) else "int"
  raise ConfigError(f"states and actions must be bool, int or float specs (or a dict of "
                    f"named ones), got {space}.")


def named_spaces(space: gym.Space) -> dict[str, gym.Space] | None:
  """The named sub-spaces of a dict space; None for a single unnamed one."""
  return dict(space.spaces) if isinstance(space, gym.spaces.Dict) else None


def space_kinds(space: gym.Space):
  """``space_kind`` of the space, or per named sub-space."""
  named = named_spaces(space)
  if named is None:
    return space_kind(space)
  return {name: space_kind(sub) for name, sub in named.items()}
