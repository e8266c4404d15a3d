"""Q-learning on discrete actions: DQN's model functions (Mnih et al. 2015, with Double DQN,
dueling heads and n-step returns), which DQN (``batchrl.agents.dqn``) makes its ``Model`` of
and DQFD (``batchrl.agents.dqfd``) builds on.

Shapes: ``B`` envs, ``K`` batch size, ``n`` = ``config.n_step``. Top to bottom:

  act     Q(obs) -> greedy action among the allowed ones -> epsilon-greedy (unless
          deterministic): with probability epsilon(step) a uniform allowed action
  store   write the ``[B]`` transition (obs, action index, reward, terminated, truncated,
          next_obs) as one memory row; count steps
  update  (every ``update_frequency`` stores; learning only from ``first_update`` steps on,
          gated by a ``lax.cond`` over the parameters and optimizer state only)
          ``repeat_update`` times: sample K items (prioritized: with importance weights) ->
          targets r + gamma Q_target(s', argmax) over n-step windows -> weighted Huber or
          squared TD loss -> Adam -> new priorities |TD error|;
          then every ``target_update_frequency`` steps target <- tau online + (1-tau) target

Exploration lives in ``act`` (not in ``batchrl.Agent``'s interface exploration) so that every
driver explores the same way: the fused loop and ``batchrl train`` call the model only.
Its schedule runs on the steps stored (``num_steps``), which the checkpoint keeps.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import optax

from batchrl.agents import spaces
from batchrl.agents.core import Transition
from batchrl.agents.replay import losses
from batchrl.agents.replay.q_config import DQNConfig
from batchrl.agents.replay.q_networks import (
  QNetworks,
  action_indices,
  check_discrete,
  env_actions,
  make_networks,
  zero_indices,
)
from batchrl.agents.replay.updates import (
  Static,
  config_of,
  finish_update,
  gated_steps,
  memory_of,
  memory_row,
  memory_transitions,
  optimizer,
  update_ready,
)
from batchrl.agents.spaces import SpaceInfo, space_info
from batchrl.memories import (
  Memory,
  MemoryState,
  TransitionItem,
  import_transitions,
  transition_window_mask,
)
from batchrl.specs import EnvSpec


class DQNState(NamedTuple):
  """Everything DQN learns and remembers; a pytree (checkpointable, vmappable)."""

  params: Any
  target_params: Any
  opt_state: Any
  memory: MemoryState
  key: jax.Array
  num_steps: jax.Array  # [] int32 environment steps stored (summed over envs)
  pending: jax.Array  # [] int32 stores since the last update
  num_updates: jax.Array  # [] int32 updates that learned
  last_sync: jax.Array  # [] int32 num_steps // target_update_frequency at the last sync
  info: SpaceInfo
  static: Static = Static(None)


# ------------------------------------------------------------------------------ pieces


def layout(config: DQNConfig, spec: EnvSpec) -> str:
  """The MLP on a Box observation with one Discrete action, else networks from a spec.

  Without a spec, spaces the MLP cannot take (Dict states with action masks, int states,
  several actions) get the 'auto' network, so ``batchrl train`` works on such envs too.
  """
  if config.network is not None:
    return "tree"
  flat = (isinstance(spec.observation_space, gym.spaces.Box)
          and isinstance(spec.action_space, gym.spaces.Discrete))
  return "flat" if flat else "tree"


@functools.lru_cache(maxsize=64)
def networks(config: DQNConfig, info: SpaceInfo) -> QNetworks:
  if info.layout == "tree" and config.network is None:
    config = dataclasses.replace(config, network='"auto"')
  return make_networks(config, info)


def item_template(info: SpaceInfo, nets: QNetworks) -> TransitionItem:
  """One stored transition (no batch axes), as zeros."""
  obs = spaces.zero_obs(info, ())
  return TransitionItem(obs, zero_indices(nets.components, ()), jnp.float32(0),
                        jnp.bool_(False), jnp.bool_(False), obs)


def init(config: DQNConfig, key: jax.Array, spec: EnvSpec) -> DQNState:
  """Fresh online and target parameters (equal), optimizer and an empty memory."""
  check_discrete(spec.action_space)
  info = space_info(spec, layout(config, spec))
  nets = networks(config, info)
  memory = memory_of(config, info)
  if memory.num_items < config.batch_size:
    raise ValueError(f"dqn.memory_capacity holds {memory.num_items} transitions (whole rows of "
                     f"{info.num_envs} envs), fewer than batch_size ({config.batch_size}).")
  params_key, state_key = jax.random.split(key)
  params = nets.init(params_key)
  zero = jnp.int32(0)
  return DQNState(params, params, optimizer(config).init(params),
                  memory.init(item_template(info, nets)), state_key, zero, zero, zero, zero,
                  info, Static(config))


# ------------------------------------------------------------------------------- act


def epsilon(exploration, num_steps) -> jax.Array:
  return jnp.float32(0.0) if exploration is None else exploration.value(num_steps)


def act(config: DQNConfig, exploration, state: DQNState, obs, key: jax.Array,
        deterministic: bool = False):
  """``obs[B, ...] -> (action[B, ...], {})``: greedy among allowed actions, epsilon-greedy
  unless ``deterministic``."""
  info = state.info
  nets = networks(config, info)
  flat = spaces.float_obs(info, obs)
  q, masks = nets.q_values(state.params, flat), nets.masks(flat)
  indices = {c.name: losses.greedy(q[c.name], masks[c.name]) for c in nets.components}
  if not deterministic and exploration is not None:
    keys = jax.random.split(key, len(nets.components))
    for k, c in zip(keys, nets.components):
      _, indices[c.name] = exploration.apply((), k, indices[c.name], state.num_steps,
                                             kind="int", low=0, num_values=c.num_values,
                                             mask=masks[c.name])
  return env_actions(info, nets.components, indices), {}


# ----------------------------------------------------------------------------- store


def store(config: DQNConfig, state: DQNState, transition: Transition) -> DQNState:
  """Writes the ``[B]`` transition as one memory row."""
  info = state.info
  nets = networks(config, info)
  row = memory_row(info, action_indices(info, nets.components, transition.action), transition)
  memory = memory_of(config, info).add(state.memory, row)
  return state._replace(memory=memory, num_steps=state.num_steps + info.num_envs,
                        pending=state.pending + 1)


# ---------------------------------------------------------------------------- update


def targets(config: DQNConfig, nets: QNetworks, memory: Memory, state: DQNState, params,
            sample) -> dict:
  """TD targets ``{name: [K, *S]}`` of a sample (n-step windows when ``n_step > 1``)."""
  items = sample.items
  if config.n_step > 1:
    window, mask = memory.windows(state.memory, sample.index, config.n_step)
    alive = transition_window_mask(window, mask)
    returns, last, bootstrap = losses.nstep_returns(window.reward, window.terminated, alive,
                                                    config.discount)
    rows = jnp.arange(last.shape[0])
    next_obs = jax.tree.map(lambda x: x[rows, last], window.next_obs)
  else:
    returns = items.reward
    bootstrap = config.discount * (1.0 - items.terminated.astype(jnp.float32))
    next_obs = items.next_obs
  q_next = nets.q_values(state.target_params, next_obs)
  q_online = nets.q_values(params, next_obs) if config.double_dqn else None
  masks = nets.masks(next_obs)
  out = {}
  for c in nets.components:
    value = losses.next_values(q_next[c.name], None if q_online is None else q_online[c.name],
                               masks[c.name])
    out[c.name] = losses.expand(returns, value) + losses.expand(bootstrap, value) * value
  return jax.lax.stop_gradient(out)


def loss_fn(config: DQNConfig, nets: QNetworks, params, sample, target: dict):
  """Importance-weighted mean TD loss; aux: (metrics, per-sample |TD error| [K])."""
  items = sample.items
  q = nets.q_values(params, items.obs)
  per_sample, abs_error, taken = [], [], []
  for c in nets.components:
    q_taken = losses.select(q[c.name], items.action[c.name])
    error = target[c.name] - q_taken
    k = error.shape[0]
    per_sample.append(losses.td_loss(error, config.clip_loss).reshape(k, -1))
    abs_error.append(jnp.abs(error).reshape(k, -1))
    taken.append(q_taken.reshape(k, -1))
  per_sample = jnp.mean(jnp.concatenate(per_sample, axis=1), axis=1)
  abs_error = jnp.mean(jnp.concatenate(abs_error, axis=1), axis=1)
  loss = jnp.mean(sample.weight * per_sample)
  target_mean = jnp.mean(jnp.concatenate(
      [t.reshape(t.shape[0], -1) for t in target.values()], axis=1))
  metrics = {"loss": loss, "td_error": jnp.mean(abs_error),
             "q_mean": jnp.mean(jnp.concatenate(taken, axis=1)), "target_mean": target_mean,
             "importance_weight": jnp.mean(sample.weight)}
  return loss, (metrics, abs_error)


def gradient_step(config: DQNConfig, state: DQNState, key, params, opt_state):
  """One Adam step on a fresh batch: ``(params, opt_state, index[K], |TD|[K], metrics)``."""
  nets = networks(config, state.info)
  memory = memory_of(config, state.info)
  sample = memory.sample(state.memory, key, config.batch_size, state.num_steps)
  target = targets(config, nets, memory, state, params, sample)
  grad_fn = jax.value_and_grad(functools.partial(loss_fn, config, nets), has_aux=True)
  (_, (metrics, errors)), grads = grad_fn(params, sample, target)
  updates, opt_state = optimizer(config).update(grads, opt_state, params)
  params = optax.apply_updates(params, updates)
  metrics["grad_norm"] = optax.tree.norm(grads)
  return params, opt_state, sample.index, errors, metrics


def update(config: DQNConfig, exploration, state: DQNState) -> tuple[DQNState, dict]:
  """``repeat_update`` gradient steps (once ``first_update`` steps and a batch are stored),
  priorities from their TD errors, then the target update when it is due."""
  memory = memory_of(config, state.info)
  ready = update_ready(config, memory.size(state.memory), state.num_steps)
  key, params, opt_state, mstate, metrics = gated_steps(
      config, memory, state, ready, functools.partial(gradient_step, config))
  state, sync = finish_update(config, state, ready, params, opt_state, mstate, key)
  metrics.update(epsilon=epsilon(exploration, state.num_steps),
                 memory_size=memory.size(mstate).astype(jnp.float32),
                 learning=ready.astype(jnp.float32), target_synced=sync.astype(jnp.float32))
  metrics.update(_priority_metrics(memory, mstate, state.num_steps))
  return state, metrics


def _priority_metrics(memory: Memory, mstate: MemoryState, num_steps) -> dict:
  if not memory.prioritized:
    return {}
  stored = memory.priorities_of(mstate)
  size = jnp.maximum(memory.size(mstate), 1).astype(jnp.float32)
  return {"beta": memory.beta(num_steps), "priority_mean": jnp.sum(stored) / size,
          "priority_max": jnp.max(stored)}


def summarize(config: DQNConfig, exploration, state: DQNState) -> dict:
  """TensorBoard material: epsilon, memory fill, priorities (prioritized memories)."""
  memory = memory_of(config, state.info)
  scalars = {"epsilon": epsilon(exploration, state.num_steps),
             "memory/size": memory.size(state.memory).astype(jnp.float32),
             "updates": state.num_updates.astype(jnp.float32)}
  histograms = {}
  if memory.prioritized:
    for name, value in _priority_metrics(memory, state.memory, state.num_steps).items():
      scalars[f"memory/{name}"] = value
    histograms["memory/priorities"] = memory.priorities_of(state.memory)
  return {"scalars": scalars, "histograms": histograms}


# ------------------------------------------------------------------------- importing


def encoder(config: DQNConfig, info: SpaceInfo):
  """``actions [M, ...] -> {name: index [M, ...]}``, as ``store`` writes them."""
  return functools.partial(action_indices, info, networks(config, info).components)


def import_observations(state: DQNState, observations) -> DQNState:
  """Fills the replay memory from TensorForce observations (TensorForce's
  ``import_observations``); see ``memory_transitions`` for the forms and checks.

  Consecutive entries are consecutive steps of one stream; the count must be a multiple of
  the memory's width (``num_envs``), each of ``width`` consecutive chunks filling one
  column. Imported steps count neither towards ``first_update`` nor the exploration
  schedule; more than the capacity overwrites the oldest. Host-side, not jitted.
  """
  config = config_of(state, "dqn")
  items = memory_transitions(state.info, encoder(config, state.info), observations)
  memory = import_transitions(memory_of(config, state.info), state.memory, items)
  return state._replace(memory=memory)
