"""PQN's Q-network: observations -> Q-values per action component, with LayerNorm after
every hidden layer (before its activation), as in the paper's networks (purejaxql's
``QNetwork`` and MinAtar/Atari ``CNN``).

Shapes: ``N`` rows; an action component of shape ``S`` with ``K`` values has Q-values
``[N, *S, K]``, always in a dict keyed by component name (``"action"`` for one unnamed
action), as the replay agents' Q-networks (``batchrl.agents.replay.q_networks``), whose
action components and index conversions this module uses.

Inputs: a single Box state keeps its shape (so conv2d layers see ``[N, H, W, C]``; dense
layers flatten it); a Dict of states (masks split off) is flattened and concatenated, int
states one-hot. Masks (``<action>_mask`` states) only restrict the argmax and exploration.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.agents import spaces
from batchrl.agents.replay.q_networks import (Component, action_masks, components,
                                              split_components)
from batchrl.agents.spaces import SpaceInfo
from batchrl.configclass import ConfigError
from batchrl.networks.layers import ACTIVATIONS


def not_discrete_error(space: gym.Space) -> ConfigError:
  return ConfigError(
      f"PQN learns discrete actions only (it acts by the argmax of Q-values), but the action "
      f"space {space} has a continuous (float) part. For continuous actions use 'ppo', "
      "'sac', 'td3', 'ddpg' or 'naf'.")


def check_discrete(space: gym.Space) -> None:
  """Refuses any action space with a float part, naming the agents that fit."""
  leaves = space.spaces.values() if isinstance(space, gym.spaces.Dict) else [space]
  for leaf in leaves:
    if isinstance(leaf, gym.spaces.Box) and np.issubdtype(leaf.dtype, np.floating):
      raise not_discrete_error(space)


class Conv(nn.Module):
  """A 2-D convolution with ``nn.Conv``'s parameters (``kernel [kh, kw, C, F]``, ``bias``),
  computed on the CPU as image patches times the kernel: XLA:CPU's convolution gradients on
  small channel counts are slow (measured in a minibatch scan, MinAtar's 3x3 conv from 4 to
  16 channels on 128 frames: 11.6 ms a step as a convolution, 2.2 ms as patches). Elsewhere
  the convolution itself. The same function up to float rounding."""

  features: int
  window: tuple[int, int]
  stride: tuple[int, int]
  padding: str  # 'SAME' | 'VALID'
  use_bias: bool

  @nn.compact
  def __call__(self, x):
    kernel = self.param("kernel", nn.initializers.lecun_normal(),
                        self.window + (x.shape[-1], self.features))
    numbers = ("NHWC", "HWIO", "NHWC")
    if jax.default_backend() == "cpu":
      patches = jax.lax.conv_general_dilated_patches(x, self.window, self.stride, self.padding,
                                                     dimension_numbers=numbers)
      # patch features are ordered (channel, row, column): the kernel's axes to match
      y = patches @ jnp.transpose(kernel, (2, 0, 1, 3)).reshape(-1, self.features)
    else:
      y = jax.lax.conv_general_dilated(x, kernel, self.stride, self.padding,
                                       dimension_numbers=numbers)
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros_init(), (self.features,))
    return y


class QNetwork(nn.Module):
  """``[N, ...] -> [N, outputs]``: ``layers`` (each dense/conv2d followed by LayerNorm when
  ``layer_norm``, then its activation), then a linear layer of all Q-values."""

  layers: tuple  # ((type, ((key, value), ...)), ...)
  layer_norm: bool
  outputs: int

  @nn.compact
  def __call__(self, x):
    x = x.astype(jnp.float32)
    for i, (kind, items) in enumerate(self.layers):
      options = dict(items)
      if kind == "flatten":
        x = x.reshape(x.shape[0], -1)
        continue
      if kind == "conv2d":
        x = Conv(options["size"], options["window"], options["stride"],
                 options["padding"].upper(), options["bias"], name=f"conv_{i}")(x)
      else:  # dense on a vector: flatten whatever came before
        x = nn.Dense(options["size"], use_bias=options["bias"],
                     name=f"dense_{i}")(x.reshape(x.shape[0], -1))
      if self.layer_norm:  # over the features (channels of a conv), as the reference code
        x = nn.LayerNorm(name=f"norm_{i}")(x)
      x = ACTIVATIONS[options["activation"]](x)
    return nn.Dense(self.outputs, name="q")(x.reshape(x.shape[0], -1))


@dataclasses.dataclass(frozen=True)
class QNetworks:
  """Pure functions of the Q-network.

  Attributes:
    init: ``key -> params``.
    q_values: ``(params, inputs[N, ...]) -> {name: [N, *S, K]}``; ``inputs`` from ``inputs``.
    inputs: ``obs[N, ...] -> network inputs`` (masks dropped, states joined).
    masks: ``obs[N, ...] -> {name: bool[N, *S, K]}`` (True = allowed; all True without).
    components: the action components.
  """

  init: Callable[[jax.Array], Any]
  q_values: Callable[[Any, Any], dict]
  inputs: Callable[[Any], jax.Array]
  masks: Callable[[Any], dict]
  components: tuple[Component, ...]


@functools.lru_cache(maxsize=64)
def make_networks(layers: tuple, layer_norm: bool, info: SpaceInfo) -> QNetworks:
  """Q-networks over ``info``'s spaces; ``layers`` as ``config.network_layers`` gives them
  (cached: the same object across traces)."""
  check_discrete(info.action_space)
  comps = components(info)
  module = QNetwork(layers, layer_norm, sum(c.size for c in comps))
  state_space = info.network_space
  _check_convolutions(layers, state_space)

  def inputs(obs):
    states, _ = spaces.split_masks(info, obs)
    return _join(state_space, states)

  def init(key):  # arrays are made per call: this object is cached across traces
    return module.init(key, inputs(spaces.zero_obs(info, (1,))))["params"]

  def q_values(params, x):
    return split_components(module.apply({"params": params}, x), comps)

  return QNetworks(init, q_values, inputs, functools.partial(action_masks, info, comps),
                   comps)


def _check_convolutions(layers: tuple, space: gym.Space) -> None:
  if not any(kind == "conv2d" for kind, _ in layers):
    return
  if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 3):
    raise ConfigError(f"pqn.network has conv2d layers, which need one image state [height, "
                      f"width, channels]; the states are {space}.")


def _join(space: gym.Space, states) -> jax.Array:
  """One Box state as it is (float32); anything else flattened and concatenated, int states
  one-hot: ``[N, D]``."""
  if isinstance(space, gym.spaces.Box):
    return jnp.asarray(states, jnp.float32)
  named = sorted(space.spaces.items()) if isinstance(space, gym.spaces.Dict) else [(None, space)]
  parts = []
  for name, sub in named:
    x = states if name is None else states[name]
    parts.append(_vector(sub, x))
  return jnp.concatenate(parts, axis=-1)


def _vector(space: gym.Space, x) -> jax.Array:
  """``[N, *shape]`` of one state -> ``[N, D]`` float32 (one-hot for int states)."""
  x = jnp.asarray(x)
  n = x.shape[0]
  if isinstance(space, gym.spaces.Discrete):
    return jax.nn.one_hot(x.reshape(n) - int(space.start), int(space.n))
  if isinstance(space, gym.spaces.MultiDiscrete):
    depth = int(np.max(space.nvec))
    return jax.nn.one_hot(x.reshape(n, -1) - jnp.asarray(space.start).reshape(-1),
                          depth).reshape(n, -1)
  return jnp.asarray(x, jnp.float32).reshape(n, -1)
