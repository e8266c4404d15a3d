"""NAF, normalized advantage functions (Gu et al. 2016): Q-learning for continuous actions.

Shapes: ``B`` envs, ``K`` batch size, ``A`` action size (normalized units, see
``batchrl.agents.naf.networks``). Top to bottom:

  act     mu(obs) (the greedy action, argmax of the quadratic Q) -> plus exploration noise
          unless deterministic (Ornstein-Uhlenbeck: the new per-env noise state goes out in
          ``extras["noise"]``; Gaussian or a schedule: no state) -> clipped to the bounds
          -> the env's units
  store   write the ``[B]`` transition (obs, normalized action, reward, terminated,
          truncated, next_obs) as one memory row; keep the OU noise the act produced,
          zeroed for envs whose episode ended; count steps
  update  (every ``update_frequency`` stores; learning only from ``first_update`` steps on,
          gated by a ``lax.cond`` over the parameters and optimizer state only)
          ``repeat_update`` times: sample K items -> targets r + gamma (1 - terminated)
          V_target(s') (V is the max of Q, so no maximisation is needed) -> weighted Huber
          or squared TD loss -> Adam -> new priorities |TD error|;
          then every ``target_update_frequency`` steps target <- tau online + (1-tau) target

Exploration lives in ``act`` so every driver explores the same way (the fused loop and
``batchrl train`` call the model only). Ornstein-Uhlenbeck noise is kept per env in the
state because ``act`` is pure: it returns the advanced noise and ``store`` keeps it. The
object API commits a transition inside the next ``act`` of its stream, before acting, so
the noise advances step by step there too (streams acting one at a time through the
staging area see it a few steps late: still a mean-reverting noise, no longer exactly OU).
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import optax

from batchrl.agents import spaces
from batchrl.agents.core import Model, Transition
from batchrl.agents.naf.config import NAFConfig, parse_naf_exploration
from batchrl.agents.naf.networks import NAFNetworks, advantage, check_continuous, make_networks
from batchrl.agents.replay import losses
from batchrl.agents.replay import updates as replay
from batchrl.agents.spaces import SpaceInfo, space_info
from batchrl.exploration import exploration_of
from batchrl.memories import MemoryState, TransitionItem, import_transitions
from batchrl.specs import EnvSpec


class NAFState(NamedTuple):
  """Everything NAF learns and remembers; a pytree (checkpointable, vmappable)."""

  params: Any
  target_params: Any
  opt_state: Any
  memory: MemoryState
  noise: Any  # [B, A] Ornstein-Uhlenbeck state, () for other explorations
  key: jax.Array
  num_steps: jax.Array  # [] int32 environment steps stored (summed over envs)
  pending: jax.Array  # [] int32 stores since the last update
  num_updates: jax.Array  # [] int32 updates that learned
  last_sync: jax.Array  # [] int32 num_steps // target_update_frequency at the last sync
  info: SpaceInfo
  static: replay.Static = replay.Static(None)


def make_naf(config: NAFConfig | None = None, name: str = "naf") -> Model:
  """NAF as a ``Model``; ``period = update_frequency``."""
  config = NAFConfig() if config is None else config
  if not isinstance(config, NAFConfig):
    raise TypeError(f"make_naf takes a NAFConfig, got {type(config).__name__}.")
  exploration = exploration_of(parse_naf_exploration(config.exploration))
  return replay.replay_model(
      config, name,
      init=lambda key, spec: init(config, exploration, key, spec),
      act=lambda state, obs, key, deterministic=False: act(config, exploration, state, obs,
                                                           key, deterministic),
      store=lambda state, transition: store(config, exploration, state, transition),
      update=lambda state: update(config, exploration, state),
      summarize=lambda state: summarize(config, exploration, state))


# ------------------------------------------------------------------------------ pieces


def layout(config: NAFConfig, spec: EnvSpec) -> str:
  """The MLP on a Box observation with one 1-D Box action, else networks from a spec ('auto'
  when none is given)."""
  if config.network is not None:
    return "tree"
  action = spec.action_space
  flat = (isinstance(spec.observation_space, gym.spaces.Box)
          and isinstance(action, gym.spaces.Box) and len(action.shape) == 1)
  return "flat" if flat else "tree"


@functools.lru_cache(maxsize=64)
def networks(config: NAFConfig, info: SpaceInfo) -> NAFNetworks:
  return make_networks(config, info)


def item_template(info: SpaceInfo, nets: NAFNetworks) -> TransitionItem:
  """One stored transition (no batch axes), as zeros; the action normalized ``[A]``."""
  obs = spaces.zero_obs(info, ())
  return TransitionItem(obs, jnp.zeros((nets.actions.size,), jnp.float32), jnp.float32(0),
                        jnp.bool_(False), jnp.bool_(False), obs)


def init(config: NAFConfig, exploration, key: jax.Array, spec: EnvSpec) -> NAFState:
  """Fresh online and target parameters (equal), optimizer, an empty memory, zero noise."""
  check_continuous(spec.action_space)
  info = space_info(spec, layout(config, spec))
  nets = networks(config, info)
  memory = replay.memory_of(config, info)
  if memory.num_items < config.batch_size:
    raise ValueError(f"naf.memory_capacity holds {memory.num_items} transitions (whole rows of "
                     f"{info.num_envs} envs), fewer than batch_size ({config.batch_size}).")
  params_key, state_key = jax.random.split(key)
  params = nets.init(params_key)
  noise = () if exploration is None else exploration.init(info.num_envs,
                                                          (nets.actions.size,))
  zero = jnp.int32(0)
  return NAFState(params, params, replay.optimizer(config).init(params),
                  memory.init(item_template(info, nets)), noise, state_key, zero, zero, zero,
                  zero, info, replay.Static(config))


# ------------------------------------------------------------------------------- act


def noise_scale(exploration, num_steps) -> jax.Array:
  return jnp.float32(0.0) if exploration is None else exploration.value(num_steps)


def act(config: NAFConfig, exploration, state: NAFState, obs, key: jax.Array,
        deterministic: bool = False):
  """``obs[B, ...] -> (action[B, ...], {"noise": [B, A]} or {})``: mu, plus noise unless
  ``deterministic``, clipped to the bounds, in the env's units."""
  info = state.info
  nets = networks(config, info)
  _, mu, _ = nets.outputs(state.params, spaces.float_obs(info, obs))
  action, noise = mu, state.noise
  if not deterministic and exploration is not None:
    amap = nets.actions
    noise, action = exploration.apply(state.noise, key, mu, state.num_steps, kind="float",
                                      low=amap.normalized_low, high=amap.normalized_high)
  extras = {"noise": noise} if exploration is not None and exploration.is_ou else {}
  return nets.actions.to_env(action), extras


# ----------------------------------------------------------------------------- store


def store(config: NAFConfig, exploration, state: NAFState, transition: Transition
          ) -> NAFState:
  """Writes the ``[B]`` transition as one memory row; keeps the act's OU noise (zero where
  the episode ended, so the next one starts fresh)."""
  info = state.info
  nets = networks(config, info)
  row = replay.memory_row(info, nets.actions.from_env(transition.action), transition)
  memory = replay.memory_of(config, info).add(state.memory, row)
  noise = replay.carried_noise(exploration, state.noise, transition)
  return state._replace(memory=memory, noise=noise, num_steps=state.num_steps + info.num_envs,
                        pending=state.pending + 1)


# ---------------------------------------------------------------------------- update


def targets(config: NAFConfig, nets: NAFNetworks, target_params, items) -> jax.Array:
  """``r + gamma (1 - terminated) V_target(s')`` ``[K]`` (truncated steps bootstrap)."""
  next_value = nets.value(target_params, items.next_obs)
  alive = 1.0 - items.terminated.astype(jnp.float32)
  return jax.lax.stop_gradient(items.reward + config.discount * alive * next_value)


def loss_fn(config: NAFConfig, nets: NAFNetworks, params, sample, target: jax.Array):
  """Importance-weighted mean TD loss; aux: (metrics, per-sample |TD error| [K])."""
  items = sample.items
  value, mu, lower = nets.outputs(params, items.obs)
  adv = advantage(mu, lower, items.action)
  q = value + adv
  error = target - q
  loss = jnp.mean(sample.weight * losses.td_loss(error, config.clip_loss))
  metrics = {"loss": loss, "td_error": jnp.mean(jnp.abs(error)), "q_mean": jnp.mean(q),
             "v_mean": jnp.mean(value), "advantage_mean": jnp.mean(adv),
             "target_mean": jnp.mean(target), "importance_weight": jnp.mean(sample.weight)}
  return loss, (metrics, jnp.abs(error))


def gradient_step(config: NAFConfig, state: NAFState, key, params, opt_state):
  """One Adam step on a fresh batch: ``(params, opt_state, index[K], |TD|[K], metrics)``."""
  nets = networks(config, state.info)
  memory = replay.memory_of(config, state.info)
  sample = memory.sample(state.memory, key, config.batch_size, state.num_steps)
  target = targets(config, nets, state.target_params, sample.items)
  grad_fn = jax.value_and_grad(functools.partial(loss_fn, config, nets), has_aux=True)
  (_, (metrics, errors)), grads = grad_fn(params, sample, target)
  updates, opt_state = replay.optimizer(config).update(grads, opt_state, params)
  params = optax.apply_updates(params, updates)
  metrics["grad_norm"] = optax.tree.norm(grads)
  return params, opt_state, sample.index, errors, metrics


def update(config: NAFConfig, exploration, state: NAFState) -> tuple[NAFState, dict]:
  """``repeat_update`` gradient steps (once ``first_update`` steps and a batch are stored),
  priorities from their TD errors, then the target update when it is due (DQN's gate and
  target sync)."""
  memory = replay.memory_of(config, state.info)
  ready = replay.update_ready(config, memory.size(state.memory), state.num_steps)
  key, params, opt_state, mstate, metrics = replay.gated_steps(
      config, memory, state, ready, functools.partial(gradient_step, config))
  state, sync = replay.finish_update(config, state, ready, params, opt_state, mstate, key)
  metrics.update(noise_scale=noise_scale(exploration, state.num_steps),
                 memory_size=memory.size(mstate).astype(jnp.float32),
                 learning=ready.astype(jnp.float32), target_synced=sync.astype(jnp.float32))
  return state, metrics


def summarize(config: NAFConfig, exploration, state: NAFState) -> dict:
  """TensorBoard material: noise scale, memory fill, updates, the OU noise."""
  memory = replay.memory_of(config, state.info)
  scalars = {"noise_scale": noise_scale(exploration, state.num_steps),
             "memory/size": memory.size(state.memory).astype(jnp.float32),
             "updates": state.num_updates.astype(jnp.float32)}
  histograms = {}
  if memory.prioritized:
    histograms["memory/priorities"] = memory.priorities_of(state.memory)
  if jax.tree.leaves(state.noise):
    histograms["exploration/ou_noise"] = state.noise
  return {"scalars": scalars, "histograms": histograms}


def greedy_actions(config: NAFConfig, state: NAFState, obs):
  """``mu(obs)`` in the env's units (no noise): ``[B, ...]``."""
  return act(config, None, state, obs, jax.random.key(0), True)[0]


def import_observations(state: NAFState, observations) -> NAFState:
  """Fills the replay memory from TensorForce observations, as DQN's
  ``import_observations`` (same forms, checks and counting rules); actions are in the env's
  units and stored normalized, clipped to the bounds as ``store`` clips them."""
  config = replay.config_of(state, "naf")
  nets = networks(config, state.info)
  items = replay.memory_transitions(state.info, nets.actions.from_env, observations)
  memory = import_transitions(replay.memory_of(config, state.info), state.memory, items)
  return state._replace(memory=memory)
