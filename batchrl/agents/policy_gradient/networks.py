"""The networks of the batch policy-gradient agents (VPG, TRPO, A2C): the policy (action
heads of ``batchrl.networks.heads`` on a torso, with a value head for baseline_mode
'network') and TensorForce's 'states' baseline.

Baselines (``baseline_mode``), as TensorForce had them:

* ``'none'``: advantages are the (discounted or GAE) returns themselves.
* ``'states'``: a separate value network ``V(s)`` (``baseline_network``: ``'mlp'``,
  ``'linear'``, ``'cnn'``, ``'auto'`` or any JSON network spec) with its own Adam optimizer
  run ``baseline_steps`` passes over each batch.
* ``'network'``: a value head on the policy's own torso (shared features), trained with the
  policy (VPG only: TRPO's trust region would not hold if a value loss moved the policy).

Layouts (``batchrl.agents.spaces``): 'flat' (Box observations, an MLP of ``policy_layers``)
or 'tree' (any spaces, the torso built from the JSON ``network``; masks go to the heads).

Shapes: ``B`` rows (``[T, B]`` for ``unroll``), ``D`` flattened observation size.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp

from batchrl.agents import spaces
from batchrl.agents.policy_gradient.config import BASELINE_NAMES, PGConfig
from batchrl.agents.spaces import SpaceInfo
from batchrl.configclass import ConfigError
from batchrl.networks.heads import ActionHeads, action_specs_from_space
from batchrl.networks.layer_specs import NetworkSpecError
from batchrl.networks.layered import build_network, input_specs_from_space
from batchrl.networks.mlp import MLP, reset_carry
from batchrl.specs import EnvSpec

# TensorForce's Nature-DQN visual network, the torso of the 'cnn' baseline.
CNN_SPEC = [{"type": "conv2d", "size": 32, "window": 8, "stride": 4, "activation": "relu"},
            {"type": "conv2d", "size": 64, "window": 4, "stride": 2, "activation": "relu"},
            {"type": "conv2d", "size": 64, "window": 3, "stride": 1, "activation": "relu"},
            {"type": "flatten"}, {"type": "dense", "size": 512, "activation": "relu"}]


class MLPTorso(nn.Module):
  """The flat layout's torso: ``(carry, obs[..., D]) -> (carry, features)``."""

  layers: tuple[int, ...]
  activation: str

  @nn.compact
  def __call__(self, carry, obs):
    return carry, MLP(self.layers, self.activation)(obs)


class PolicyNet(nn.Module):
  """``(carry, inputs, masks) -> (carry, dist, value)``; ``value`` is a linear head on the
  torso's features (baseline_mode 'network') or None."""

  torso: nn.Module
  heads: nn.Module
  value_head: bool

  @nn.compact
  def __call__(self, carry, inputs, masks):
    carry, features = self.torso(carry, inputs)
    dist = self.heads(features, masks)
    value = nn.Dense(1, name="value_head")(features)[..., 0] if self.value_head else None
    return carry, dist, value


class ValueNet(nn.Module):
  """The 'states' baseline: a feed-forward torso and a linear output, ``-> [...]``."""

  torso: nn.Module

  @nn.compact
  def __call__(self, inputs):
    _, features = self.torso((), inputs)
    return nn.Dense(1)(features)[..., 0]


@dataclasses.dataclass(frozen=True)
class PGNetworks:
  """Pure functions over the ``{"policy", "baseline"}`` parameters.

  Attributes:
    init: ``key -> params`` (``"baseline"`` only with baseline_mode 'states').
    policy: ``(policy_params, carry, obs[B, ...]) -> (carry, dist[B], value[B] | None)``.
    baseline: ``(baseline_params, obs[..., ...]) -> [...]`` ('states'), else None.
    initial_carry: ``batch -> carry`` (``()`` when feed-forward).
    recurrent: whether the policy keeps a carry.
  """

  init: Callable[[jax.Array], dict]
  policy: Callable[..., tuple[Any, Any, Any]]
  baseline: Callable[..., jax.Array] | None
  initial_carry: Callable[[int], Any]
  recurrent: bool

  def unroll(self, params, carry, obs, reset):
    """The policy over ``obs[T, B, ...]`` from ``carry[B]``, zeroing carries where
    ``reset[T, B]``; returns ``(dist[T, B], value[T, B] | None)``."""
    if not self.recurrent:
      return self.policy(params, (), obs)[1:]

    def step(carry, inputs):
      obs_t, reset_t = inputs
      carry, dist, value = self.policy(params, reset_carry(carry, reset_t), obs_t)
      return carry, (dist, value)

    return jax.lax.scan(step, carry, (obs, reset))[1]


def layout(config: PGConfig, spec: EnvSpec) -> str:
  """The ``policy_layers`` MLP for a Box state and one Discrete or 1-D Box action without a
  network spec ('flat'); else a network spec ('tree', ``'auto'`` when none is given)."""
  action = spec.action_space
  simple_action = isinstance(action, gym.spaces.Discrete) or (
      isinstance(action, gym.spaces.Box) and len(action.shape) == 1)
  if (config.network is None and isinstance(spec.observation_space, gym.spaces.Box)
      and simple_action):
    return "flat"
  return "tree"


def make_networks(config: PGConfig, info: SpaceInfo) -> PGNetworks:
  """Policy (with a value head for baseline_mode 'network') and the 'states' baseline."""
  heads = ActionHeads(action_specs_from_space(info.action_space),
                      float_distribution=config.float_distribution,
                      init_output_factor=config.init_output_factor, init_std=config.init_std,
                      bounded_mean=config.bounded_mean)
  if info.layout == "flat":
    torso, initial_carry, recurrent = (MLPTorso(config.policy_layers, config.activation),
                                       lambda batch: (), False)
  else:
    spec = json.loads(config.network) if config.network is not None else "auto"
    built = build_network(spec, input_specs_from_space(info.network_space))
    torso, initial_carry, recurrent = built.module, built.initial_carry, built.recurrent
  policy = PolicyNet(torso, heads, config.baseline_mode == "network")
  baseline = (ValueNet(baseline_torso(config, info)) if config.baseline_mode == "states"
              else None)

  def init(key):
    policy_key, baseline_key = jax.random.split(key)
    obs = spaces.zero_obs(info, (1,))
    inputs, masks = spaces.split_masks(info, obs)
    masks = jax.tree.map(jnp.logical_not, masks)  # all allowed
    params = {"policy": policy.init(policy_key, initial_carry(1), inputs, masks)["params"]}
    if baseline is not None:
      params["baseline"] = baseline.init(baseline_key, baseline_inputs(config, info,
                                                                       obs))["params"]
    return params

  def apply_policy(params, carry, obs):
    inputs, masks = spaces.split_masks(info, obs)
    return policy.apply({"params": params}, carry, inputs, masks)

  def apply_baseline(params, obs):
    return baseline.apply({"params": params}, baseline_inputs(config, info, obs))

  return PGNetworks(init, apply_policy, apply_baseline if baseline is not None else None,
                    initial_carry, recurrent)


def _vector_baseline(config: PGConfig) -> bool:
  return config.baseline_network in ("mlp", "linear")


def baseline_torso(config: PGConfig, info: SpaceInfo) -> nn.Module:
  """The 'states' baseline torso; a spec that does not fit the states is a ConfigError."""
  if _vector_baseline(config):
    layers = config.baseline_layers if config.baseline_network == "mlp" else ()
    return MLPTorso(layers, config.activation)
  name = config.baseline_network
  spec = {"cnn": CNN_SPEC, "auto": "auto"}.get(name)
  spec = json.loads(name) if spec is None else spec
  space = info.observation_space if info.layout == "flat" else info.network_space
  try:
    built = build_network(spec, input_specs_from_space(space))
  except NetworkSpecError as e:
    shown = name if name in BASELINE_NAMES else "the given spec"
    raise ConfigError(f"baseline_network ({shown}) does not fit the states {space}: {e}"
                      ) from None
  if built.recurrent:
    raise ConfigError("baseline_network must be feed-forward: the 'states' baseline sees "
                      "single states; leave lstm/gru layers out of it.")
  return built.module


def baseline_inputs(config: PGConfig, info: SpaceInfo, obs):
  """What the 'states' baseline sees of ``obs[..., ...]``: one flat vector per state for
  'mlp'/'linear' (every state flattened and concatenated), else the states as they are
  (the flat layout's vector reshaped back to the observation's shape)."""
  if info.layout == "flat":
    if _vector_baseline(config):
      return obs
    lead = obs.shape[:-1]
    return jnp.reshape(obs, lead + info.observation_shape)
  inputs, _ = spaces.split_masks(info, obs)
  if not _vector_baseline(config):
    return inputs
  space = info.network_space
  leaves = (dict(space.spaces) if isinstance(space, gym.spaces.Dict) else {None: space})
  parts = []
  for name, leaf_space in sorted(leaves.items(), key=lambda kv: str(kv[0])):
    x = inputs if name is None else inputs[name]
    rank = len(leaf_space.shape)
    lead = x.shape[:x.ndim - rank]
    parts.append(jnp.reshape(jnp.asarray(x, jnp.float32), lead + (math.prod(
        leaf_space.shape),)))
  return jnp.concatenate(parts, axis=-1)
