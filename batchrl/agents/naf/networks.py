"""NAF's Q-function (Gu et al. 2016): ``Q(s, a) = V(s) + A(s, a)`` with a quadratic advantage.

    A(s, a) = -1/2 (a - mu(s))^T P(s) (a - mu(s)),    P(s) = L(s) L(s)^T

``L`` is lower triangular with a positive diagonal (``softplus`` plus a small floor), so
``P`` is positive definite: ``A <= 0`` everywhere, ``A = 0`` exactly at ``a = mu(s)``, and
``max_a Q(s, a) = V(s)`` (the greedy action is ``mu``, the next-state value is ``V``). ``A``
is computed as ``-1/2 |L^T (a - mu)|^2`` without forming ``P``.

Shapes: ``N`` rows, ``D`` flattened observation size, ``A`` action size (all float action
elements of all named actions, flattened and concatenated in name order).

Actions are learned in normalized units: each element with finite bounds is mapped to
``[-1, 1]`` (``mu`` is ``tanh``-squashed there), elements without bounds are left as they
are (``mu`` linear). ``batchrl.networks.actions.ActionMap`` converts both ways.

* ``flat``: an MLP of ``hidden_layers`` on ``[N, D]`` shared by the three heads.
* ``tree``: a torso built from the JSON network spec (``batchrl.networks.layered``: several
  named states, any layers but recurrent ones) and the same heads on its features.
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
from batchrl.agents.spaces import SpaceInfo
from batchrl.networks.actions import ActionMap, action_map, float_action_leaves

MIN_DIAGONAL = 1e-4  # floor of L's diagonal: P stays positive definite in float32
_ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


def not_continuous_error(space: gym.Space) -> TypeError:
  return TypeError(
      f"NAF learns continuous actions (the maximum of a quadratic Q(s, a) over float "
      f"actions), but the action space {space} has a discrete (int or bool) part. Use 'dqn' "
      "(or 'ddqn', 'dueling' DQN, 'dqfd') for discrete actions, or 'ppo' for mixed ones.")


# --------------------------------------------------------------------------- actions


def check_continuous(space: gym.Space) -> None:
  """Raises the 'use dqn' error for an action space with any discrete part."""
  if float_action_leaves(space) is None:
    raise not_continuous_error(space)


# ------------------------------------------------------------------- the quadratic form


def lower_triangular(entries: jax.Array, size: int) -> jax.Array:
  """``[..., A (A + 1) / 2]`` -> ``L [..., A, A]``: entries filled row by row below and on
  the diagonal, the diagonal through ``softplus(.) + MIN_DIAGONAL`` (positive)."""
  rows, cols = np.tril_indices(size)
  raw = jnp.zeros(entries.shape[:-1] + (size, size), entries.dtype)
  raw = raw.at[..., rows, cols].set(entries)
  diagonal = jax.nn.softplus(jnp.diagonal(raw, axis1=-2, axis2=-1)) + MIN_DIAGONAL
  strict = jnp.tril(raw, -1)
  return strict + diagonal[..., None] * jnp.eye(size, dtype=entries.dtype)


def precision(lower: jax.Array) -> jax.Array:
  """``P = L L^T`` ``[..., A, A]`` (positive definite)."""
  return lower @ jnp.swapaxes(lower, -1, -2)


def advantage(mu: jax.Array, lower: jax.Array, action: jax.Array) -> jax.Array:
  """``A = -1/2 (a - mu)^T L L^T (a - mu) = -1/2 |L^T (a - mu)|^2``: ``[..., A]`` -> ``[...]``."""
  delta = action - mu
  projected = jnp.einsum("...ij,...i->...j", lower, delta)
  return -0.5 * jnp.sum(jnp.square(projected), axis=-1)


# ------------------------------------------------------------------------- modules


class NAFHeads(nn.Module):
  """Features ``[N, F]`` -> ``(V [N], mu [N, A], L entries [N, A (A + 1) / 2])``; ``mu`` is
  ``tanh``-squashed on ``bounded`` elements."""

  bounded: tuple[bool, ...]

  @nn.compact
  def __call__(self, features):
    size = len(self.bounded)
    value = nn.Dense(1, name="value")(features)[..., 0]
    mu = nn.Dense(size, name="mu")(features)
    mu = jnp.where(np.asarray(self.bounded), jnp.tanh(mu), mu)
    entries = nn.Dense(size * (size + 1) // 2, name="lower")(features)
    return value, mu, entries


class MLPNAF(nn.Module):
  """``[N, D]`` -> the heads' outputs, through hidden layers shared by all three."""

  hidden_layers: tuple[int, ...]
  activation: str
  bounded: tuple[bool, ...]

  @nn.compact
  def __call__(self, x):
    for size in self.hidden_layers:
      x = _ACTIVATIONS[self.activation](nn.Dense(size)(x))
    return NAFHeads(self.bounded, name="heads")(x)


class SpecNAF(nn.Module):
  """A torso from a network spec, then the NAF heads."""

  torso: nn.Module
  bounded: tuple[bool, ...]

  @nn.compact
  def __call__(self, inputs):
    _, features = self.torso((), inputs)
    return NAFHeads(self.bounded, name="heads")(features)


@dataclasses.dataclass(frozen=True)
class NAFNetworks:
  """Pure functions of the NAF Q-function.

  Attributes:
    init: ``key -> params``.
    outputs: ``(params, obs[N, ...]) -> (V [N], mu [N, A], L [N, A, A])`` (obs as
      ``spaces.float_obs`` gives them; ``mu`` normalized).
    actions: the ``ActionMap`` between env actions and normalized ``[N, A]``.
  """

  init: Callable[[jax.Array], Any]
  outputs: Callable[[Any, Any], tuple[jax.Array, jax.Array, jax.Array]]
  actions: ActionMap

  def q_value(self, params, obs, action: jax.Array) -> jax.Array:
    """``Q(s, a)`` ``[N]`` of normalized actions ``[N, A]``."""
    value, mu, lower = self.outputs(params, obs)
    return value + advantage(mu, lower, action)

  def value(self, params, obs) -> jax.Array:
    """``V(s) = max_a Q(s, a)`` ``[N]``."""
    return self.outputs(params, obs)[0]


def make_networks(config, info: SpaceInfo) -> NAFNetworks:
  """NAF networks for ``info``: the MLP (flat layout) or the spec's torso (tree layout;
  ``config.network`` None there means 'auto')."""
  check_continuous(info.action_space)  # NAF's own error, before the map's plain one
  amap = action_map(info.action_space)
  bounded = tuple(bool(b) for b in amap.bounded)
  if info.layout == "flat":
    module = MLPNAF(config.hidden_layers, config.activation, bounded)
    example = lambda: jnp.zeros((1, info.observation_size), jnp.float32)
    prepare = lambda obs: obs
  else:
    from batchrl.networks.layered import build_network, input_specs_from_space
    spec = json.loads(config.network) if config.network is not None else "auto"
    torso = build_network(spec, input_specs_from_space(info.network_space))
    if torso.recurrent:
      raise ValueError("NAF trains on single transitions and cannot carry the state of "
                       "recurrent (lstm/gru) layers; remove them from the network or stack "
                       "frames with the 'sequence' preprocessor.")
    module = SpecNAF(torso.module, bounded)
    example = lambda: spaces.zero_obs(info, (1,))
    prepare = lambda obs: spaces.split_masks(info, obs)[0]

  # the example input is made per call: this function is cached and may first run inside
  # a trace, whose arrays must not outlive it
  def init(key):
    return module.init(key, prepare(example()))["params"]

  def outputs(params, obs):
    value, mu, entries = module.apply({"params": params}, prepare(obs))
    return value, mu, lower_triangular(entries, amap.size)

  return NAFNetworks(init, outputs, amap)
