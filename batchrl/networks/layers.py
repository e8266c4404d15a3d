"""The layer types of the JSON network builder as flax code: ``apply_layer`` runs each type
inside the builder's compact ``__call__`` on a batch ``x[N, *in_shape]``.

Each layer type is one entry in ``batchrl.networks.layer_specs.LAYER_KEYS`` (valid keys, their
checks and defaults), one shape rule there (``infer_shape``, without running flax) and one
branch of ``apply_layer`` here. Checking keys and shapes up front is the point: a typo or a
conv2d on a vector state fails at ``validate_network_spec`` with the layer's path, not deep
inside a traced flax call.
"""
from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax.numpy as jnp

from batchrl.networks.conv import Conv
from batchrl.networks.layer_specs import ACTIVATION_NAMES, RECURRENT_TYPES, LayerPlan
from batchrl.networks.simba import Simba

ACTIVATIONS: dict[str, Callable] = {
  "tanh": nn.tanh, "relu": nn.relu, "elu": nn.elu, "selu": nn.selu, "sigmoid": nn.sigmoid,
  "softplus": nn.softplus, "swish": nn.silu, "silu": nn.silu, "gelu": nn.gelu,
  "leaky_relu": nn.leaky_relu, "none": lambda x: x, "linear": lambda x: x,
}
assert tuple(ACTIVATIONS) == ACTIVATION_NAMES, "layer_specs.ACTIVATION_NAMES lists other names"


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
  if kind in ("dense", "linear", "lstm", "gru", "dueling", "simba") and layer.in_shape == ():
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
  elif kind == "simba":
    y = Simba((layer.opt("size"),) * layer.opt("blocks"), ACTIVATIONS[layer.opt("activation")],
              name=layer.name)(x)
  else:  # pragma: no cover - specs are validated against LAYER_KEYS before this runs
    raise AssertionError(f"layer type {kind!r} passed validation but has no apply branch; "
                         "LAYER_KEYS and apply_layer must list the same types")
  return y, None


def initial_layer_carry(layer: LayerPlan, batch: int):
  """Zeros: ``[batch, size]`` for gru, ``(c, h)`` of that shape for lstm."""
  zeros = jnp.zeros((batch, layer.opt("size")), jnp.float32)
  return (zeros, zeros) if layer.type == "lstm" else zeros
