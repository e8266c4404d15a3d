"""The networks DDPG, TD3 and SAC share: a deterministic tanh actor, a tanh-squashed Gaussian
actor, and ``C`` critics ``Q(s, a)`` (one for DDPG, twins for TD3 and SAC).

Shapes: ``N`` rows, ``D`` flattened observation size, ``A`` action size, ``C`` critics.
Actions are learned in normalized units, every element in ``[-1, 1]`` (the actors end in
``tanh``); ``ActionMap`` rescales them to the env's finite bounds. Unbounded float actions
are an error: a squashed actor cannot reach them.

* ``flat``: MLPs of ``actor_layers`` on ``[N, D]`` and of ``critic_layers`` on ``[N, D + A]``.
* ``tree``: each network gets its own torso built from the JSON network spec
  (``batchrl.networks.layered``); the critics join the action to its features and go on
  through ``critic_layers``.
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
import numpy as np

from batchrl.agents import spaces
from batchrl.agents.naf.networks import ActionMap, action_map
from batchrl.agents.spaces import SpaceInfo
from batchrl.networks.layered import build_network, input_specs_from_space

DISCRETE_AGENTS = "dqn, ddqn, dqn_nstep, dqfd, ppo, vpg, trpo"
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # SAC's log std range (a tanh maps the head into it)
_ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


# --------------------------------------------------------------------------- actions


def continuous_action_map(space: gym.Space, agent: str,
                          fallback: tuple[float, float] | None = None) -> ActionMap:
  """The ``ActionMap`` of a bounded float action space; a discrete part is a TypeError naming
  the agents for discrete actions, an unbounded element a ValueError asking for bounds,
  unless ``fallback`` (``action_bounds``) gives the ``(low, high)`` to use there."""
  leaves = list(space.spaces.values()) if isinstance(space, gym.spaces.Dict) else [space]
  if not all(isinstance(s, gym.spaces.Box) and np.issubdtype(s.dtype, np.floating)
             for s in leaves):
    raise TypeError(f"{agent} learns continuous (float) actions, but the action space {space} "
                    f"has a discrete (int or bool) part. Agents for discrete actions: "
                    f"{DISCRETE_AGENTS}.")
  amap = action_map(space)
  if fallback is not None:
    low = np.where(np.isfinite(amap.low), amap.low, fallback[0])
    high = np.where(np.isfinite(amap.high), amap.high, fallback[1])
    amap = ActionMap(amap.names, amap.shapes, tuple(float(x) for x in low),
                     tuple(float(x) for x in high))
  if not amap.bounded.all():
    raise ValueError(f"{agent} needs finite bounds on every action element (its actor ends in "
                     f"tanh: actions in [-1, 1] rescaled to the bounds), but the action space "
                     f"{space} is unbounded; give the actions a finite low and high (or set "
                     f"{agent}.action_bounds).")
  return amap


# ------------------------------------------------------- the tanh-squashed Gaussian


def gaussian_log_prob(u: jax.Array, mean: jax.Array, log_std: jax.Array) -> jax.Array:
  """``log N(u; mean, exp(log_std)^2)`` summed over the last axis: ``[..., A] -> [...]``."""
  z = (u - mean) * jnp.exp(-log_std)
  return jnp.sum(-0.5 * jnp.square(z) - log_std - 0.5 * math.log(2 * math.pi), axis=-1)


def tanh_log_det(u: jax.Array) -> jax.Array:
  """``sum log |d tanh(u) / du| = sum log(1 - tanh(u)^2)``, stable for large ``|u|``:
  ``log(1 - tanh^2 u) = 2 (log 2 - u - softplus(-2u))``. ``[..., A] -> [...]``."""
  return jnp.sum(2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u)), axis=-1)


def squashed_sample(key: jax.Array, mean: jax.Array, log_std: jax.Array):
  """``a = tanh(u)``, ``u ~ N(mean, std)``: ``(a [..., A], log p(a) [...])`` with the change of
  variables ``log p(a) = log N(u) - sum log(1 - tanh(u)^2)``."""
  u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
  return jnp.tanh(u), gaussian_log_prob(u, mean, log_std) - tanh_log_det(u)


def squashed_log_prob(action: jax.Array, mean: jax.Array, log_std: jax.Array) -> jax.Array:
  """``log p(a)`` of a given squashed action in ``(-1, 1)`` (the inverse of the sample)."""
  u = jnp.arctanh(jnp.clip(action, -1.0 + 1e-6, 1.0 - 1e-6))
  return gaussian_log_prob(u, mean, log_std) - tanh_log_det(u)


# ------------------------------------------------------------------------- modules


class MLP(nn.Module):
  layers: tuple[int, ...]
  activation: str

  @nn.compact
  def __call__(self, x):
    for size in self.layers:
      x = _ACTIVATIONS[self.activation](nn.Dense(size)(x))
    return x


class Actor(nn.Module):
  """obs -> ``tanh(mu) [N, A]`` (deterministic) or ``(mean, log_std) [N, A]`` each (squashed
  Gaussian, log std in ``[LOG_STD_MIN, LOG_STD_MAX]``)."""

  torso: nn.Module | None
  layers: tuple[int, ...]
  activation: str
  size: int
  stochastic: bool

  @nn.compact
  def __call__(self, obs):
    x = MLP(self.layers, self.activation)(obs) if self.torso is None else self.torso((), obs)[1]
    if not self.stochastic:
      return jnp.tanh(nn.Dense(self.size, name="mu")(x))
    mean = nn.Dense(self.size, name="mean")(x)
    squash = jnp.tanh(nn.Dense(self.size, name="log_std")(x))
    return mean, LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (squash + 1.0)


class Critic(nn.Module):
  """``(obs, action [N, A]) -> Q [N]``."""

  torso: nn.Module | None
  layers: tuple[int, ...]
  activation: str

  @nn.compact
  def __call__(self, obs, action):
    x = obs if self.torso is None else self.torso((), obs)[1]
    x = MLP(self.layers, self.activation)(jnp.concatenate([x, action], axis=-1))
    return nn.Dense(1, name="q")(x)[..., 0]


class Critics(nn.Module):
  """``C`` independent critics: ``(obs, action) -> Q [C, N]``."""

  torsos: tuple[nn.Module, ...] | None
  num: int
  layers: tuple[int, ...]
  activation: str

  @nn.compact
  def __call__(self, obs, action):
    return jnp.stack([
        Critic(None if self.torsos is None else self.torsos[i], self.layers, self.activation,
               name=f"critic_{i}")(obs, action) for i in range(self.num)])


@dataclasses.dataclass(frozen=True)
class ACNetworks:
  """Pure functions of the actor and the critics.

  Attributes:
    init: ``key -> (actor_params, critic_params)``.
    actor: ``(params, obs [N, ...]) -> action [N, A]`` (deterministic) or ``(mean, log_std)``.
    critic: ``(params, obs, action [N, A]) -> Q [C, N]``.
    actions: normalized ``[N, A]`` <-> the env's actions.
    stochastic: whether the actor is a squashed Gaussian.
  """

  init: Callable[[jax.Array], tuple[Any, Any]]
  actor: Callable[[Any, Any], Any]
  critic: Callable[[Any, Any, jax.Array], jax.Array]
  actions: ActionMap
  stochastic: bool


def make_networks(config, info: SpaceInfo, num_critics: int, stochastic: bool,
                  agent: str) -> ACNetworks:
  """The networks for ``info`` (flat layout: MLPs; tree layout: a torso per network from
  ``config.network``, 'auto' when None)."""
  amap = continuous_action_map(info.action_space, agent, config.action_bounds)
  if info.layout == "flat":
    actor_torso, critic_torsos = None, None
    example = lambda: jnp.zeros((1, info.observation_size), jnp.float32)  # noqa: E731
    prepare = lambda obs: obs  # noqa: E731
  else:
    spec = json.loads(config.network) if config.network is not None else "auto"
    inputs = input_specs_from_space(info.network_space)
    torsos = [build_network(spec, inputs) for _ in range(1 + num_critics)]
    if torsos[0].recurrent:
      raise ValueError(f"{agent} trains on single transitions and cannot carry the state of "
                       "recurrent (lstm/gru) layers; remove them from the network or stack "
                       "frames with the 'sequence' preprocessor.")
    actor_torso, critic_torsos = torsos[0].module, tuple(t.module for t in torsos[1:])
    example = lambda: spaces.zero_obs(info, (1,))  # noqa: E731
    prepare = lambda obs: spaces.split_masks(info, obs)[0]  # noqa: E731
  actor = Actor(actor_torso, config.actor_layers, config.activation, amap.size, stochastic)
  critics = Critics(critic_torsos, num_critics, config.critic_layers, config.activation)

  # the example input is made per call: this function is cached and may first run inside
  # a trace, whose arrays must not outlive it
  def init(key):
    actor_key, critic_key = jax.random.split(key)
    obs = prepare(example())
    return (actor.init(actor_key, obs)["params"],
            critics.init(critic_key, obs, jnp.zeros((1, amap.size), jnp.float32))["params"])

  return ACNetworks(
      init, lambda params, obs: actor.apply({"params": params}, prepare(obs)),
      lambda params, obs, a: critics.apply({"params": params}, prepare(obs), a), amap,
      stochastic)
