"""What the replay agents' models (DQN, NAF, DQFD, DDPG, TD3, SAC) share: the ``Model``
schedule, the config carried in the state, the memory and optimizer of a ``ReplayConfig``,
the memory row of a transition, the gated repeat-update scan, when the targets are due a
sync and the end of a Q-learning update (the Polyak step itself:
``batchrl.ops.targets.polyak_update``), and turning TensorForce observations into stored
transitions."""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import optax

from batchrl.agents import spaces
from batchrl.agents.core import Model, Transition
from batchrl.agents.replay.config import ReplayConfig
from batchrl.agents.spaces import SpaceInfo
from batchrl.errors import UserInputError
from batchrl.memories import (
  Memory,
  TransitionItem,
  check_transitions,
  make_memory,
  transitions_from_observations,
)
from batchrl.ops.targets import polyak_update


@dataclasses.dataclass(frozen=True)
class Static:
  """An agent's config, carried in its state as static pytree metadata (no leaves), so the
  host-side functions (``import_observations``, DQFD's ``pretrain``) take the state alone."""

  config: Any


jax.tree_util.register_static(Static)


def memory_of(config: ReplayConfig, info: SpaceInfo) -> Memory:
  """The replay memory: ``width`` = the envs stored together (every replay agent)."""
  return make_memory(config.memory, capacity=config.memory_capacity, width=info.num_envs,
                     prioritization_weight=config.prioritization_weight,
                     prioritization_constant=config.prioritization_constant,
                     beta_initial=config.beta_initial, beta_steps=config.beta_steps)


def optimizer(config: ReplayConfig) -> optax.GradientTransformation:
  """Adam, optionally after global-norm clipping (DQN, NAF and DQFD)."""
  clip = ([optax.clip_by_global_norm(config.max_grad_norm)]
          if config.max_grad_norm is not None else [])
  return optax.chain(*clip, optax.adam(config.learning_rate, eps=config.adam_epsilon))


def replay_model(config: ReplayConfig, name: str, *, init, act, store, update, summarize,
                 counters=lambda state: state, memory=("memory",)) -> Model:
  """A replay agent's ``Model``: its own functions plus the schedule every replay agent
  shares: an update every ``update_frequency`` stores (the period), off-policy, and
  ``agent.updates`` counting the updates that learned. ``counters(state)`` holds ``pending``
  and ``num_updates`` (DQFD keeps them in its DQN part); ``memory`` names the state's
  replay memory (``Model.memory``: kept by the newest run checkpoint only)."""
  return Model(init=init, act=act, store=store, update=update,
               ready=lambda state: counters(state).pending >= config.update_frequency,
               period=config.update_frequency, on_policy=False,
               learned_updates=lambda state: counters(state).num_updates, name=name,
               summarize=summarize, memory=memory)


def memory_row(info: SpaceInfo, action, transition: Transition) -> TransitionItem:
  """The ``[B]`` transition as one memory row: observations as the networks read them and
  ``action`` in the agent's stored form (DQN: indices, NAF and actor-critic: normalized)."""
  return TransitionItem(spaces.float_obs(info, transition.obs), action,
                        jnp.asarray(transition.reward, jnp.float32),
                        jnp.asarray(transition.terminated, jnp.bool_),
                        jnp.asarray(transition.truncated, jnp.bool_),
                        spaces.float_obs(info, transition.next_obs))


def carried_noise(exploration, noise, transition: Transition):
  """The Ornstein-Uhlenbeck state after a store: the act's (``extras["noise"]``), zero
  where the episode ended, so the next one starts fresh; ``noise`` itself without OU."""
  if exploration is None or not exploration.is_ou:
    return noise
  return exploration.reset(jnp.asarray(transition.extras["noise"], jnp.float32),
                           transition.done)


def update_ready(config, stored, num_steps) -> jax.Array:
  """Whether updates run: ``first_update`` steps seen and a whole batch stored."""
  return (num_steps >= config.first_update) & (stored >= config.batch_size)


def gated_steps(config, memory: Memory, state, ready, step):
  """``repeat_update`` calls of ``step(state, key, params, opt_state) -> (params, opt_state,
  index, |TD|, metrics)`` under the ``ready`` gate, each updating the priorities it drew.

  Shared by DQN, NAF, DDPG, TD3 and SAC, each ``step`` its own. The gate is a ``lax.cond``
  over params and optimizer state only (a cond over the memory would copy it on every call
  on CPU). Returns the next state key, params, optimizer state, memory state and the
  metrics averaged over the steps that computed them.
  """
  key, step_key = jax.random.split(state.key)

  def one(carry, k):
    params, opt_state, mstate = carry
    learn = functools.partial(step, state._replace(memory=mstate), k)
    shapes = jax.eval_shape(learn, params, opt_state)
    skip = lambda p, o: (p, o) + tuple(jax.tree.map(
        lambda s: jnp.zeros(s.shape, s.dtype), shapes[2:]))
    params, opt_state, index, errors, metrics = jax.lax.cond(ready, learn, skip, params,
                                                             opt_state)
    mstate = memory.update_priorities(mstate, index, errors, active=ready)
    return (params, opt_state, mstate), metrics

  keys = jax.random.split(step_key, config.repeat_update)
  (params, opt_state, mstate), metrics = jax.lax.scan(
      one, (state.params, state.opt_state, state.memory), keys)
  return key, params, opt_state, mstate, jax.tree.map(_mean_of_computed, metrics)


def _mean_of_computed(values: jax.Array) -> jax.Array:
  """The mean over the steps of those that computed the metric (a step that did not, such
  as a held actor step, reports NaN: ``actor_critic.learning.not_computed``); NaN if none
  did. Integer metrics are plain means."""
  if not jnp.issubdtype(values.dtype, jnp.floating):
    return jnp.mean(values)
  return jnp.nanmean(values)


def target_sync_due(config, state, ready) -> tuple[jax.Array, jax.Array]:
  """``(sync, period)``: whether this update moves the targets (it learns and a
  ``target_update_frequency`` boundary of ``num_steps`` passed since ``state.last_sync``),
  and the boundary count to record as the new ``last_sync`` when it does."""
  period = state.num_steps // config.target_update_frequency
  return ready & (period > state.last_sync), period


def finish_update(config, state, ready, params, opt_state, mstate, key):
  """The end of an update, shared by DQN, NAF and DQFD: the new parameters, the target
  moved by ``update_target_weight`` when a ``target_update_frequency`` boundary passed since
  the last sync, and the counters. Returns ``(state, synced)``."""
  sync, period = target_sync_due(config, state, ready)
  target = polyak_update(state.target_params, params, config.update_target_weight, sync)
  state = state._replace(
      params=params, target_params=target, opt_state=opt_state, memory=mstate, key=key,
      pending=jnp.int32(0), num_updates=state.num_updates + ready.astype(jnp.int32),
      last_sync=jnp.where(sync, period, state.last_sync))
  return state, sync


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
    as_jax = lambda tree: jax.tree.map(jnp.asarray, tree)
    return TransitionItem(spaces.float_obs(info, as_jax(items.obs)),
                          encode_action(as_jax(items.action)), items.reward,
                          items.terminated, items.truncated,
                          spaces.float_obs(info, as_jax(items.next_obs)))


def config_of(state, agent: str):
  """The config a state carries (``Static``); an error for states built without one."""
  config = state.static.config
  if config is None:
    raise UserInputError(f"this {agent} state carries no config (it was not built by "
                         f"make_{agent}(config).init); cannot import into its memory.")
  return config
