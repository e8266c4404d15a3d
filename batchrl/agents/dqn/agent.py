"""DQN (Mnih et al. 2015) with Double DQN, dueling heads and n-step returns, as a ``Model``.

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
from batchrl.agents.core import Model, Transition
from batchrl.agents.dqn import losses
from batchrl.agents.dqn.config import DQNConfig, parse_exploration
from batchrl.agents.dqn.networks import (QNetworks, action_indices, check_discrete, env_actions,
                                         make_networks, zero_indices)
from batchrl.agents.spaces import SpaceInfo, space_info
from batchrl.errors import UserInputError
from batchrl.memories import (Memory, MemoryState, TransitionItem, check_transitions,
                              import_transitions, make_memory, transition_window_mask,
                              transitions_from_observations)
from batchrl.specs import EnvSpec


@dataclasses.dataclass(frozen=True)
class Static:
  """An agent's config, carried in its state as static pytree metadata (no leaves), so the
  host-side functions (``import_observations``, DQFD's ``pretrain``) take the state alone."""

  config: Any


jax.tree_util.register_static(Static)


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


def make_dqn(config: DQNConfig | None = None, name: str = "dqn") -> Model:
  """DQN as a ``Model``; ``period = update_frequency``."""
  config = DQNConfig() if config is None else config
  if not isinstance(config, DQNConfig):
    raise TypeError(f"make_dqn takes a DQNConfig, got {type(config).__name__}.")
  exploration = parse_exploration(config.exploration)
  return Model(
      init=lambda key, spec: init(config, key, spec),
      act=lambda state, obs, key, deterministic=False: act(config, exploration, state, obs,
                                                           key, deterministic),
      store=lambda state, transition: store(config, state, transition),
      update=lambda state: update(config, exploration, state),
      ready=lambda state: state.pending >= config.update_frequency,
      period=config.update_frequency,
      on_policy=False,
      learned_updates=lambda state: state.num_updates,
      name=name,
      summarize=lambda state: summarize(config, exploration, state))


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


def memory_of(config: DQNConfig, info: SpaceInfo) -> Memory:
  """The replay memory: ``width`` = the envs stored together (NAF and DQFD configs have
  the same memory fields and use this too)."""
  return make_memory(config.memory, capacity=config.memory_capacity, width=info.num_envs,
                     prioritization_weight=config.prioritization_weight,
                     prioritization_constant=config.prioritization_constant,
                     beta_initial=config.beta_initial, beta_steps=config.beta_steps)


def optimizer(config: DQNConfig) -> optax.GradientTransformation:
  """Adam, optionally after global-norm clipping (DQN, NAF and DQFD)."""
  clip = ([optax.clip_by_global_norm(config.max_grad_norm)]
          if config.max_grad_norm is not None else [])
  return optax.chain(*clip, optax.adam(config.learning_rate, eps=config.adam_epsilon))


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
  row = TransitionItem(spaces.float_obs(info, transition.obs),
                       action_indices(info, nets.components, transition.action),
                       jnp.asarray(transition.reward, jnp.float32),
                       jnp.asarray(transition.terminated, jnp.bool_),
                       jnp.asarray(transition.truncated, jnp.bool_),
                       spaces.float_obs(info, transition.next_obs))
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


def update_ready(config, stored, num_steps) -> jax.Array:
  """Whether updates run: ``first_update`` steps seen and a whole batch stored."""
  return (num_steps >= config.first_update) & (stored >= config.batch_size)


def gated_steps(config, memory: Memory, state, ready, step):
  """``repeat_update`` calls of ``step(state, key, params, opt_state) -> (params, opt_state,
  index, |TD|, metrics)`` under the ``ready`` gate, each updating the priorities it drew.

  Shared by DQN and NAF. The gate is a ``lax.cond`` over params and optimizer state only
  (a cond over the memory would copy it on every call on CPU). Returns the next state key,
  params, optimizer state, memory state and the metrics averaged over the steps.
  """
  key, step_key = jax.random.split(state.key)

  def one(carry, k):
    params, opt_state, mstate = carry
    learn = functools.partial(step, state._replace(memory=mstate), k)
    shapes = jax.eval_shape(learn, params, opt_state)
    skip = lambda p, o: (p, o) + tuple(jax.tree.map(  # noqa: E731
        lambda s: jnp.zeros(s.shape, s.dtype), shapes[2:]))
    params, opt_state, index, errors, metrics = jax.lax.cond(ready, learn, skip, params,
                                                             opt_state)
    mstate = memory.update_priorities(mstate, index, errors, active=ready)
    return (params, opt_state, mstate), metrics

  keys = jax.random.split(step_key, config.repeat_update)
  (params, opt_state, mstate), metrics = jax.lax.scan(
      one, (state.params, state.opt_state, state.memory), keys)
  return key, params, opt_state, mstate, jax.tree.map(jnp.mean, metrics)


def finish_update(config, state, ready, params, opt_state, mstate, key):
  """The end of an update, shared by DQN, NAF and DQFD: the new parameters, the target
  moved by ``update_target_weight`` when a ``target_update_frequency`` boundary passed since
  the last sync, and the counters. Returns ``(state, synced)``."""
  period = state.num_steps // config.target_update_frequency
  sync = ready & (period > state.last_sync)
  synced = losses.soft_update(state.target_params, params, config.update_target_weight)
  target = jax.tree.map(lambda new, old: jnp.where(sync, new, old), synced,
                        state.target_params)
  state = state._replace(
      params=params, target_params=target, opt_state=opt_state, memory=mstate, key=key,
      pending=jnp.int32(0), num_updates=state.num_updates + ready.astype(jnp.int32),
      last_sync=jnp.where(sync, period, state.last_sync))
  return state, sync


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


def memory_transitions(info: SpaceInfo, encode_action, observations) -> TransitionItem:
  """TensorForce observations -> checked transitions in a replay memory's stored form.

  Shared by every replay agent: DQN's and NAF's ``import_observations``, DQFD's
  ``import_demonstrations`` / ``set_demonstrations``. ``observations`` is a list of dicts
  (``state``, ``action``, ``reward``, ``terminal``, ``internal``) or a dict of arrays (see
  ``batchrl.memories.transitions_from_observations``). States and actions are checked
  against the spaces first (errors name the field and the index; absent action masks allow
  everything); then states become the float observations the networks read and actions
  ``encode_action(actions [M, ...]) -> stored actions [M, ...]`` (DQN: indices, NAF:
  normalized floats). Host-side; concrete arrays even while ``init`` is being traced.
  """
  with jax.ensure_compile_time_eval():
    items = transitions_from_observations(observations)
    items = check_transitions(items, info.observation_space, info.action_space,
                              tuple(info.mask_names))
    as_jax = lambda tree: jax.tree.map(jnp.asarray, tree)  # noqa: E731
    return TransitionItem(spaces.float_obs(info, as_jax(items.obs)),
                          encode_action(as_jax(items.action)), items.reward,
                          items.terminated, items.truncated,
                          spaces.float_obs(info, as_jax(items.next_obs)))


def encoder(config: DQNConfig, info: SpaceInfo):
  """``actions [M, ...] -> {name: index [M, ...]}``, as ``store`` writes them."""
  return functools.partial(action_indices, info, networks(config, info).components)


def config_of(state, agent: str):
  """The config a state carries (``Static``); an error for states built without one."""
  config = state.static.config
  if config is None:
    raise UserInputError(f"this {agent} state carries no config (it was not built by "
                         f"make_{agent}(config).init); cannot import into its memory.")
  return config


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
