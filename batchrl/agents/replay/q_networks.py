"""Q-networks: observations -> Q-values per action component, for both space layouts (DQN's
and DQFD's networks).

Shapes: ``B`` rows, ``D`` flattened observation size; an action component of shape ``S``
with ``K`` values has Q-values ``[B, *S, K]``. Q-values are always a dict keyed by component
name (``"action"`` for a single unnamed action), so one code path serves one Discrete action
and a dict of int/bool actions alike. Bool actions count as ints with ``K = 2``.

* ``flat``: an MLP of ``hidden_layers`` on ``[B, D]``, then a linear layer of ``K`` outputs or
  the dueling head ``V + A - mean(A)`` (``config.dueling``); one Discrete action.
* ``tree``: a torso built from the JSON network spec (``batchrl.networks.layered``; several
  named states, masks split off) and a linear layer of all Q-values, or a dueling head
  (``config.dueling``: one value, advantages centred per action element); or, when the spec
  ends with a ``dueling`` layer, that layer's outputs are the Q-values (its size must be
  their number).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any, Callable

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp

from batchrl.agents import spaces
from batchrl.agents.replay.q_config import DQNConfig
from batchrl.agents.spaces import SpaceInfo
from batchrl.networks.heads import SINGLE_ACTION_NAME, ActionSpec, action_specs_from_space
from batchrl.networks.layers import Dueling

_ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


@dataclasses.dataclass(frozen=True)
class Component:
  """One action component: ``shape`` ``S``, ``num_values`` ``K``, env offset ``start``;
  ``kind`` 'int' or 'bool' (bool: ``K = 2``, values 0/1 -> False/True)."""

  name: str
  shape: tuple[int, ...]
  num_values: int
  start: int = 0
  kind: str = "int"

  @property
  def size(self) -> int:
    return math.prod(self.shape) * self.num_values


def not_discrete_error(space: gym.Space) -> TypeError:
  return TypeError(
      f"DQN picks discrete actions (the argmax of Q-values), but the action space {space} "
      "has a continuous (float) part. Use 'naf' (normalized advantage functions: Q-learning "
      "for continuous actions) or 'ppo' for continuous actions.")


def components(info: SpaceInfo) -> tuple[Component, ...]:
  """The action components of ``info`` (sorted by name); float actions are an error."""
  space = info.action_space
  specs = action_specs_from_space(space)
  named = specs if isinstance(specs, dict) else {SINGLE_ACTION_NAME: specs}
  out = []
  for name in sorted(named):
    spec: ActionSpec = named[name]
    if spec.kind == "float":
      raise not_discrete_error(space)
    k = 2 if spec.kind == "bool" else spec.num_values
    out.append(Component(name, spec.shape, k, spec.start, spec.kind))
  return tuple(out)


def check_discrete(space: gym.Space) -> None:
  """Raises the 'use naf' error for any action space with a float part."""
  leaves = space.spaces.values() if isinstance(space, gym.spaces.Dict) else [space]
  for leaf in leaves:
    if isinstance(leaf, gym.spaces.Box):
      raise not_discrete_error(space)


class MLPQ(nn.Module):
  """``[B, D] -> [B, K]``: hidden layers, then linear or dueling outputs."""

  hidden_layers: tuple[int, ...]
  activation: str
  num_actions: int
  dueling: bool

  @nn.compact
  def __call__(self, x):
    for size in self.hidden_layers:
      x = _ACTIVATIONS[self.activation](nn.Dense(size)(x))
    if self.dueling:
      return Dueling(self.num_actions, name="dueling")(x)
    return nn.Dense(self.num_actions, name="q")(x)


class SpecQ(nn.Module):
  """A torso from a network spec, then the Q-values ``{name: [N, *S, K]}``: the torso's own
  outputs (a spec ending in ``dueling``), a linear layer, or a dueling head ``V + A -
  mean_K(A)`` with one value and advantages centred per action element."""

  torso: nn.Module
  components: tuple[Component, ...]
  head: str  # 'spec' | 'linear' | 'dueling'

  @nn.compact
  def __call__(self, inputs):
    _, features = self.torso((), inputs)
    total = sum(c.size for c in self.components)
    if self.head == "spec":
      return split_components(features, self.components)
    if self.head == "linear":
      return split_components(nn.Dense(total, name="q")(features), self.components)
    value = nn.Dense(1, name="value")(features)
    advantages = split_components(nn.Dense(total, name="advantage")(features), self.components)
    return {name: _expand_value(value, a) + a - a.mean(axis=-1, keepdims=True)
            for name, a in advantages.items()}


def _expand_value(value: jax.Array, like: jax.Array) -> jax.Array:
  """``value[N, 1]`` broadcast against ``like[N, *S, K]``."""
  return value.reshape(value.shape[:1] + (1,) * (like.ndim - 1))


@dataclasses.dataclass(frozen=True)
class QNetworks:
  """Pure functions of the Q-network.

  Attributes:
    init: ``key -> params``.
    q_values: ``(params, obs[B, ...]) -> {name: [B, *S, K]}`` (obs as ``spaces.float_obs``).
    masks: ``obs -> {name: bool[B, *S, K]}`` (True = allowed; all True without masks).
    components: the action components.
  """

  init: Callable[[jax.Array], Any]
  q_values: Callable[[Any, Any], dict]
  masks: Callable[[Any], dict]
  components: tuple[Component, ...]


def split_components(outputs: jax.Array, comps: tuple[Component, ...]) -> dict:
  """A network's ``[..., sum of sizes * num_values]`` outputs as ``{name: [..., *shape,
  num_values]}`` per action component."""
  lead = outputs.shape[:-1]
  out, offset = {}, 0
  for c in comps:
    out[c.name] = outputs[..., offset:offset + c.size].reshape(lead + c.shape + (c.num_values,))
    offset += c.size
  return out


def make_networks(config: DQNConfig, info: SpaceInfo) -> QNetworks:
  """Q-networks for ``info`` (flat or tree layout)."""
  comps = components(info)
  if info.layout == "flat":
    module = MLPQ(config.hidden_layers, config.activation, comps[0].num_values, config.dueling)

    def init(key):  # arrays are made per call: this object is cached across traces
      return module.init(key, jnp.zeros((1, info.observation_size), jnp.float32))["params"]

    def q_values(params, obs):
      return {comps[0].name: module.apply({"params": params}, obs)}

    def masks(obs):
      lead = obs.shape[:-1]
      return {comps[0].name: jnp.ones(lead + (comps[0].num_values,), jnp.bool_)}

    return QNetworks(init, q_values, masks, comps)
  return _make_spec_networks(config, info, comps)


def _ends_with_dueling(plan) -> int | None:
  layers = plan.layers or (plan.branches[-1].layers if len(plan.branches) == 1 else ())
  if layers and layers[-1].type == "dueling":
    return int(layers[-1].opt("size"))
  return None


def _make_spec_networks(config: DQNConfig, info: SpaceInfo, comps) -> QNetworks:
  from batchrl.networks.layered import build_network, input_specs_from_space
  torso = build_network(json.loads(config.network), input_specs_from_space(info.network_space))
  if torso.recurrent:
    raise ValueError("DQN trains on single transitions and cannot carry the state of "
                     "recurrent (lstm/gru) layers; remove them from the network, stack frames "
                     "with the 'sequence' preprocessor, or use ppo for recurrent policies.")
  total = sum(c.size for c in comps)
  dueling = _ends_with_dueling(torso.plan)
  if dueling is not None and dueling != total:
    raise ValueError(f"the network's last layer is dueling with size {dueling}, but the actions "
                     f"need {total} Q-values ({', '.join(f'{c.name}: {c.size}' for c in comps)})"
                     f"; set its size to {total}.")
  head = "spec" if dueling is not None else ("dueling" if config.dueling else "linear")
  module = SpecQ(torso.module, comps, head)

  def init(key):
    obs = spaces.zero_obs(info, (1,))
    net_obs, _ = spaces.split_masks(info, obs)
    return module.init(key, net_obs)["params"]

  def q_values(params, obs):
    net_obs, _ = spaces.split_masks(info, obs)
    return module.apply({"params": params}, net_obs)

  return QNetworks(init, q_values, functools.partial(action_masks, info, comps), comps)


def action_masks(info: SpaceInfo, comps: tuple[Component, ...], obs) -> dict:
  """Per component, ``[B, *shape, num_values]`` bools: the masks a (tree) state carries,
  all True for components without one."""
  _, given = spaces.split_masks(info, obs)
  if given is not None and not isinstance(given, dict):
    given = {SINGLE_ACTION_NAME: given}
  given = given or {}
  lead = jax.tree.leaves(obs)[0].shape[:1]
  return {c.name: (jnp.asarray(given[c.name], jnp.bool_) if c.name in given else
                   jnp.ones(lead + c.shape + (c.num_values,), jnp.bool_)) for c in comps}


# ------------------------------------------------------------------------- actions


def env_actions(info: SpaceInfo, comps, indices: dict):
  """Indices ``{name: int32[B, *S]}`` -> the action as the env takes it (offsets added,
  bools as bool; one array for a single unnamed action, else a dict)."""
  out = {}
  for c in comps:
    x = indices[c.name]
    out[c.name] = x.astype(jnp.bool_) if c.kind == "bool" else x + c.start
  if isinstance(info.action_space, gym.spaces.Dict):
    return out
  return out[comps[0].name]


def action_indices(info: SpaceInfo, comps, action) -> dict:
  """The env's action -> indices ``{name: int32[B, *S]}`` (inverse of ``env_actions``)."""
  named = action if isinstance(info.action_space, gym.spaces.Dict) else {comps[0].name: action}
  return {c.name: jnp.asarray(named[c.name]).astype(jnp.int32) - (
      c.start if c.kind == "int" else 0) for c in comps}


def zero_indices(comps, batch: tuple[int, ...]) -> dict:
  return {c.name: jnp.zeros(batch + c.shape, jnp.int32) for c in comps}
