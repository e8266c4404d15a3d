"""PPO networks: a policy (feed-forward or recurrent) and a separate value network, or
(``PPOConfig.share_torso``) one feed-forward torso with a policy head and a value head.

Shapes: ``B`` envs (or minibatch rows), ``T`` steps, ``D`` flattened observation size,
``A`` action size, ``K`` discrete actions, ``H`` recurrent cell size.

The policy is one step ``(params, carry, obs[B, D]) -> (carry, dist)``; feed-forward
policies have the empty carry ``()`` so both kinds share every code path. ``unroll`` runs
a policy over a time-major sequence ``[T, B, D]`` with carries reset at episode starts.

Parameters: ``{"policy", "value"}`` for separate networks; ``{"policy"}`` alone with a shared
torso (``{"torso", "heads", "value_head"}`` inside), so acting reads ``params["policy"]``
either way.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.agents import spaces
from batchrl.agents.ppo.config import PPOConfig
from batchrl.configclass import ConfigError
from batchrl.networks import dense
from batchrl.networks.distributions import Categorical, DiagGaussian
from batchrl.networks.heads import ActionHeads, action_specs_from_space
from batchrl.networks.layered import build_network, input_specs_from_space
from batchrl.networks.mlp import MLP, reset_carry


class GaussianHead(nn.Module):
  """``tanh`` mean with a small init; state-independent ``std = softplus(w)``, ``[..., A]``."""

  action_size: int
  init_output_factor: float
  init_std: float

  @nn.compact
  def __call__(self, x):
    kernel = nn.initializers.variance_scaling(self.init_output_factor, "fan_avg", "uniform")
    mean = jnp.tanh(dense.Dense(self.action_size, kernel_init=kernel)(x))
    raw_init = float(np.log(np.expm1(self.init_std)))  # softplus^-1(init_std)
    raw_std = self.param("raw_std", nn.initializers.constant(raw_init), (self.action_size,))
    std = jnp.broadcast_to(nn.softplus(raw_std), mean.shape)
    return DiagGaussian(mean, std)


class CategoricalHead(nn.Module):
  """Logits ``[..., K]`` from a small-init dense layer (near-uniform initial policy)."""

  num_actions: int
  init_output_factor: float

  @nn.compact
  def __call__(self, x):
    kernel = nn.initializers.variance_scaling(self.init_output_factor, "fan_avg", "uniform")
    return Categorical(dense.Dense(self.num_actions, kernel_init=kernel)(x))


class Policy(nn.Module):
  """One policy step: ``(carry, obs[..., D]) -> (carry, dist)``; ``carry`` is ``()`` when
  feed-forward, else the state of a GRU/LSTM cell that replaces the last hidden layer."""

  layers: tuple[int, ...]
  activation: str
  recurrent: str | None
  head: nn.Module

  @nn.compact
  def __call__(self, carry, obs):
    if self.recurrent is None:
      return carry, self.head(MLP(self.layers, self.activation, fast_grads=True)(obs))
    hidden = MLP(self.layers[:-1], self.activation, fast_grads=True)(obs)
    cell = _cell(self.recurrent, self.layers[-1])
    carry, out = cell(carry, hidden)
    return carry, self.head(out)


class Value(nn.Module):
  """``[..., D] -> [...]`` state values."""

  layers: tuple[int, ...]
  activation: str

  @nn.compact
  def __call__(self, obs):
    return dense.Dense(1)(MLP(self.layers, self.activation, fast_grads=True)(obs))[..., 0]


def _cell(kind: str, size: int) -> nn.Module:
  if kind == "gru":
    return nn.GRUCell(features=size)
  return nn.OptimizedLSTMCell(features=size)


@dataclasses.dataclass(frozen=True)
class PPONetworks:
  """Pure functions over the parameter dict (``{"policy", "value"}``, or ``{"policy"}`` alone
  with a shared torso).

  Attributes:
    init: ``key -> params``.
    policy: ``(params["policy"], carry, obs[B, D]) -> (carry, dist[B])``.
    value: ``(params, obs[..., D]) -> [...]``, from ALL the parameters (a shared torso's
      value head sits in ``params["policy"]``).
    initial_carry: ``batch -> carry`` zeros (``()`` when feed-forward).
    recurrent: whether the policy carries a state.
    both: with a shared torso, ``(params["policy"], obs[..., D]) -> (dist[...], value[...])``
      from one pass of the torso; None for separate networks.
  """

  init: Callable[[jax.Array], dict]
  policy: Callable[..., tuple[Any, Any]]
  value: Callable[..., jax.Array]
  initial_carry: Callable[[int], Any]
  recurrent: bool
  both: Callable[..., tuple[Any, jax.Array]] | None = None

  def unroll(self, params, carry, obs, reset):
    """Policy over ``obs[T, B, D]`` from ``carry[B]``, zeroing carries where ``reset[T, B]``.

    Returns the time-major distribution ``[T, B]``. Feed-forward policies ignore carry
    and reset and apply to all steps at once.
    """
    if not self.recurrent:
      return self.policy(params, (), obs)[1]

    def step(carry, inputs):
      obs_t, reset_t = inputs
      carry = reset_carry(carry, reset_t)
      carry, dist = self.policy(params, carry, obs_t)
      return carry, dist

    return jax.lax.scan(step, carry, (obs, reset))[1]

  def unroll_with_values(self, params, carry, obs, reset):
    """``(dist[T, B], value[T, B])`` over ``obs[T, B, D]`` from all the parameters: the policy
    as ``unroll`` has it and the value of every step (one torso pass when it is shared)."""
    if self.both is not None:
      return self.both(params["policy"], obs)
    return self.unroll(params["policy"], carry, obs, reset), self.value(params, obs)


def make_networks(config: PPOConfig, observation_size: int,
                  action_space: gym.Space) -> PPONetworks:
  """Policy and value networks for flattened observations of ``observation_size`` (with
  ``share_torso``: the ``policy_layers`` MLP under both heads; ``value_layers`` unused)."""
  if config.share_torso:
    dummy = jnp.zeros((1, observation_size), jnp.float32)
    return _shared_networks(MLPTorso(config.policy_layers, config.activation),
                            MaskFreeHead(_head(config, action_space)),
                            lambda: (dummy, None), lambda obs: (obs, None))
  policy = Policy(config.policy_layers, config.activation, config.recurrent,
                  _head(config, action_space))
  value = Value(config.value_layers, config.activation)
  cell_size = config.policy_layers[-1] if config.recurrent else 0

  def initial_carry(batch: int):
    zeros = jnp.zeros((batch, cell_size), jnp.float32)
    if config.recurrent == "gru":
      return zeros
    if config.recurrent == "lstm":
      return (zeros, zeros)
    return ()

  def init(key):
    policy_key, value_key = jax.random.split(key)
    dummy = jnp.zeros((1, observation_size), jnp.float32)
    return {"policy": policy.init(policy_key, initial_carry(1), dummy)["params"],
            "value": value.init(value_key, dummy)["params"]}

  def apply_policy(params, carry, obs):
    return policy.apply({"params": params}, carry, obs)

  def apply_value(params, obs):
    return value.apply({"params": params["value"]}, obs)

  return PPONetworks(init, apply_policy, apply_value, initial_carry,
                     config.recurrent is not None)


class MLPTorso(nn.Module):
  """The flat layout's feed-forward torso: ``(carry, obs[..., D]) -> (carry, features)``."""

  layers: tuple[int, ...]
  activation: str

  @nn.compact
  def __call__(self, carry, obs):
    return carry, MLP(self.layers, self.activation, fast_grads=True)(obs)


class MaskFreeHead(nn.Module):
  """A flat-layout head behind the ``(features, masks)`` call of ``ActionHeads`` (the flat
  layout has no action masks)."""

  head: nn.Module

  @nn.compact
  def __call__(self, features, masks):
    del masks
    return self.head(features)


class SharedTorso(nn.Module):
  """One feed-forward torso with the policy's heads and a linear value head on its
  features: ``(inputs, masks) -> (dist, value[...])``, as SB3's CnnPolicy and CleanRL's
  Atari PPO have it."""

  torso: nn.Module
  heads: nn.Module

  @nn.compact
  def __call__(self, inputs, masks):
    _, features = self.torso((), inputs)
    return self.heads(features, masks), nn.Dense(1, name="value_head")(features)[..., 0]


def _shared_networks(torso: nn.Module, heads: nn.Module, init_inputs: Callable[[], tuple],
                     split: Callable[[Any], tuple]) -> PPONetworks:
  """``PPONetworks`` of one ``SharedTorso``, its parameters under ``"policy"``.

  ``init_inputs()`` gives ``(inputs, masks)`` of one example; ``split(obs)`` splits what the
  model feeds into ``(inputs, masks)``. Acting and the value each run the whole network;
  the compiled program drops the head it does not return."""
  net = SharedTorso(torso, heads)

  def init(key):
    policy_key, _ = jax.random.split(key)  # the key the separate policy is drawn from
    return {"policy": net.init(policy_key, *init_inputs())["params"]}

  def both(params, obs):
    return net.apply({"params": params}, *split(obs))

  def apply_policy(params, carry, obs):
    return carry, both(params, obs)[0]

  def apply_value(params, obs):
    return both(params["policy"], obs)[1]

  return PPONetworks(init, apply_policy, apply_value, lambda batch: (), False, both)


def _head(config: PPOConfig, space: gym.Space) -> nn.Module:
  if isinstance(space, gym.spaces.Discrete):
    return CategoricalHead(int(space.n), config.init_output_factor)
  if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
    return GaussianHead(int(space.shape[0]), config.init_output_factor, config.init_std)
  raise TypeError(f"PPO supports Discrete and 1-D Box action spaces; got {space}. "
                  "Flatten multi-dimensional Box actions with a wrapper first.")


# ------------------------------------------------------------ networks from a JSON spec


class SpecPolicy(nn.Module):
  """A torso from a network spec, then one head per action: ``(carry, inputs, masks) ->
  (carry, dist)``."""

  torso: nn.Module
  heads: nn.Module

  @nn.compact
  def __call__(self, carry, inputs, masks):
    carry, features = self.torso(carry, inputs)
    return carry, self.heads(features, masks)


class SpecValue(nn.Module):
  """A feed-forward torso from a network spec and a linear value output, ``-> [...]``."""

  torso: nn.Module

  @nn.compact
  def __call__(self, inputs):
    _, features = self.torso((), inputs)
    return nn.Dense(1)(features)[..., 0]


def _without_recurrent(spec):
  """The spec with its lstm/gru layers left out (the value network is feed-forward)."""
  if isinstance(spec, (list, tuple)):
    return [layer for layer in spec
            if not (isinstance(layer, dict) and layer.get("type") in ("lstm", "gru"))]
  if isinstance(spec, dict) and "branches" in spec:
    out = dict(spec)
    if isinstance(spec["branches"], dict):
      out["branches"] = {k: _without_recurrent(v) for k, v in spec["branches"].items()}
    if "layers" in spec:
      out["layers"] = _without_recurrent(spec["layers"])
    return out
  return spec


def make_spec_networks(config: PPOConfig, info) -> PPONetworks:
  """Policy and value networks built from ``config.network`` (JSON text) for any spaces.

  ``info`` is a ``batchrl.agents.spaces.SpaceInfo`` of the 'tree' layout. Action masks are
  split off the observation (``spaces.split_masks``) and go to the categorical heads. With
  ``config.share_torso`` one torso carries both heads (it must be feed-forward).
  """
  spec = json.loads(config.network)
  inputs = input_specs_from_space(info.network_space)
  torso = build_network(spec, inputs)
  heads = ActionHeads(actions=action_specs_from_space(info.action_space),
                      float_distribution=config.float_distribution,
                      init_output_factor=config.init_output_factor, init_std=config.init_std)

  def init_inputs():
    obs = spaces.zero_obs(info, (1,))
    net_obs, masks = spaces.split_masks(info, obs)
    return net_obs, jax.tree.map(jnp.logical_not, masks)  # all allowed

  if config.share_torso:
    if torso.recurrent:
      raise ConfigError("ppo.share_torso needs a feed-forward network: the network spec "
                        "has an lstm/gru layer; drop it or set share_torso=False.")
    return _shared_networks(torso.module, heads, init_inputs,
                            lambda obs: spaces.split_masks(info, obs))
  value_torso = build_network(_without_recurrent(spec), inputs)
  policy = SpecPolicy(torso.module, heads)
  value = SpecValue(value_torso.module)

  def init(key):
    policy_key, value_key = jax.random.split(key)
    net_obs, masks = init_inputs()
    return {"policy": policy.init(policy_key, torso.initial_carry(1), net_obs,
                                  masks)["params"],
            "value": value.init(value_key, net_obs)["params"]}

  def apply_policy(params, carry, obs):
    net_obs, masks = spaces.split_masks(info, obs)
    return policy.apply({"params": params}, carry, net_obs, masks)

  def apply_value(params, obs):
    net_obs, _ = spaces.split_masks(info, obs)
    return value.apply({"params": params["value"]}, net_obs)

  return PPONetworks(init, apply_policy, apply_value, torso.initial_carry, torso.recurrent)
