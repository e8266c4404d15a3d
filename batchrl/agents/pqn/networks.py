"""PQN's Q-network: observations -> Q-values per action component, with LayerNorm after
every hidden layer (before its activation), as in the paper's networks (purejaxql's
``QNetwork`` and MinAtar/Atari ``CNN``), built by the JSON network builder
(``layer_specs`` says from which layers).

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

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.agents import spaces
from batchrl.agents.replay.q_networks import Component, action_masks, components, split_components
from batchrl.agents.spaces import SpaceInfo
from batchrl.configclass import ConfigError
from batchrl.networks.layer_specs import NetworkSpecError
from batchrl.networks.layered import InputSpec, build_network


def not_discrete_error(space: gym.Space) -> ConfigError:
  return ConfigError(
      f"PQN learns discrete actions only (it acts by the argmax of Q-values), but the action "
      f"space {space} has a continuous (float) part. For continuous actions use 'ppo', "
      "'sac', 'tqc', 'td3', 'ddpg' or 'naf'.")


def check_discrete(space: gym.Space) -> None:
  """Refuses any action space with a float part, naming the agents that fit."""
  leaves = space.spaces.values() if isinstance(space, gym.spaces.Dict) else [space]
  for leaf in leaves:
    if isinstance(leaf, gym.spaces.Box) and np.issubdtype(leaf.dtype, np.floating):
      raise not_discrete_error(space)


def layer_specs(layers: tuple, layer_norm: bool, outputs: int, input_rank: int) -> list[dict]:
  """The JSON network builder's layer list of PQN's network on inputs of ``input_rank``
  axes: each dense/conv2d layer of ``layers`` (``((type, ((key, value), ...)), ...)``)
  without its activation, then ``layer_norm`` (when ``layer_norm``; over the features, the
  channels of a conv, as the reference code), then the activation; a flatten before a dense
  layer on anything but a vector; a linear layer of all ``outputs`` Q-values last."""
  spec, rank = [], input_rank

  def vector():
    if rank != 1:
      spec.append({"type": "flatten"})
    return 1

  for kind, items in layers:
    options = dict(items)
    if kind == "flatten":
      spec.append({"type": "flatten"})
      rank = 1
      continue
    rank = vector() if kind == "dense" else 3  # conv2d: [H, W, C]
    activation = options.pop("activation")
    for key in ("window", "stride"):  # pairs as JSON lists
      if key in options:
        options[key] = list(options[key])
    spec.append(dict(type=kind, **options, activation="none"))
    if layer_norm:
      spec.append({"type": "layer_norm"})
    spec.append({"type": "nonlinearity", "name": activation})
  vector()
  return spec + [{"type": "linear", "size": outputs}]


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
  state_space = info.network_space
  _check_convolutions(layers, state_space)

  def inputs(obs):
    states, _ = spaces.split_masks(info, obs)
    return _join(state_space, states)

  shape = jax.eval_shape(inputs, spaces.zero_obs(info, (1,))).shape[1:]
  try:
    network = build_network(layer_specs(layers, layer_norm, sum(c.size for c in comps),
                                        len(shape)), InputSpec(shape, "float"))
  except NetworkSpecError as error:  # its layer numbers are the built list's, not the config's
    raise ConfigError(f"pqn.network cannot be built on states of shape {shape}: {error}. "
                      "Layers: dense (on anything), conv2d (on [height, width, channels]), "
                      "flatten.") from None

  def q_values(params, x):
    return split_components(network.apply(params, (), x)[1], comps)

  return QNetworks(network.init, q_values, inputs,
                   functools.partial(action_masks, info, comps), comps)


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
