"""The layer types of the JSON network builder, checked without JAX: their keys, their checks
and defaults (``LAYER_KEYS``, ``check_layer``) and their shape rules (``infer_shape``:
per-sample input shape -> output shape). ``batchrl.networks.layers`` holds the flax code that
applies each type; configs check their layer specs here before JAX is imported. Shapes here
never include the batch axis.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from batchrl.errors import UserInputError, did_you_mean


class NetworkSpecError(UserInputError):
  """A network spec that cannot be built; the message names the path, the key and what is valid."""


# the names of ``batchrl.networks.layers.ACTIVATIONS``
ACTIVATION_NAMES = ("tanh", "relu", "elu", "selu", "sigmoid", "softplus", "swish", "silu", "gelu",
                    "leaky_relu", "none", "linear")


class _Invalid(Exception):
  """A value check failed; ``check_layer`` adds the path and key."""


def _pos_int(value):
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
    raise _Invalid(f"must be an int >= 1, got {value!r}")
  return int(value)


def _opt_pos_int(value):
  return None if value is None else _pos_int(value)


def _bool(value):
  if not isinstance(value, (bool, np.bool_)):
    raise _Invalid(f"must be true or false, got {value!r}")
  return bool(value)


def _non_negative(value):
  if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not value >= 0:
    raise _Invalid(f"must be a number >= 0, got {value!r}")
  return float(value)


def _rate(value):
  if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not (
      0 <= value < 1):
    raise _Invalid(f"must be a number with 0 <= rate < 1, got {value!r}")
  return float(value)


def _epsilon(value):
  if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not value > 0:
    raise _Invalid(f"must be a number > 0, got {value!r}")
  return float(value)


def _pair(value):
  if isinstance(value, Sequence) and not isinstance(value, str):
    if len(value) != 2:
      raise _Invalid(f"must be an int or a pair [height, width], got {value!r}")
    return (_pos_int(value[0]), _pos_int(value[1]))
  size = _pos_int(value)
  return (size, size)


def _choice(*valid: str):
  def check(value):
    if value not in valid:
      raise _Invalid(f"must be one of {list(valid)}, got {value!r}{did_you_mean(value, valid)}")
    return value
  return check


def _shape(value):
  if not isinstance(value, Sequence) or isinstance(value, str) or any(
      isinstance(v, bool) or not isinstance(v, (int, np.integer)) or (v < 1 and v != -1)
      for v in value) or list(value).count(-1) > 1:
    raise _Invalid(f"must be a list of ints >= 1 (at most one -1), got {value!r}")
  return tuple(int(v) for v in value)


REQUIRED = object()
_ACTIVATION = _choice(*ACTIVATION_NAMES)
_PADDING = _choice("same", "valid")
_REG = {"l1_regularization": (_non_negative, 0.0), "l2_regularization": (_non_negative, 0.0)}
_POOL = {"pooling_type": (_choice("max", "average"), "max"), "window": (_pair, 2),
         "stride": (_pair, 2), "padding": (_PADDING, "same")}

# type -> key -> (check returning the normalised value, default or REQUIRED)
LAYER_KEYS: dict[str, dict[str, tuple[Callable, Any]]] = {
  "dense": {"size": (_pos_int, REQUIRED), "activation": (_ACTIVATION, "tanh"),
            "bias": (_bool, True), **_REG},
  "linear": {"size": (_pos_int, REQUIRED), "bias": (_bool, True), **_REG},
  "conv1d": {"size": (_pos_int, REQUIRED), "window": (_pos_int, 3), "stride": (_pos_int, 1),
             "padding": (_PADDING, "same"), "activation": (_ACTIVATION, "relu"),
             "bias": (_bool, True), **_REG},
  "conv2d": {"size": (_pos_int, REQUIRED), "window": (_pair, 3), "stride": (_pair, 1),
             "padding": (_PADDING, "same"), "activation": (_ACTIVATION, "relu"),
             "bias": (_bool, True), **_REG},
  "pool2d": dict(_POOL),
  "pooling": dict(_POOL),
  "flatten": {},
  "reshape": {"shape": (_shape, REQUIRED)},
  "embedding": {"size": (_pos_int, REQUIRED), "num_values": (_opt_pos_int, None)},
  "dropout": {"rate": (_rate, REQUIRED)},
  "layer_norm": {"epsilon": (_epsilon, 1e-6), "scale": (_bool, True), "bias": (_bool, True)},
  "lstm": {"size": (_pos_int, REQUIRED)},
  "gru": {"size": (_pos_int, REQUIRED)},
  "nonlinearity": {"name": (_ACTIVATION, REQUIRED)},
  "dueling": {"size": (_pos_int, REQUIRED)},
  # SimBa's whole encoder (batchrl.networks.simba): Dense to size, blocks residual blocks of
  # that width, a final LayerNorm
  "simba": {"size": (_pos_int, REQUIRED), "blocks": (_pos_int, 1),
            "activation": (_ACTIVATION, "relu")},
}
RECURRENT_TYPES = ("lstm", "gru")


@dataclasses.dataclass(frozen=True)
class LayerPlan:
  """One checked layer: its type, full options (defaults filled) and per-sample shapes.

  ``name`` is the flax submodule name (its key in ``params`` and in the recurrent carry);
  ``path`` is where it sits in the spec, for messages.
  """

  type: str
  options: tuple[tuple[str, Any], ...]
  in_shape: tuple[int, ...]
  out_shape: tuple[int, ...]
  name: str
  path: str

  def opt(self, key: str) -> Any:
    return dict(self.options)[key]


def check_layer(raw: Any, path: str) -> tuple[str, dict[str, Any]]:
  """``(type, options)`` of one layer dict, every key checked and defaults filled in."""
  if not isinstance(raw, Mapping):
    raise NetworkSpecError(
        f"{path}: a layer is a dict such as {{'type': 'dense', 'size': 64}}, got {raw!r}")
  kind = raw.get("type")
  if kind is None:
    raise NetworkSpecError(f"{path}: the layer has no 'type'; valid types: {sorted(LAYER_KEYS)}")
  if kind not in LAYER_KEYS:
    raise NetworkSpecError(f"{path}: unknown layer type {kind!r}{did_you_mean(kind, LAYER_KEYS)};"
                           f" valid types: {sorted(LAYER_KEYS)}")
  schema = LAYER_KEYS[kind]
  for key in raw:
    if key != "type" and key not in schema:
      raise NetworkSpecError(
          f"{path} ({kind}): unknown key {key!r}{did_you_mean(key, schema)};"
          f" valid keys for {kind}: {sorted(schema)}")
  options = {}
  for key, (check, default) in schema.items():
    if key not in raw:
      if default is REQUIRED:
        raise NetworkSpecError(f"{path} ({kind}): missing required key {key!r}")
      options[key] = check(default)  # normalised like a given value (window 2 -> (2, 2))
      continue
    try:
      options[key] = check(raw[key])
    except _Invalid as error:
      raise NetworkSpecError(f"{path} ({kind}): key {key!r} {error}") from None
  return kind, options


# ----------------------------------------------------------------------------- shapes

def _spatial_out(size: int, window: int, stride: int, padding: str) -> int:
  if padding == "same":
    return -(-size // stride)
  if size < window:
    return 0
  return (size - window) // stride + 1


def _need_rank(shape, ranks: tuple[int, ...], described: str) -> None:
  if len(shape) not in ranks:
    raise _Invalid(f"needs an input of {described}, got shape {shape}")


def _spatial(shape, window, stride, padding, size) -> tuple[int, ...]:
  out = tuple(_spatial_out(n, w, s, padding) for n, w, s in zip(shape[:-1], window, stride))
  if min(out) < 1:
    raise _Invalid(f"window {window} is larger than its input {shape[:-1]} with 'valid' "
                   "padding; use a smaller window or 'same' padding")
  return out + (size,)


def _vector(shape, what: str) -> tuple[int, ...]:
  """Rank 0 is treated as (1,); rank 1 as is; higher ranks need a flatten first."""
  if len(shape) > 1:
    raise _Invalid(f"needs a vector input [features], got shape {shape}; add "
                   f"{{'type': 'flatten'}} before the {what} layer")
  return shape or (1,)


def _features(shape, what: str) -> tuple[int, ...]:
  """Layers over the last (feature) axis need one: a rank-0 input has none."""
  if not shape:
    raise _Invalid(f"needs an input with a feature axis, got a scalar (shape ()); add "
                   f"{{'type': 'reshape', 'shape': [1]}} or a dense layer before the {what} "
                   "layer")
  return shape


def _cell_shape(o, shape, kind: str) -> tuple[int, ...]:
  _vector(shape, kind)
  return (o["size"],)


def _reshape(shape, target) -> tuple[int, ...]:
  total = math.prod(shape)
  known = math.prod(v for v in target if v != -1)
  if -1 in target:
    if known == 0 or total % known:
      raise _Invalid(f"cannot reshape {shape} ({total} values) to {target}")
    return tuple(total // known if v == -1 else v for v in target)
  if known != total:
    raise _Invalid(f"cannot reshape {shape} ({total} values) to {target} ({known} values)")
  return target


def _simba_shape(o, shape) -> tuple[int, ...]:
  if len(shape) > 1:
    encoder = ("conv2d layers, then {'type': 'flatten'}" if len(shape) == 3
               else "{'type': 'flatten'}")
    raise _Invalid(f"needs a vector input [features], got shape {shape}: SimBa's residual "
                   f"blocks act on feature vectors; put an encoder before it ({encoder})")
  return (o["size"],)


def _pool_shape(o, shape) -> tuple[int, ...]:
  _need_rank(shape, (3,), "rank 3 [height, width, channels]")
  return _spatial(shape, o["window"], o["stride"], o["padding"], shape[-1])


def _global_or_pool_shape(o, shape) -> tuple[int, ...]:
  _need_rank(shape, (2, 3), "rank 2 [length, channels] (global pooling) or rank 3 "
             "[height, width, channels] (windowed pooling)")
  return shape[1:] if len(shape) == 2 else _pool_shape(o, shape)


def _conv1d_shape(o, shape) -> tuple[int, ...]:
  _need_rank(shape, (2,), "rank 2 [length, channels]")
  return _spatial(shape, (o["window"],), (o["stride"],), o["padding"], o["size"])


def _conv2d_shape(o, shape) -> tuple[int, ...]:
  _need_rank(shape, (3,), "rank 3 [height, width, channels]")
  return _spatial(shape, o["window"], o["stride"], o["padding"], o["size"])


_SHAPE_RULES: dict[str, Callable[[dict, tuple], tuple]] = {
  "dense": lambda o, s: (s or (1,))[:-1] + (o["size"],),
  "linear": lambda o, s: (s or (1,))[:-1] + (o["size"],),
  "conv1d": _conv1d_shape,
  "conv2d": _conv2d_shape,
  "pool2d": _pool_shape,
  "pooling": _global_or_pool_shape,
  "flatten": lambda o, s: (math.prod(s),),
  "reshape": lambda o, s: _reshape(s, o["shape"]),
  "embedding": lambda o, s: s + (o["size"],),
  "dropout": lambda o, s: s,
  "layer_norm": lambda o, s: _features(s, "layer_norm"),
  "nonlinearity": lambda o, s: s,
  "lstm": lambda o, s: _cell_shape(o, s, "lstm"),
  "gru": lambda o, s: _cell_shape(o, s, "gru"),
  "dueling": lambda o, s: _cell_shape(o, s, "dueling"),
  "simba": _simba_shape,
}


def infer_shape(kind: str, options: dict, shape: tuple[int, ...], where: str) -> tuple[int, ...]:
  """Per-sample output shape of a layer, or ``NetworkSpecError`` naming ``where``."""
  try:
    return tuple(_SHAPE_RULES[kind](options, tuple(shape)))
  except _Invalid as error:
    raise NetworkSpecError(f"{where} {error}") from None


@dataclasses.dataclass(frozen=True)
class RenormSettings:
  """The hyper-parameters of every Batch Renormalization layer of a network
  (``batchrl.networks.batch_renorm``; CrossQ's): the running statistics' decay per training
  pass, the training passes of plain batch normalization before the correction, the
  variance floor and the correction's clips."""

  momentum: float = 0.99
  warmup_steps: int = 100_000
  epsilon: float = 1e-3
  r_max: float = 3.0
  d_max: float = 5.0


def simba_widths_error(widths, where: str) -> str | None:
  """What is wrong with ``widths`` as the widths of SimBa's residual blocks
  (``batchrl.networks.simba``), naming ``where``; None when nothing is: one or more equal
  positive sizes, since each block adds its input to its output."""
  widths = tuple(widths)
  if not widths or any(w < 1 for w in widths):
    return f"{where} must be one or more positive SimBa block widths, got {widths!r}"
  if len(set(widths)) > 1:
    return (f"{where} lists SimBa residual blocks, which add their input to their output, "
            f"so every block has the same width; got {widths!r} (e.g. "
            f"{(widths[0],) * len(widths)!r})")
  return None
