"""The networks DDPG, TD3 and SAC share: a deterministic tanh actor, a tanh-squashed Gaussian
actor, and ``C`` critics ``Q(s, a)`` (one for DDPG, twins for TD3 and SAC); for SAC on one
Discrete action, a categorical actor (logits ``[N, n]``) and critics of ``Q(s, .)`` over all
``n`` actions (Christodoulou 2019).

Shapes: ``N`` rows, ``D`` flattened observation size, ``A`` action size, ``C`` critics, ``n``
values of a Discrete action. Float actions are learned in normalized units, every element in
``[-1, 1]`` (the actors end in ``tanh``); ``ActionMap`` rescales them to the env's finite
bounds. Unbounded float actions are an error: a squashed actor cannot reach them. A Discrete
action is learned and stored as its index ``0 .. n-1`` (``DiscreteActions`` adds the env's
``start``); an ``action_mask`` state (tree layout) is honoured: masked actions get
probability exactly 0, so they are never sampled and add nothing to values or entropies.

* ``flat``: MLPs of ``actor_layers`` on ``[N, D]`` and of ``critic_layers`` on ``[N, D + A]``.
* ``tree``: each network gets its own torso built from the JSON network spec
  (``batchrl.networks.layered``); the critics join the action to its features and go on
  through ``critic_layers``; the actor's heads read the features (``actor_layers`` unread).

With ``architecture='simba'`` the MLPs' place is taken by SimBa's blocks
(``batchrl.networks.simba``: a Dense layer, a residual block per listed width, a final
LayerNorm), the heads as they are. DroQ's critic options (``critic_dropout``,
``critic_layer_norm``) go into each hidden layer of the critics' MLPs (dropout after each
SimBa block); the critics drop out only in the training passes of ``ACNetworks.with_dropout``.

With ``renorm`` (CrossQ), Batch Renormalization (``batchrl.networks.batch_renorm``) comes
first on each MLP's input (the observation, or the torso's features; the critics' joined
with the action) and after each hidden activation; the networks' variables are then
``Renormed(params, stats)``, and ``ACNetworks`` gains the training passes that move the
statistics.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.agents import spaces
from batchrl.agents.spaces import SpaceInfo
from batchrl.configclass import ConfigError
from batchrl.networks.actions import ActionMap, action_map
from batchrl.networks.batch_renorm import BatchRenorm
from batchrl.networks.dense import Dense  # nn.Dense with a weight gradient fast on the CPU
from batchrl.networks.distributions import Categorical
from batchrl.networks.layer_specs import RenormSettings
from batchrl.networks.layered import build_network, input_specs_from_space
from batchrl.networks.simba import Simba

DISCRETE_AGENTS = "dqn, ddqn, dqn_nstep, dqfd, ppo, vpg, trpo, sac"
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # SAC's log std range (a tanh maps the head into it)
LOG_STD_CLIP_MIN = -20.0  # the lower bound where the head is clipped instead (SB3's, sbx's)
_ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


# --------------------------------------------------------------------------- actions


@dataclasses.dataclass(frozen=True)
class DiscreteActions:
  """One Discrete action of ``n`` values from ``start``: learned and stored as the index
  ``0 .. n-1`` (int32), the env's value being ``start + index``."""

  n: int
  start: int = 0

  def to_env(self, index: jax.Array) -> jax.Array:
    return index + self.start

  def from_env(self, action) -> jax.Array:
    return jnp.asarray(action).astype(jnp.int32) - self.start


def actor_critic_actions(space: gym.Space, agent: str,
                         fallback: tuple[float, float] | None = None,
                         discrete: bool = False) -> ActionMap | DiscreteActions:
  """How ``agent`` learns the actions of ``space``: ``DiscreteActions`` for one Discrete
  action when the agent takes ``discrete`` ones (SAC), else ``continuous_action_map``'s
  checks and map."""
  if discrete and isinstance(space, gym.spaces.Discrete):
    return DiscreteActions(int(space.n), int(space.start))
  return continuous_action_map(space, agent, fallback, discrete)


def continuous_action_map(space: gym.Space, agent: str,
                          fallback: tuple[float, float] | None = None,
                          discrete: bool = False) -> ActionMap:
  """The ``ActionMap`` of a bounded float action space; a discrete part is a TypeError naming
  the agents for discrete actions (``discrete``: the agent takes one Discrete action, but not
  this space), an unbounded element a ValueError asking for bounds, unless ``fallback``
  (``action_bounds``) gives the ``(low, high)`` to use there."""
  leaves = list(space.spaces.values()) if isinstance(space, gym.spaces.Dict) else [space]
  if not all(isinstance(s, gym.spaces.Box) and np.issubdtype(s.dtype, np.floating)
             for s in leaves):
    if discrete:
      others = ", ".join(a for a in DISCRETE_AGENTS.split(", ") if a != agent)
      raise TypeError(f"{agent} learns bounded float actions or one int action (a Discrete "
                      f"space, num_values n, shape ()), but the action space {space} is "
                      f"neither (several, shaped or bool int actions). Agents for those: "
                      f"{others}.")
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
  """Dense layers and their activation; with ``renorm``, Batch Renormalization on the input
  and after each activation (``train``: its training pass); DroQ's ``dropout`` (active when
  not ``deterministic``) and ``layer_norm`` after each Dense layer, before its activation
  (sbx's order)."""

  layers: tuple[int, ...]
  activation: str
  renorm: RenormSettings | None = None
  layer_norm: bool = False
  dropout: float = 0.0

  @nn.compact
  def __call__(self, x, train: bool = False, deterministic: bool = True):
    renorm = (lambda x: x) if self.renorm is None else (
        lambda x: BatchRenorm(self.renorm)(x, train))
    x = renorm(x)
    for size in self.layers:
      x = Dense(size)(x)
      if self.dropout:
        x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
      if self.layer_norm:
        x = nn.LayerNorm()(x)
      x = renorm(_ACTIVATIONS[self.activation](x))
    return x


def hidden(x, layers: tuple[int, ...], activation: str, architecture: str = "mlp", *,
           renorm: RenormSettings | None = None, layer_norm: bool = False,
           dropout: float = 0.0, train: bool = False, deterministic: bool = True):
  """The hidden layers of an actor or a critic on ``x [N, D]`` (called inside a compact
  method, whose submodule they become): an ``MLP`` of ``layers``, or SimBa's blocks of those
  widths (no Batch Renormalization there: CrossQ refuses SimBa; their own LayerNorms, so no
  ``layer_norm``)."""
  if architecture == "simba":
    return Simba(layers, _ACTIVATIONS[activation], dropout)(x, deterministic)
  return MLP(layers, activation, renorm, layer_norm, dropout)(x, train, deterministic)


class Actor(nn.Module):
  """obs -> ``tanh(mu) [N, A]`` (deterministic), ``(mean, log_std) [N, A]`` each (squashed
  Gaussian, log std in ``[LOG_STD_MIN, LOG_STD_MAX]`` through a tanh, or, ``log_std_head``
  'clip', clipped to ``[LOG_STD_CLIP_MIN, LOG_STD_MAX]``) or, ``categorical``, the logits
  ``[N, n]`` of a Discrete action (``size`` = n)."""

  torso: nn.Module | None
  layers: tuple[int, ...]
  activation: str
  size: int
  stochastic: bool
  categorical: bool = False
  renorm: RenormSettings | None = None
  architecture: str = "mlp"
  log_std_head: str = "tanh"

  @nn.compact
  def __call__(self, obs, train: bool = False):
    if self.torso is None:
      x = hidden(obs, self.layers, self.activation, self.architecture, renorm=self.renorm,
                 train=train)
    else:  # the torso's features, renormalized when the MLPs are
      x = MLP((), self.activation, self.renorm)(self.torso((), obs)[1], train)
    if self.categorical:
      return Dense(self.size, name="logits")(x)
    if not self.stochastic:
      return jnp.tanh(Dense(self.size, name="mu")(x))
    mean = Dense(self.size, name="mean")(x)
    head = Dense(self.size, name="log_std")(x)
    if self.log_std_head == "clip":
      return mean, jnp.clip(head, LOG_STD_CLIP_MIN, LOG_STD_MAX)
    squash = jnp.tanh(head)
    return mean, LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (squash + 1.0)


class Critic(nn.Module):
  """``(obs, action [N, A]) -> Q [N]``; with ``num_values`` n > 0 (a Discrete action),
  ``obs -> Q(s, .) [N, n]`` (the action input is not read); with ``num_quantiles`` Q > 0
  (TQC), ``(obs, action) -> `` the quantiles of the return ``[N, Q]``. ``dropout`` is active
  when not ``deterministic``."""

  torso: nn.Module | None
  layers: tuple[int, ...]
  activation: str
  num_values: int = 0
  num_quantiles: int = 0
  renorm: RenormSettings | None = None
  architecture: str = "mlp"
  layer_norm: bool = False
  dropout: float = 0.0

  @nn.compact
  def __call__(self, obs, action, train: bool = False, deterministic: bool = True):
    x = obs if self.torso is None else self.torso((), obs)[1]
    body = functools.partial(hidden, layers=self.layers, activation=self.activation,
                             architecture=self.architecture, layer_norm=self.layer_norm,
                             dropout=self.dropout, deterministic=deterministic)
    if self.num_values:
      return Dense(self.num_values, name="q")(body(x))
    x = body(jnp.concatenate([x, action], axis=-1), renorm=self.renorm, train=train)
    if self.num_quantiles:
      return Dense(self.num_quantiles, name="q")(x)
    return Dense(1, name="q")(x)[..., 0]


class Critics(nn.Module):
  """``C`` independent critics: ``(obs, action) -> Q [C, N]`` (``[C, N, n]`` with
  ``num_values``, ``[C, N, Q]`` with ``num_quantiles``)."""

  torsos: tuple[nn.Module, ...] | None
  num: int
  layers: tuple[int, ...]
  activation: str
  num_values: int = 0
  num_quantiles: int = 0
  renorm: RenormSettings | None = None
  architecture: str = "mlp"
  layer_norm: bool = False
  dropout: float = 0.0

  @nn.compact
  def __call__(self, obs, action, train: bool = False, deterministic: bool = True):
    return jnp.stack([
        Critic(None if self.torsos is None else self.torsos[i], self.layers, self.activation,
               self.num_values, self.num_quantiles, self.renorm, self.architecture,
               self.layer_norm, self.dropout,
               name=f"critic_{i}")(obs, action, train, deterministic)
        for i in range(self.num)])


class Renormed(NamedTuple):
  """The variables of a network with Batch Renormalization: ``params``, what gradients
  move, and ``stats``, its layers' running statistics, which training passes move."""

  params: Any
  stats: Any


@dataclasses.dataclass(frozen=True)
class ACNetworks:
  """Pure functions of the actor and the critics.

  Attributes:
    init: ``key -> (actor_params, critic_params)``.
    actor: ``(params, obs [N, ...]) -> action [N, A]`` (deterministic), ``(mean, log_std)``
      (squashed Gaussian) or logits ``[N, n]`` (Discrete; masked actions at the lowest float).
    critic: ``(params, obs, action) -> Q [C, N]`` (Discrete: ``action`` int32 ``[N]`` indices;
      quantile critics: ``[C, N, Q]``); a ``dropout_key=`` makes it a pass with the
      critics' dropout (``with_dropout``).
    actions: normalized ``[N, A]`` <-> the env's actions, or ``DiscreteActions``.
    stochastic: whether the actor is a squashed Gaussian or categorical.
    q_values: Discrete only: ``(params, obs) -> Q(s, .) [C, N, n]`` (``dropout_key=`` as
      ``critic``); None otherwise.
    params_of: the part of a network's variables that gradients move (all of them but
      ``Renormed``'s statistics): what the optimizers see.
    actor_train, critic_train: with Batch Renormalization only (``Renormed`` variables):
      the training passes, ``(variables, obs[, action]) -> (output, new stats)``; ``actor``
      and ``critic`` are then the inference passes (running statistics).
  """

  init: Callable[[jax.Array], tuple[Any, Any]]
  actor: Callable[[Any, Any], Any]
  critic: Callable[[Any, Any, jax.Array], jax.Array]
  actions: ActionMap | DiscreteActions
  stochastic: bool
  q_values: Callable[[Any, Any], jax.Array] | None = None
  params_of: Callable[[Any], Any] = lambda variables: variables
  actor_train: Callable[[Renormed, Any], tuple[Any, Any]] | None = None
  critic_train: Callable[[Renormed, Any, jax.Array], tuple[jax.Array, Any]] | None = None

  @property
  def discrete(self) -> bool:
    return isinstance(self.actions, DiscreteActions)

  def with_dropout(self, key: jax.Array | None) -> "ACNetworks":
    """These networks with the critics' passes dropping out (DroQ), the masks drawn from
    ``key``: what a learning step's losses call (``learning.dropout_keys``); as they are when
    ``key`` is None (no dropout)."""
    if key is None:
      return self
    q_values = (None if self.q_values is None
                else functools.partial(self.q_values, dropout_key=key))
    return dataclasses.replace(self, critic=functools.partial(self.critic, dropout_key=key),
                               q_values=q_values)

  def stored_action(self) -> jax.Array:
    """One stored action, as zeros: an int32 index or a normalized float vector ``[A]``."""
    if self.discrete:
      return jnp.int32(0)
    return jnp.zeros((self.actions.size,), jnp.float32)


def make_networks(config, info: SpaceInfo, num_critics: int, stochastic: bool,
                  agent: str, discrete: bool = False, num_quantiles: int = 0,
                  renorm: RenormSettings | None = None,
                  log_std_head: str = "tanh") -> ACNetworks:
  """The networks for ``info`` (flat layout: MLPs; tree layout: a torso per network from
  ``config.network``, 'auto' when None); ``discrete``: the agent learns one Discrete action
  with a categorical actor and critics of ``Q(s, .)`` when the space is one (SAC);
  ``num_quantiles`` > 0: each critic gives that many quantiles of the return (TQC);
  ``renorm``: Batch Renormalization in both (CrossQ; float actions); ``log_std_head``: how
  a Gaussian actor bounds its log std (``Actor``). SimBa on image observations without an
  encoder is a ConfigError."""
  actions = actor_critic_actions(info.action_space, agent, config.action_bounds, discrete)
  check_simba_inputs(config, info, agent)
  if info.layout == "flat":
    actor_torso, critic_torsos = None, None
    example = lambda: jnp.zeros((1, info.observation_size), jnp.float32)
    prepare = lambda obs: (obs, None)
  else:
    spec = json.loads(config.network) if config.network is not None else "auto"
    inputs = input_specs_from_space(info.network_space)
    torsos = [build_network(spec, inputs) for _ in range(1 + num_critics)]
    if torsos[0].recurrent:
      raise ValueError(f"{agent} trains on single transitions and cannot carry the state of "
                       "recurrent (lstm/gru) layers; remove them from the network or stack "
                       "frames with the 'sequence' preprocessor.")
    actor_torso, critic_torsos = torsos[0].module, tuple(t.module for t in torsos[1:])
    example = lambda: spaces.zero_obs(info, (1,))
    prepare = lambda obs: spaces.split_masks(info, obs)
  if isinstance(actions, DiscreteActions):
    return _discrete_networks(config, actions, num_critics, actor_torso, critic_torsos,
                              example, prepare)
  actor = Actor(actor_torso, config.actor_layers, config.activation, actions.size, stochastic,
                renorm=renorm, architecture=config.architecture, log_std_head=log_std_head)
  critics = Critics(critic_torsos, num_critics, config.critic_layers, config.activation,
                    num_quantiles=num_quantiles, renorm=renorm, **critic_options(config))
  if renorm is not None:
    return _renormed_networks(actor, critics, actions, stochastic, example, prepare)

  # the example input is made per call: init may run inside a trace (a jitted or vmapped
  # init), whose arrays must not outlive it
  def init(key):
    actor_key, critic_key = jax.random.split(key)
    obs = prepare(example())[0]
    return (actor.init(actor_key, obs)["params"],
            critics.init(critic_key, obs, jnp.zeros((1, actions.size), jnp.float32))["params"])

  def critic(params, obs, a, dropout_key=None):
    return critics.apply({"params": params}, prepare(obs)[0], a, **dropping(dropout_key))

  return ACNetworks(
      init, lambda params, obs: actor.apply({"params": params}, prepare(obs)[0]), critic,
      actions, stochastic)


def critic_options(config) -> dict:
  """The ``Critics`` fields a config sets besides their sizes: the architecture and DroQ's
  dropout and LayerNorm."""
  return dict(architecture=config.architecture, layer_norm=config.critic_layer_norm,
              dropout=config.critic_dropout)


def dropping(key: jax.Array | None) -> dict:
  """The ``apply`` arguments of a critics' pass: with ``key``, dropout on, its masks drawn
  from it; without, none (the inference pass, the call as it always was)."""
  return {} if key is None else dict(deterministic=False, rngs={"dropout": key})


def check_simba_inputs(config, info: SpaceInfo, agent: str) -> None:
  """SimBa's blocks take feature vectors: on image observations (the flat layout's Box of
  rank 3 or more, which an MLP would flatten) they need an encoder first."""
  shape = info.observation_shape if info.layout == "flat" else ()
  if config.architecture == "simba" and len(shape) >= 3:
    raise ConfigError(
        f"{agent}.architecture 'simba' takes vector observations, but these are images of "
        f"shape {shape}: SimBa's residual blocks need an encoder before them. Give a network "
        f"spec with a convolutional encoder as {agent}.network (the JSON text '\"auto\"' "
        "has one; or your own conv2d layers and a flatten): the critics' SimBa blocks then "
        "run on its features, and a {'type': 'simba', 'size': ...} layer after the flatten "
        "puts SimBa in the encoder too.")


def _renormed_networks(actor: Actor, critics: Critics, actions: ActionMap, stochastic: bool,
                       example, prepare) -> ACNetworks:
  """The networks of ``make_networks`` with Batch Renormalization: ``Renormed`` variables,
  inference passes as ``actor`` and ``critic``, and the training passes."""

  def variables(v: Renormed) -> dict:
    return {"params": v.params, "batch_stats": v.stats}

  def init(key):
    actor_key, critic_key = jax.random.split(key)
    obs = prepare(example())[0]
    a = actor.init(actor_key, obs)
    c = critics.init(critic_key, obs, jnp.zeros((1, actions.size), jnp.float32))
    return Renormed(a["params"], a["batch_stats"]), Renormed(c["params"], c["batch_stats"])

  def training(module: nn.Module, v: Renormed, *inputs):
    out, changed = module.apply(variables(v), *inputs, train=True, mutable=["batch_stats"])
    return out, changed["batch_stats"]

  return ACNetworks(
      init, lambda v, obs: actor.apply(variables(v), prepare(obs)[0]),
      lambda v, obs, a: critics.apply(variables(v), prepare(obs)[0], a), actions, stochastic,
      params_of=lambda v: v.params,
      actor_train=lambda v, obs: training(actor, v, prepare(obs)[0]),
      critic_train=lambda v, obs, a: training(critics, v, prepare(obs)[0], a))


def _discrete_networks(config, actions: DiscreteActions, num_critics: int, actor_torso,
                       critic_torsos, example, prepare) -> ACNetworks:
  """A categorical actor and ``num_critics`` critics of ``Q(s, .)``; ``prepare(obs) ->
  (network inputs, action mask [N, n] or None)``."""
  actor = Actor(actor_torso, config.actor_layers, config.activation, actions.n, True,
                categorical=True, architecture=config.architecture)
  critics = Critics(critic_torsos, num_critics, config.critic_layers, config.activation,
                    actions.n, **critic_options(config))

  def init(key):
    actor_key, critic_key = jax.random.split(key)
    obs = prepare(example())[0]
    return actor.init(actor_key, obs)["params"], critics.init(critic_key, obs, None)["params"]

  def logits(params, obs):
    inputs, mask = prepare(obs)
    return Categorical.masked(actor.apply({"params": params}, inputs), mask).logits

  def q_values(params, obs, dropout_key=None):
    return critics.apply({"params": params}, prepare(obs)[0], None, **dropping(dropout_key))

  def critic(params, obs, index, dropout_key=None):
    q = q_values(params, obs, dropout_key)
    index = jnp.broadcast_to(jnp.asarray(index, jnp.int32), q.shape[:-1])
    return jnp.take_along_axis(q, index[..., None], axis=-1)[..., 0]

  return ACNetworks(init, logits, critic, actions, True, q_values)
