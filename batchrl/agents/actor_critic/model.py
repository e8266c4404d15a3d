"""What DDPG, TD3 and SAC share around their updates: the state, ``init``, ``act``, ``store``
and the ``Model`` built from them and an agent's own ``update`` (each agent's
``update.py``: critic step, actor step, temperature step, target sync, top to bottom, from
the pieces in ``learning.py``). An agent says what it is with an ``ActorCriticKind``.

Shapes: ``B`` envs, ``K`` batch size, ``A`` action size (normalized units in ``[-1, 1]``),
``C`` critics. Top to bottom:

  act     the actor (on observations normalized by the running statistics, with
          ``normalize_observations``): ``tanh(mu(obs))`` plus exploration noise unless
          deterministic (DDPG, TD3; Ornstein-Uhlenbeck noise state goes out in
          ``extras["noise"]``), or a sample of the squashed Gaussian (SAC; its mean when
          deterministic), or of the categorical policy (SAC on a Discrete action; its most
          likely allowed action when deterministic); for the first ``start_steps`` steps a
          uniform draw instead (unless deterministic) -> the env's units
  store   the ``[B]`` transition as one memory row (action normalized, or its index); count
          steps; move the observations' running statistics (``normalize_observations``) and
          the discounted returns rewards are scaled by (``normalize_rewards``)
  update  the agent's: every ``update_frequency`` stores, from ``first_update`` steps on,
          ``repeat_update`` gradient steps, each on a fresh batch, the targets moved after
          the learning steps of an update in which a ``target_update_frequency`` boundary
          passed (``learning.schedule``)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp

from batchrl.agents import spaces
from batchrl.agents.actor_critic import observations, rewards
from batchrl.agents.actor_critic.config import ActorCriticConfig
from batchrl.agents.actor_critic.learning import optimizers
from batchrl.agents.actor_critic.networks import (
  ACNetworks,
  actor_critic_actions,
  make_networks,
  squashed_sample,
)
from batchrl.agents.core import Model, Transition
from batchrl.agents.replay import updates as replay
from batchrl.agents.spaces import SpaceInfo, space_info
from batchrl.exploration import Exploration
from batchrl.memories import MemoryState, TransitionItem, import_transitions
from batchrl.networks.distributions import Categorical
from batchrl.networks.layer_specs import RenormSettings
from batchrl.specs import EnvSpec


@dataclasses.dataclass(frozen=True)
class ActorCriticKind:
  """What ``init``, ``act`` and ``store`` need to know of an agent: its networks and its
  exploration. No losses: each agent's update is its own (``<agent>/update.py``)."""

  name: str
  num_critics: int
  stochastic: bool  # a squashed Gaussian (or categorical) actor, sampled to explore (SAC)
  exploration: Exploration | None = None  # noise on a deterministic actor (DDPG, TD3)
  learns_alpha: bool = False  # SAC with alpha_learning_rate > 0: an optimizer for log alpha
  discrete_actions: bool = False  # a Discrete action space is learned, not refused (SAC)
  num_quantiles: int = 0  # > 0: critics of the return's quantiles [C, N, Q] (TQC)
  renorm: RenormSettings | None = None  # Batch Renormalization in actor and critics (CrossQ)
  target_networks: bool = True  # False: no target copies are kept (CrossQ)
  # (config, info) -> ACNetworks when the agent builds networks of its own (SimbaV2's
  # hyperspherical ones); None: ``make_networks``' MLPs, SimBa or torsos
  build_networks: Callable[[Any, SpaceInfo], ACNetworks] | None = None


class ACParams(NamedTuple):
  actor: Any  # parameters, or Renormed(parameters, statistics) (CrossQ)
  critic: Any
  target_actor: Any  # () without target networks (CrossQ)
  target_critic: Any
  log_alpha: jax.Array  # [] SAC's log temperature (0, unused, for DDPG and TD3)


class ACOptState(NamedTuple):
  actor: Any
  critic: Any
  alpha: Any  # () unless SAC learns its temperature
  steps: jax.Array  # [] int32 gradient steps taken (TD3's policy delay counts them)


class ACState(NamedTuple):
  """Everything an actor-critic agent learns and remembers; a pytree."""

  params: ACParams
  opt_state: ACOptState
  memory: MemoryState  # observations as they came (normalized when sampled)
  obs_stats: Any  # running statistics of the float observations (normalize_observations), ()
  reward_stats: Any  # the discounted returns rewards are scaled by (normalize_rewards), ()
  noise: Any  # [B, A] Ornstein-Uhlenbeck state, () otherwise
  key: jax.Array
  num_steps: jax.Array  # [] int32 environment steps stored (summed over envs)
  pending: jax.Array  # [] int32 stores since the last update
  num_updates: jax.Array  # [] int32 updates that learned
  last_sync: jax.Array  # [] int32 num_steps // target_update_frequency at the last sync
  info: SpaceInfo
  # the config, for the host methods that take the state alone (import_observations); the
  # functions of the Model close over their own
  static: replay.Static = replay.Static(None)


Update = Callable[[Any, ACNetworks, "ACState"], tuple["ACState", dict]]


def make_actor_critic(config: ActorCriticConfig, kind: ActorCriticKind, update: Update) -> Model:
  """The ``Model`` of an agent: the shared ``init``, ``act``, ``store`` of ``kind`` and its
  own ``update(config, nets, state) -> (state, metrics)``; ``period = update_frequency``."""
  return replay.replay_model(
      config, kind.name,
      init=lambda key, spec: init(config, kind, key, spec),
      act=lambda state, obs, key, deterministic=False: act(config, kind, state, obs, key,
                                                           deterministic),
      store=lambda state, transition: store(config, kind, state, transition),
      update=lambda state: update(config, networks(config, kind, state.info),
                                  reset_due(config, kind, state)),
      summarize=lambda state: summarize(config, kind, state))


# ------------------------------------------------------------------------------ pieces


def layout(config: ActorCriticConfig, spec: EnvSpec) -> str:
  """MLPs on a Box observation, else torsos from the network spec."""
  flat = config.network is None and isinstance(spec.observation_space, gym.spaces.Box)
  return "flat" if flat else "tree"


def networks(config: ActorCriticConfig, kind: ActorCriticKind, info: SpaceInfo) -> ACNetworks:
  """The pure functions of ``kind``'s actor and critics for ``info`` (built where a
  function is traced: no module-level cache)."""
  if kind.build_networks is not None:
    return kind.build_networks(config, info)
  return make_networks(config, info, kind.num_critics, kind.stochastic, kind.name,
                       kind.discrete_actions, kind.num_quantiles, kind.renorm,
                       config.log_std_head if kind.stochastic else "tanh")


def init(config: ActorCriticConfig, kind: ActorCriticKind, key: jax.Array,
         spec: EnvSpec) -> ACState:
  """Online and target networks (equal; no targets unless ``kind.target_networks``),
  optimizers, an empty memory, empty observation statistics, zero noise."""
  info = space_info(spec, layout(config, spec))
  nets = networks(config, kind, info)
  memory = replay.memory_of(config, info)
  if memory.num_items < config.batch_size:
    raise ValueError(f"{kind.name}.memory_capacity holds {memory.num_items} transitions (whole "
                     f"rows of {info.num_envs} envs), fewer than batch_size "
                     f"({config.batch_size}).")
  params_key, state_key = jax.random.split(key)
  log_alpha = jnp.log(jnp.float32(getattr(config, "initial_alpha", 1.0)))
  params, actor_opt, critic_opt = fresh_networks(config, kind, nets, params_key, log_alpha)
  alpha = optimizers(config, kind.learns_alpha).alpha
  zero = jnp.int32(0)
  opt_state = ACOptState(actor_opt, critic_opt,
                         () if alpha is None else alpha.init(log_alpha), zero)
  noise = (() if kind.exploration is None
           else kind.exploration.init(info.num_envs, (nets.actions.size,)))
  obs = spaces.zero_obs(info, ())
  item = TransitionItem(obs, nets.stored_action(), jnp.float32(0), jnp.bool_(False),
                        jnp.bool_(False), obs)
  return ACState(params, opt_state, memory.init(item), observations.init_stats(config, info),
                 rewards.init_stats(config, info.num_envs), noise, state_key, zero, zero, zero,
                 zero, info, replay.Static(config))


def fresh_networks(config: ActorCriticConfig, kind: ActorCriticKind, nets: ACNetworks,
                   key: jax.Array, log_alpha: jax.Array):
  """``(params, actor optimizer state, critic optimizer state)``: newly initialized networks
  (targets equal to them, unless the agent keeps none), the temperature ``log_alpha``, and
  fresh optimizer states for the networks."""
  actor, critic = nets.init(key)
  targets = (actor, critic) if kind.target_networks else ((), ())
  opts = optimizers(config, kind.learns_alpha)
  return (ACParams(actor, critic, *targets, log_alpha), opts.actor.init(nets.params_of(actor)),
          opts.critic.init(nets.params_of(critic)))


def reset_due(config: ActorCriticConfig, kind: ActorCriticKind, state: ACState) -> ACState:
  """The state with fresh networks (``fresh_networks``) when a ``param_resets`` step was
  passed by the steps stored since the last update, else as it is. An update follows every
  ``update_frequency`` stores, so each reset step is passed by exactly one."""
  if not config.param_resets:  # a Python check: no resets leave the program as it was
    return state
  since = state.num_steps - state.pending * state.info.num_envs
  resets = jnp.asarray(config.param_resets, jnp.int32)
  passed = (since < resets) & (resets <= state.num_steps)

  def reset(state):
    nets = networks(config, kind, state.info)
    key = jax.random.fold_in(state.key, jnp.argmax(passed))
    params, actor_opt, critic_opt = fresh_networks(config, kind, nets, key,
                                                   state.params.log_alpha)
    # the temperature, its optimizer and the gradient step count go on
    return state._replace(params=params, opt_state=state.opt_state._replace(
        actor=actor_opt, critic=critic_opt))

  return jax.lax.cond(jnp.any(passed), reset, lambda state: state, state)


# ------------------------------------------------------------------------- act, store


def act(config: ActorCriticConfig, kind: ActorCriticKind, state: ACState, obs,
        key: jax.Array, deterministic: bool = False):
  """``obs[B, ...] -> (action[B, ...], {"noise": [B, A]} or {})`` in the env's units."""
  nets = networks(config, kind, state.info)
  obs = observations.normalized(config, state.obs_stats, spaces.float_obs(state.info, obs))
  out = nets.actor(state.params.actor, obs)
  noise, exploration = state.noise, kind.exploration
  if nets.discrete:  # masked logits: a masked action is never sampled nor the mode
    policy = Categorical(out)
    action = policy.mode() if deterministic else policy.sample(key)
  elif kind.stochastic:
    action = jnp.tanh(out[0]) if deterministic else squashed_sample(key, *out)[0]
  elif deterministic or exploration is None:
    action = out
  else:
    noise, action = exploration.apply(state.noise, key, out, state.num_steps, kind="float",
                                      low=-1.0, high=1.0)
  if config.start_steps and not deterministic:  # a Python check: 0 leaves the program as is
    action = jnp.where(state.num_steps < config.start_steps,
                       uniform_action(jax.random.fold_in(key, 1), out, nets.discrete), action)
  extras = {"noise": noise} if exploration is not None and exploration.is_ou else {}
  return nets.actions.to_env(action), extras


def uniform_action(key: jax.Array, out, discrete: bool) -> jax.Array:
  """An action drawn uniformly, shaped as the actor's: in ``[-1, 1]`` per element (the
  bounds, normalized), or among the allowed actions of masked ``logits`` (a Discrete
  action: the masked ones sit at the lowest float)."""
  if discrete:
    lowest = jnp.finfo(out.dtype).min
    return Categorical(jnp.where(out == lowest, lowest, 0.0)).sample(key)
  mean = out[0] if isinstance(out, tuple) else out  # SAC's actor: (mean, log_std)
  return jax.random.uniform(key, mean.shape, mean.dtype, -1.0, 1.0)


def store(config: ActorCriticConfig, kind: ActorCriticKind, state: ACState,
          transition: Transition) -> ACState:
  """Writes the ``[B]`` transition as one memory row; keeps the act's OU noise (zero where
  the episode ended); adds its observations to the running statistics (when normalizing)."""
  info = state.info
  nets = networks(config, kind, info)
  row = replay.memory_row(info, nets.actions.from_env(transition.action), transition)
  memory = replay.memory_of(config, info).add(state.memory, row)
  noise = replay.carried_noise(kind.exploration, state.noise, transition)
  stats = observations.update_stats(config, state.obs_stats, row.obs)
  reward_stats = rewards.update_stats(config, state.reward_stats, row.reward,
                                      row.terminated | row.truncated)
  return state._replace(memory=memory, obs_stats=stats, reward_stats=reward_stats, noise=noise,
                        num_steps=state.num_steps + info.num_envs, pending=state.pending + 1)


# ------------------------------------------------------------------------ summaries


def summarize(config: ActorCriticConfig, kind: ActorCriticKind, state: ACState) -> dict:
  """TensorBoard material: memory fill, updates, the temperature, the observation
  statistics, the OU noise."""
  memory = replay.memory_of(config, state.info)
  scalars = {"memory/size": memory.size(state.memory).astype(jnp.float32),
             "updates": state.num_updates.astype(jnp.float32)}
  if kind.stochastic:
    scalars["alpha"] = jnp.exp(state.params.log_alpha)
  if config.normalize_observations:
    scalars["obs_mean"], scalars["obs_std"] = observations.mean_std(state.obs_stats)
  if config.normalize_rewards:
    scalars["reward_scale"] = rewards.scale(config, state.reward_stats)
  histograms = {}
  if memory.prioritized:
    histograms["memory/priorities"] = memory.priorities_of(state.memory)
  if jax.tree.leaves(state.noise):
    histograms["exploration/ou_noise"] = state.noise
  return {"scalars": scalars, "histograms": histograms}


def import_observations(state: ACState, imported) -> ACState:
  """Fills the replay memory from TensorForce observations (``imported``, as DQN's and NAF's
  ``import_observations`` take them); actions in the env's units, stored normalized (float)
  or as their index (Discrete, SAC: a state holding one was built by an agent that takes
  it). An agent that normalizes observations adds the imported states to its running
  statistics, as ``store`` adds each stored one: the batches it samples are normalized by
  the statistics of what its memory holds."""
  config = replay.config_of(state, "actor-critic")
  actions = actor_critic_actions(state.info.action_space, "actor-critic",
                                 config.action_bounds, discrete=True)
  items = replay.memory_transitions(state.info, actions.from_env, imported)
  memory = import_transitions(replay.memory_of(config, state.info), state.memory, items)
  stats = observations.update_stats(config, state.obs_stats, items.obs)
  return state._replace(memory=memory, obs_stats=stats)
