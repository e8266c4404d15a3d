"""The model skeleton DDPG, TD3 and SAC share; each agent's ``model.py`` hands it an
``Algorithm`` (its critic target, its actor loss, its critic count).

Shapes: ``B`` envs, ``K`` batch size, ``A`` action size (normalized units in ``[-1, 1]``),
``C`` critics. Top to bottom:

  act     the actor: ``tanh(mu(obs))`` plus exploration noise unless deterministic (DDPG,
          TD3; Ornstein-Uhlenbeck noise state goes out in ``extras["noise"]``), or a sample
          of the squashed Gaussian (SAC; its mean when deterministic), or of the categorical
          policy (SAC on a Discrete action; its most likely allowed action when
          deterministic); for the first ``start_steps`` steps a uniform draw instead (unless
          deterministic) -> the env's units
  store   the ``[B]`` transition as one memory row (action normalized, or its index); count
          steps
  update  every ``update_frequency`` stores, from ``first_update`` steps on (the gate of
          ``replay.gated_steps``), ``repeat_update`` gradient steps, each on a fresh batch:
            critics  <- Adam on the TD loss against ``r + gamma (1 - terminated) V'(s')``,
                        ``V'`` the algorithm's (``Algorithm.next_value``, target networks)
            actor    <- Adam on ``Algorithm.actor_loss`` through the new critics, on every
                        ``policy_delay``-th gradient step (TD3 delays; others 1)
            alpha    <- (SAC) Adam on ``-log alpha (log pi + target_entropy)`` (discrete:
                        ``sum_a pi log pi``, the exact negative entropy, for ``log pi``)
            targets  <- tau online + (1 - tau) target, after each actor step of an update in
                        which a ``target_update_frequency`` boundary passed
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import optax

from batchrl.agents import spaces
from batchrl.agents.actor_critic.config import ActorCriticConfig
from batchrl.agents.actor_critic.losses import bellman_target, critic_loss, temperature_objective
from batchrl.agents.actor_critic.networks import (
  ACNetworks,
  actor_critic_actions,
  make_networks,
  squashed_sample,
)
from batchrl.agents.core import Model, Transition
from batchrl.agents.replay import updates as replay
from batchrl.agents.spaces import SpaceInfo, space_info
from batchrl.configclass import ConfigError
from batchrl.exploration import Exploration
from batchrl.memories import MemoryState, TransitionItem, import_transitions
from batchrl.networks.distributions import Categorical
from batchrl.ops.targets import soft_update
from batchrl.specs import EnvSpec


@dataclasses.dataclass(frozen=True)
class Algorithm:
  """What sets DDPG, TD3 and SAC apart (hashable: it keys the network cache).

  ``next_value(config, nets, params, next_obs, key, alpha) -> V'(s') [K]`` and
  ``actor_loss(config, nets, actor_params, critic_params, obs, key, alpha) -> (loss,
  (metrics, log_prob [K] or None))`` are pure functions of their arguments; with
  ``discrete_actions`` they also serve a Discrete action space (``nets.discrete``: a
  categorical actor, critics of ``Q(s, .)``) and ``log_prob`` is ``sum_a pi log pi``.
  """

  name: str
  num_critics: int
  stochastic: bool
  next_value: Callable[..., jax.Array]
  actor_loss: Callable[..., Any]
  exploration: Exploration | None = None
  policy_delay: int = 1
  targets_with_actor: bool = True  # False: the targets move on every step (TD3 as sbx)
  learns_alpha: bool = False
  discrete_actions: bool = False  # a Discrete action space is learned, not refused (SAC)


class ACParams(NamedTuple):
  actor: Any
  critic: Any
  target_actor: Any
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
  memory: MemoryState
  noise: Any  # [B, A] Ornstein-Uhlenbeck state, () otherwise
  key: jax.Array
  num_steps: jax.Array  # [] int32 environment steps stored (summed over envs)
  pending: jax.Array  # [] int32 stores since the last update
  num_updates: jax.Array  # [] int32 updates that learned
  last_sync: jax.Array  # [] int32 num_steps // target_update_frequency at the last sync
  info: SpaceInfo
  static: replay.Static = replay.Static(None)


def make_actor_critic(config: ActorCriticConfig, algo: Algorithm) -> Model:
  """The ``Model`` of ``algo`` with ``config``; ``period = update_frequency``."""
  return replay.replay_model(
      config, algo.name,
      init=lambda key, spec: init(config, algo, key, spec),
      act=lambda state, obs, key, deterministic=False: act(config, algo, state, obs, key,
                                                           deterministic),
      store=lambda state, transition: store(config, algo, state, transition),
      update=lambda state: update(config, algo, state),
      summarize=lambda state: summarize(config, algo, state))


# ------------------------------------------------------------------------------ pieces


def layout(config: ActorCriticConfig, spec: EnvSpec) -> str:
  """MLPs on a Box observation, else torsos from the network spec."""
  flat = config.network is None and isinstance(spec.observation_space, gym.spaces.Box)
  return "flat" if flat else "tree"


@functools.lru_cache(maxsize=64)
def networks(config: ActorCriticConfig, algo: Algorithm, info: SpaceInfo) -> ACNetworks:
  return make_networks(config, info, algo.num_critics, algo.stochastic, algo.name,
                       algo.discrete_actions)


def optimizers(config: ActorCriticConfig, algo: Algorithm):
  """Adam for the actor, the critics and (SAC) the temperature."""
  clip = ([optax.clip_by_global_norm(config.max_grad_norm)]
          if config.max_grad_norm is not None else [])
  adam = lambda rate: optax.chain(*clip, optax.adam(rate, eps=config.adam_epsilon))
  alpha = optax.adam(config.alpha_learning_rate) if algo.learns_alpha else None
  return adam(config.learning_rate), adam(config.critic_learning_rate), alpha


def init(config: ActorCriticConfig, algo: Algorithm, key: jax.Array, spec: EnvSpec) -> ACState:
  """Online and target networks (equal), optimizers, an empty memory, zero noise."""
  info = space_info(spec, layout(config, spec))
  nets = networks(config, algo, info)
  memory = replay.memory_of(config, info)
  if memory.num_items < config.batch_size:
    raise ValueError(f"{algo.name}.memory_capacity holds {memory.num_items} transitions (whole "
                     f"rows of {info.num_envs} envs), fewer than batch_size "
                     f"({config.batch_size}).")
  if algo.learns_alpha:
    sac_target_entropy(config, nets)  # a discrete one above log n is an error, now
  params_key, state_key = jax.random.split(key)
  actor, critic = nets.init(params_key)
  log_alpha = jnp.log(jnp.float32(getattr(config, "initial_alpha", 1.0)))
  params = ACParams(actor, critic, actor, critic, log_alpha)
  actor_opt, critic_opt, alpha_opt = optimizers(config, algo)
  zero = jnp.int32(0)
  opt_state = ACOptState(actor_opt.init(actor), critic_opt.init(critic),
                         () if alpha_opt is None else alpha_opt.init(log_alpha), zero)
  noise = (() if algo.exploration is None
           else algo.exploration.init(info.num_envs, (nets.actions.size,)))
  obs = spaces.zero_obs(info, ())
  item = TransitionItem(obs, nets.stored_action(), jnp.float32(0), jnp.bool_(False),
                        jnp.bool_(False), obs)
  return ACState(params, opt_state, memory.init(item), noise, state_key, zero, zero, zero,
                 zero, info, replay.Static(config))


# ------------------------------------------------------------------------- act, store


def act(config: ActorCriticConfig, algo: Algorithm, state: ACState, obs, key: jax.Array,
        deterministic: bool = False):
  """``obs[B, ...] -> (action[B, ...], {"noise": [B, A]} or {})`` in the env's units."""
  nets = networks(config, algo, state.info)
  out = nets.actor(state.params.actor, spaces.float_obs(state.info, obs))
  noise, exploration = state.noise, algo.exploration
  if nets.discrete:  # masked logits: a masked action is never sampled nor the mode
    policy = Categorical(out)
    action = policy.mode() if deterministic else policy.sample(key)
  elif algo.stochastic:
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


def store(config: ActorCriticConfig, algo: Algorithm, state: ACState,
          transition: Transition) -> ACState:
  """Writes the ``[B]`` transition as one memory row; keeps the act's OU noise (zero where
  the episode ended)."""
  info = state.info
  nets = networks(config, algo, info)
  row = replay.memory_row(info, nets.actions.from_env(transition.action), transition)
  memory = replay.memory_of(config, info).add(state.memory, row)
  noise = replay.carried_noise(algo.exploration, state.noise, transition)
  return state._replace(memory=memory, noise=noise, num_steps=state.num_steps + info.num_envs,
                        pending=state.pending + 1)


# ---------------------------------------------------------------------------- update


def _adam_step(opt, grads, opt_state, params):
  updates, opt_state = opt.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state


def critic_objective(critic, config, nets: ACNetworks, items, weight, target):
  """The critics' TD loss on a batch; aux: ``(Q [C, K], TD error [C, K])``."""
  q = nets.critic(critic, items.obs, items.action)
  loss, error = critic_loss(q, target, weight, config.clip_loss)
  return loss, (q, error)


def gradient_step(config: ActorCriticConfig, algo: Algorithm, move_targets, state: ACState,
                  key, params: ACParams, opt_state: ACOptState):
  """One learning step on a fresh batch: ``(params, opt_state, index[K], |TD|[K], metrics)``."""
  nets = networks(config, algo, state.info)
  actor_opt, critic_opt, alpha_opt = optimizers(config, algo)
  sample_key, target_key, actor_key = jax.random.split(key, 3)
  sample = replay.memory_of(config, state.info).sample(state.memory, sample_key,
                                                       config.batch_size, state.num_steps)
  items = sample.items
  alpha = jnp.exp(params.log_alpha) if algo.stochastic else jnp.float32(0.0)
  next_value = algo.next_value(config, nets, params, items.next_obs, target_key, alpha)
  target = bellman_target(items.reward, items.terminated, config.discount, next_value)

  (c_loss, (q, error)), c_grads = jax.value_and_grad(critic_objective, has_aux=True)(
      params.critic, config, nets, items, sample.weight, target)
  critic, critic_state = _adam_step(critic_opt, c_grads, opt_state.critic, params.critic)

  actor_objective = functools.partial(algo.actor_loss, config, nets, critic_params=critic,
                                      obs=items.obs, key=actor_key, alpha=alpha)

  def actor_step(actor, actor_state):
    (a_loss, (a_metrics, log_prob)), a_grads = jax.value_and_grad(
        actor_objective, has_aux=True)(actor)
    return _adam_step(actor_opt, a_grads, actor_state, actor) + (a_loss, a_metrics, log_prob)

  def actor_held(actor, actor_state):
    # TD3's steps between actor steps: the loss alone, so the metrics still say where the
    # actor stands, without the backward pass and Adam step a discarded step would cost
    a_loss, (a_metrics, log_prob) = actor_objective(actor)
    return actor, actor_state, a_loss, a_metrics, log_prob

  # TD3's Algorithm 1: the actor learns on gradient step t (from 1) when t mod d == 0
  learn_actor = (opt_state.steps + 1) % algo.policy_delay == 0
  if algo.policy_delay > 1:  # a real branch on CPU/GPU (both sides only under vmap)
    actor, actor_state, a_loss, a_metrics, log_prob = jax.lax.cond(
        learn_actor, actor_step, actor_held, params.actor, opt_state.actor)
  else:
    actor, actor_state, a_loss, a_metrics, log_prob = actor_step(params.actor,
                                                                 opt_state.actor)

  log_alpha, alpha_state = params.log_alpha, opt_state.alpha
  metrics = dict(a_metrics)
  if algo.learns_alpha:
    target_entropy = sac_target_entropy(config, nets)
    alpha_grad = jax.grad(temperature_objective)(log_alpha, log_prob, target_entropy)
    log_alpha, alpha_state = _adam_step(alpha_opt, alpha_grad, alpha_state, log_alpha)
    metrics["entropy"] = -jnp.mean(log_prob)

  move = move_targets & learn_actor if algo.targets_with_actor else move_targets
  tau = config.update_target_weight
  moved = lambda new, old: jax.tree.map(
      lambda n, o: jnp.where(move, n, o), soft_update(old, new, tau), old)
  params = ACParams(actor, critic, moved(actor, params.target_actor),
                    moved(critic, params.target_critic), log_alpha)
  opt_state = ACOptState(actor_state, critic_state, alpha_state, opt_state.steps + 1)
  metrics.update(critic_loss=c_loss, actor_loss=a_loss, q_mean=jnp.mean(q),
                 target_mean=jnp.mean(target), td_error=jnp.mean(jnp.abs(error)),
                 alpha=jnp.exp(log_alpha) if algo.stochastic else jnp.float32(0.0),
                 actor_learned=learn_actor.astype(jnp.float32),
                 critic_grad_norm=optax.tree.norm(c_grads))
  return params, opt_state, sample.index, jnp.abs(error[0]), metrics


# The default target entropy of a categorical policy over n actions, as a fraction of the
# largest entropy log n (as CleanRL's sac_atari, whose target_entropy_scale is 0.89;
# Christodoulou (2019) used 0.98). Measured on fused CartPole (n = 2, seed 0, 20k steps, 2x64
# MLPs): with 0.89 the target was out of reach (a policy that balances is decided in the
# states near a fall) and alpha grew without end, to 1500; with 0.72 alpha held near 1.3;
# with 0.5 and 0.3 it settled lower and the greedy policy stayed near 200-350. With 0.7 the
# CartPole named configs reach 500 (batchrl.configs.actor_critic).
DISCRETE_TARGET_ENTROPY_SCALE = 0.7


def sac_target_entropy(config, nets: ACNetworks) -> float:
  """``config.target_entropy``, or when None ``-A`` (minus the action size) for float
  actions and ``DISCRETE_TARGET_ENTROPY_SCALE * log n`` for a Discrete action of n values.
  A discrete target at or above ``log n`` (no policy's entropy is higher) is a ConfigError."""
  given = getattr(config, "target_entropy", None)
  if not nets.discrete:
    return -float(nets.actions.size) if given is None else float(given)
  largest = math.log(nets.actions.n)
  if given is None:
    return DISCRETE_TARGET_ENTROPY_SCALE * largest
  if not float(given) < largest:
    raise ConfigError(f"sac.target_entropy must be below log {nets.actions.n} = {largest:.4g} "
                      f"(the entropy of the uniform policy over the {nets.actions.n} "
                      f"actions: alpha would grow without end), got {given!r}.")
  return float(given)


def update(config: ActorCriticConfig, algo: Algorithm, state: ACState):
  """``repeat_update`` gradient steps under the replay gate, then the counters."""
  memory = replay.memory_of(config, state.info)
  ready = replay.update_ready(config, memory.size(state.memory), state.num_steps)
  period = state.num_steps // config.target_update_frequency
  sync = ready & (period > state.last_sync)
  key, params, opt_state, mstate, metrics = replay.gated_steps(
      config, memory, state, ready, functools.partial(gradient_step, config, algo, sync))
  state = state._replace(
      params=params, opt_state=opt_state, memory=mstate, key=key, pending=jnp.int32(0),
      num_updates=state.num_updates + ready.astype(jnp.int32),
      last_sync=jnp.where(sync, period, state.last_sync))
  metrics.update(memory_size=memory.size(mstate).astype(jnp.float32),
                 learning=ready.astype(jnp.float32), target_synced=sync.astype(jnp.float32))
  return state, metrics


def summarize(config: ActorCriticConfig, algo: Algorithm, state: ACState) -> dict:
  """TensorBoard material: memory fill, updates, the temperature, the OU noise."""
  memory = replay.memory_of(config, state.info)
  scalars = {"memory/size": memory.size(state.memory).astype(jnp.float32),
             "updates": state.num_updates.astype(jnp.float32)}
  if algo.stochastic:
    scalars["alpha"] = jnp.exp(state.params.log_alpha)
  histograms = {}
  if memory.prioritized:
    histograms["memory/priorities"] = memory.priorities_of(state.memory)
  if jax.tree.leaves(state.noise):
    histograms["exploration/ou_noise"] = state.noise
  return {"scalars": scalars, "histograms": histograms}


def import_observations(state: ACState, observations) -> ACState:
  """Fills the replay memory from TensorForce observations (as DQN's and NAF's
  ``import_observations``); actions in the env's units, stored normalized (float) or as
  their index (Discrete, SAC: a state holding one was built by an agent that takes it)."""
  config = replay.config_of(state, "actor-critic")
  actions = actor_critic_actions(state.info.action_space, "actor-critic",
                                 config.action_bounds, discrete=True)
  items = replay.memory_transitions(state.info, actions.from_env, observations)
  memory = import_transitions(replay.memory_of(config, state.info), state.memory, items)
  return state._replace(memory=memory)

