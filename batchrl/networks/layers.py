"""The layer types of the JSON network builder: their keys, shape rules and flax code.

Each layer type is one entry in ``LAYER_KEYS`` (valid keys, their checks and defaults), one
shape rule (``infer_shape``: per-sample input shape -> output shape, without running flax) and
one apply function (``apply_layer``: runs inside the builder's compact ``__call__`` on a batch
``x[N, *in_shape]``). Shapes here never include the batch axis.

Checking keys and shapes up front is the point: a typo or a conv2d on a vector state fails at
``validate_network_spec`` with the layer's path, not deep inside a traced flax call.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from batchrl.errors import UserInputError, did_you_mean
from batchrl.networks.conv import Conv


class NetworkSpecError(UserInputError):
  """A network spec that cannot be built; the message names the path, the key and what is valid."""


ACTIVATIONS: dict[str, Callable] = {
  "tanh": nn.tanh, "relu": nn.relu, "elu": nn.elu, "selu": nn.selu, "sigmoid": nn.sigmoid,
  "softplus": nn.softplus, "swish": nn.silu, "silu": nn.silu, "gelu": nn.gelu,
  "leaky_relu": nn.leaky_relu, "none": lambda x: x, "linear": lambda x: x,
}


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
_ACTIVATION = _choice(*ACTIVATIONS)
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
}


def infer_shape(kind: str, options: dict, shape: tuple[int, ...], where: str) -> tuple[int, ...]:
  """Per-sample output shape of a layer, or ``NetworkSpecError`` naming ``where``."""
  try:
    return tuple(_SHAPE_RULES[kind](options, tuple(shape)))
  except _Invalid as error:
    raise NetworkSpecError(f"{where} {error}") from None


# ----------------------------------------------------------------------------- flax

class Dueling(nn.Module):
  """Q-values ``V(s) + A(s, a) - mean_a A(s, a)``: ``[N, D] -> [N, size]``."""

  size: int

  @nn.compact
  def __call__(self, x):
    value = nn.Dense(1, name="value")(x)
    advantage = nn.Dense(self.size, name="advantage")(x)
    return value + advantage - advantage.mean(axis=-1, keepdims=True)


def _conv(layer: LayerPlan, x, window, stride):
  o = dict(layer.options)
  y = Conv(o["size"], kernel_size=window, strides=stride, padding=o["padding"].upper(),
           use_bias=o["bias"], name=layer.name)(x)
  return ACTIVATIONS[o["activation"]](y)


def _pool(layer: LayerPlan, x):
  o = dict(layer.options)
  if len(layer.in_shape) == 2:  # 'pooling' on [length, channels]: global over length
    return x.max(axis=1) if o["pooling_type"] == "max" else x.mean(axis=1)
  padding = o["padding"].upper()
  if o["pooling_type"] == "max":
    return nn.max_pool(x, o["window"], o["stride"], padding)
  return nn.avg_pool(x, o["window"], o["stride"], padding, count_include_pad=False)


def _dense(layer: LayerPlan, x, activation: str):
  y = nn.Dense(layer.opt("size"), use_bias=layer.opt("bias"), name=layer.name)(x)
  return ACTIVATIONS[activation](y)


def _recurrent(layer: LayerPlan, x, carry):
  if carry is None:
    raise ValueError(f"{layer.path} ({layer.type}) has no carry; pass "
                     "network.initial_carry(batch) (or the carry the last call returned)")
  cell_type = nn.OptimizedLSTMCell if layer.type == "lstm" else nn.GRUCell
  new_carry, y = cell_type(layer.opt("size"), name=layer.name)(carry, x)
  return y, new_carry


def apply_layer(layer: LayerPlan, x, carry, deterministic: bool):
  """One layer on ``x[N, *layer.in_shape]`` -> ``(x[N, *layer.out_shape], new_carry | None)``.

  Must run inside a compact flax method (it creates the layer's submodule there).
  """
  kind, n = layer.type, x.shape[0]
  if kind == "embedding":
    return nn.Embed(layer.opt("num_values"), layer.opt("size"), name=layer.name)(
        x.astype(jnp.int32)), None
  if not jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(jnp.float32)  # int / bool states fed to other layers count as numbers
  if kind in ("dense", "linear", "lstm", "gru", "dueling") and layer.in_shape == ():
    x = x[:, None]
  if kind in RECURRENT_TYPES:
    return _recurrent(layer, x, carry)
  if kind == "dense":
    y = _dense(layer, x, layer.opt("activation"))
  elif kind == "linear":
    y = _dense(layer, x, "none")
  elif kind == "conv1d":
    y = _conv(layer, x, (layer.opt("window"),), (layer.opt("stride"),))
  elif kind == "conv2d":
    y = _conv(layer, x, layer.opt("window"), layer.opt("stride"))
  elif kind in ("pool2d", "pooling"):
    y = _pool(layer, x)
  elif kind in ("flatten", "reshape"):
    y = x.reshape((n,) + layer.out_shape)
  elif kind == "layer_norm":
    y = nn.LayerNorm(epsilon=layer.opt("epsilon"), use_scale=layer.opt("scale"),
                     use_bias=layer.opt("bias"), name=layer.name)(x)
  elif kind == "dropout":
    y = nn.Dropout(layer.opt("rate"), name=layer.name)(x, deterministic=deterministic)
  elif kind == "nonlinearity":
    y = ACTIVATIONS[layer.opt("name")](x)
  elif kind == "dueling":
    y = Dueling(layer.opt("size"), name=layer.name)(x)
  else:  # pragma: no cover - specs are validated against LAYER_KEYS before this runs
    raise AssertionError(f"layer type {kind!r} passed validation but has no apply branch; "
                         "LAYER_KEYS and apply_layer must list the same types")
  return y, None


def initial_layer_carry(layer: LayerPlan, batch: int):
  """Zeros: ``[batch, size]`` for gru, ``(c, h)`` of that shape for lstm."""
  zeros = jnp.zeros((batch, layer.opt("size")), jnp.float32)
  return (zeros, zeros) if layer.type == "lstm" else zeros
