"""DQFD, deep Q-learning from demonstrations (Hester et al. 2018), as a ``Model``.

DQN (``batchrl.agents.replay.q_learning``: its networks, act, store and targets) plus a second
memory that holds demonstrations and is never overwritten by online experience. Shapes:
``K`` = ``batch_size``, ``K_d`` = ``round(demo_sampling_ratio * K)`` demonstration samples.

  act       DQN's: greedy among allowed actions, epsilon-greedy unless deterministic
  store     DQN's: the ``[B]`` transition into the online memory
  update    (every ``update_frequency`` stores, from ``first_update`` on) ``repeat_update``
            times: ``K - K_d`` online samples + ``K_d`` demonstration samples (left out
            while no demonstrations are stored) -> loss -> Adam -> each memory's
            priorities from its samples' |TD errors|; then DQN's target update
  pretrain  (``pretrain(state, steps)``) ``steps`` gradient steps on ``K`` demonstration
            samples only, the target updated every ``pretrain_target_update_frequency``

The loss of a batch (per sample, then averaged with importance weights over the samples that
are there)::

    TD(1-step, double Q) + nstep_weight * TD(n-step)            (n-step when n_step > 1)
      + supervised_weight * [max_a (Q(s, a) + margin (a != a_E)) - Q(s, a_E)]   (demos only)
    + l2_regularization * sum of squared weights

Demonstrations (host side, not jitted; converted as DQN's ``memory_transitions`` does):
``import_demonstrations(state, observations)`` adds TensorForce observation dicts
(``state``, ``action``, ``reward``, ``terminal``, ``internal``) or a dict of arrays;
``set_demonstrations(state, arrays)`` replaces what is stored; ``import_observations``
fills the online memory instead, as DQN's. All check states and actions against the
spaces first (errors name the field and the index). ``DQFDConfig.demonstrations`` imports
a file or built-in source at ``init`` and ``pretrain_steps`` pretrains there, so ``batchrl
train`` runs DQFD end to end.

The state keeps its config as static pytree metadata, so these functions take the state
alone (what ``batchrl.Agent``'s methods hand them).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from batchrl.agents.core import Model, Transition
from batchrl.agents.dqfd import losses as dqfd_losses
from batchrl.agents.dqfd.config import DQFDConfig, demo_batch_size
from batchrl.agents.dqfd.demonstrations import load_demonstrations
from batchrl.agents.replay import losses
from batchrl.agents.replay import q_learning as dqn
from batchrl.agents.replay import updates as replay
from batchrl.agents.replay.q_config import parse_exploration
from batchrl.agents.replay.q_learning import DQNState
from batchrl.agents.replay.updates import Static
from batchrl.errors import UserInputError
from batchrl.exploration import exploration_of
from batchrl.memories import Memory, MemoryState, TransitionItem, import_transitions, make_memory
from batchrl.ops.targets import soft_update
from batchrl.specs import EnvSpec


class NoDemonstrationsError(UserInputError):
  """``pretrain`` was called before any demonstrations were stored."""


class DQFDState(NamedTuple):
  """DQN's state plus the demonstration memory; a pytree (checkpointable, vmappable)."""

  dqn: DQNState
  demo: MemoryState  # width 1, demo_memory_capacity items
  pretrain_steps: jax.Array  # [] int32 pretraining gradient steps made
  static: Static


def make_dqfd(config: DQFDConfig | None = None, name: str = "dqfd") -> Model:
  """DQFD as a ``Model``; ``period = update_frequency``."""
  config = DQFDConfig() if config is None else config
  if not isinstance(config, DQFDConfig):
    raise TypeError(f"make_dqfd takes a DQFDConfig, got {type(config).__name__}.")
  exploration = exploration_of(parse_exploration(config.exploration))
  return replay.replay_model(
      config, name,
      init=lambda key, spec: init(config, key, spec),
      act=lambda state, obs, key, deterministic=False: dqn.act(
          config, exploration, state.dqn, obs, key, deterministic),
      store=lambda state, transition: store(config, state, transition),
      update=lambda state: update(config, exploration, state),
      summarize=lambda state: summarize(config, exploration, state),
      counters=lambda state: state.dqn,
      # the online memory only: the demonstrations are bounded (demo_memory_capacity), may
      # come from import_demonstrations rather than the config, and their priorities are
      # learned, so every checkpoint keeps them
      memory=("dqn.memory",))


# ------------------------------------------------------------------------------ pieces


def demo_memory_of(config: DQFDConfig) -> Memory:
  """The demonstration memory: one column (a stream in time order), its own capacity, the
  online memory's type and prioritization."""
  return make_memory(config.memory, capacity=config.demo_memory_capacity, width=1,
                     prioritization_weight=config.prioritization_weight,
                     prioritization_constant=config.prioritization_constant,
                     beta_initial=config.beta_initial, beta_steps=config.beta_steps)


def init(config: DQFDConfig, key: jax.Array, spec: EnvSpec) -> DQFDState:
  """DQN's state, an empty demonstration memory; then the configured demonstrations and
  ``pretrain_steps`` of pretraining, if any."""
  base = dqn.init(config, key, spec)
  nets = dqn.networks(config, base.info)
  demo = demo_memory_of(config).init(dqn.item_template(base.info, nets))
  state = DQFDState(base, demo, jnp.int32(0), Static(config))
  if config.demonstrations is not None:
    observations = load_demonstrations(config.demonstrations, config.demo_memory_capacity)
    state = import_demonstrations(state, observations)
  if config.pretrain_steps:
    state, _ = pretrain_fn(config, state, config.pretrain_steps)
  return state


def store(config: DQFDConfig, state: DQFDState, transition: Transition) -> DQFDState:
  return state._replace(dqn=dqn.store(config, state.dqn, transition))


# ---------------------------------------------------------------------------- the loss


class Part(NamedTuple):
  """Samples of one memory in a batch: the memory, its state, the sample, whether they are
  demonstrations (static) and whether they count (``valid``, a traced bool)."""

  memory: Memory
  state: MemoryState
  sample: Any
  demo: bool
  valid: jax.Array


def _targets(config: DQFDConfig, nets, base: DQNState, params, part: Part):
  """``(1-step targets, n-step targets or None)`` of one part (windows from its memory)."""
  state = base._replace(memory=part.state)
  one = dqn.targets(_one_step(config), nets, part.memory, state, params, part.sample)
  many = (dqn.targets(config, nets, part.memory, state, params, part.sample)
          if config.n_step > 1 else None)
  return one, many


@functools.lru_cache(maxsize=16)
def _one_step(config: DQFDConfig) -> DQFDConfig:
  return dataclasses.replace(config, n_step=1)


def loss_fn(config: DQFDConfig, nets, params, items, weight, demo, valid, one, many):
  """The DQfD loss of a batch ``[K]``; aux: (metrics, per-sample |1-step TD error| [K]).

  ``demo``/``valid``: ``float32[K]`` 1 for demonstration / counted samples; ``one``, ``many``:
  target dicts ``{name: [K, *S]}`` (``many`` None without n-step)."""
  q = nets.q_values(params, items.obs)
  masks = nets.masks(items.obs)
  k = weight.shape[0]
  td, nstep, margin, abs_error, taken = [], [], [], [], []
  for c in nets.components:
    action = items.action[c.name]
    q_taken = losses.select(q[c.name], action)
    error = one[c.name] - q_taken
    td.append(losses.td_loss(error, config.clip_loss).reshape(k, -1))
    abs_error.append(jnp.abs(error).reshape(k, -1))
    taken.append(q_taken.reshape(k, -1))
    if many is not None:
      nstep.append(losses.td_loss(many[c.name] - q_taken, config.clip_loss).reshape(k, -1))
    margin.append(dqfd_losses.large_margin(q[c.name], action, config.expert_margin,
                                           masks[c.name]).reshape(k, -1))
  mean = lambda parts: jnp.mean(jnp.concatenate(parts, axis=1), axis=1)
  td_loss, margin_loss = mean(td), mean(margin)
  nstep_loss = mean(nstep) if nstep else jnp.zeros_like(td_loss)
  per_sample = (td_loss + config.nstep_weight * nstep_loss
                + config.supervised_weight * demo * margin_loss)
  l2 = dqfd_losses.l2_penalty(params)
  loss = dqfd_losses.masked_mean(weight * per_sample, valid) + config.l2_regularization * l2
  errors = mean(abs_error)
  metrics = {"loss": loss, "td_loss": dqfd_losses.masked_mean(td_loss, valid),
             "nstep_loss": dqfd_losses.masked_mean(nstep_loss, valid),
             "margin_loss": dqfd_losses.masked_mean(margin_loss, valid * demo),
             "l2": l2, "td_error": dqfd_losses.masked_mean(errors, valid),
             "q_mean": dqfd_losses.masked_mean(mean(taken), valid),
             "demo_share": dqfd_losses.masked_mean(demo, valid),
             "importance_weight": dqfd_losses.masked_mean(weight, valid)}
  return loss, (metrics, errors)


def gradient_step(config: DQFDConfig, base: DQNState, parts: tuple[Part, ...], params,
                  opt_state):
  """One Adam step on the concatenated parts: ``(params, opt_state, |TD| [K], metrics)``."""
  nets = dqn.networks(config, base.info)
  pieces = [(p.sample, *_targets(config, nets, base, params, p), p) for p in parts]
  cat = lambda *xs: jnp.concatenate(xs, axis=0)
  items = jax.tree.map(cat, *[s.items for s, _, _, _ in pieces])
  one = jax.tree.map(cat, *[o for _, o, _, _ in pieces])
  many = (jax.tree.map(cat, *[m for _, _, m, _ in pieces]) if config.n_step > 1 else None)
  flags = lambda f: cat(*[jnp.full(s.weight.shape, f(p), jnp.float32)
                          for s, _, _, p in pieces])
  weight = cat(*[s.weight for s, _, _, _ in pieces])
  demo, valid = flags(lambda p: float(p.demo)), flags(lambda p: p.valid)
  grad_fn = jax.value_and_grad(functools.partial(loss_fn, config, nets), has_aux=True)
  (_, (metrics, errors)), grads = grad_fn(params, items, weight, demo, valid, one, many)
  updates, opt_state = replay.optimizer(config).update(grads, opt_state, params)
  metrics["grad_norm"] = optax.tree.norm(grads)
  return optax.apply_updates(params, updates), opt_state, errors, metrics


def _sample_parts(config: DQFDConfig, state: DQFDState, key, online_count: int,
                  demo_count: int) -> tuple[Part, ...]:
  """``online_count`` online and ``demo_count`` demonstration samples (static counts)."""
  online_key, demo_key = jax.random.split(key)
  base, parts = state.dqn, []
  if online_count:
    memory = replay.memory_of(config, base.info)
    sample = memory.sample(base.memory, online_key, online_count, base.num_steps)
    parts.append(Part(memory, base.memory, sample, False, jnp.bool_(True)))
  if demo_count:
    memory = demo_memory_of(config)
    sample = memory.sample(state.demo, demo_key, demo_count, base.num_steps)
    parts.append(Part(memory, state.demo, sample, True, memory.size(state.demo) > 0))
  return tuple(parts)


# ---------------------------------------------------------------------------- update


def update(config: DQFDConfig, exploration, state: DQFDState) -> tuple[DQFDState, dict]:
  """``repeat_update`` gradient steps on mixed batches (once ``first_update`` steps and a
  batch are stored), priorities, then DQN's target update when it is due. Only the
  parameters and optimizer state go through the ``lax.cond`` of the gate."""
  base = state.dqn
  online = replay.memory_of(config, base.info)
  ready = replay.update_ready(config, online.size(base.memory), base.num_steps)
  demo_count = demo_batch_size(config)
  key, step_key = jax.random.split(base.key)

  def one(carry, k):
    params, opt_state, mstate, dstate = carry
    current = state._replace(dqn=base._replace(memory=mstate), demo=dstate)
    parts = _sample_parts(config, current, k, config.batch_size - demo_count, demo_count)
    learn = functools.partial(gradient_step, config, current.dqn, parts)
    shapes = jax.eval_shape(learn, params, opt_state)

    def skip(p, o):
      return (p, o) + tuple(jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes[2:]))

    params, opt_state, errors, metrics = jax.lax.cond(ready, learn, skip, params, opt_state)
    new, offset = {}, 0
    for part in parts:
      count = part.sample.index.shape[0]
      new[part.demo] = part.memory.update_priorities(
          part.state, part.sample.index, errors[offset:offset + count],
          active=ready & part.valid)
      offset += count
    return (params, opt_state, new.get(False, mstate), new.get(True, dstate)), metrics

  keys = jax.random.split(step_key, config.repeat_update)
  (params, opt_state, mstate, dstate), metrics = jax.lax.scan(
      one, (base.params, base.opt_state, base.memory, state.demo), keys)
  metrics = jax.tree.map(jnp.mean, metrics)
  base, sync = replay.finish_update(config, base, ready, params, opt_state, mstate, key)
  metrics.update(epsilon=dqn.epsilon(exploration, base.num_steps),
                 memory_size=online.size(mstate).astype(jnp.float32),
                 demo_memory_size=demo_memory_of(config).size(dstate).astype(jnp.float32),
                 learning=ready.astype(jnp.float32), target_synced=sync.astype(jnp.float32))
  return state._replace(dqn=base, demo=dstate), metrics


def summarize(config: DQFDConfig, exploration, state: DQFDState) -> dict:
  """DQN's TensorBoard material plus the demonstration memory's fill and pretraining steps."""
  out = dqn.summarize(config, exploration, state.dqn)
  scalars = dict(out["scalars"])
  scalars["memory/demo_size"] = demo_memory_of(config).size(state.demo).astype(jnp.float32)
  scalars["pretrain_steps"] = state.pretrain_steps.astype(jnp.float32)
  return {"scalars": scalars, "histograms": out["histograms"]}


# -------------------------------------------------------------------------- pretrain


def pretrain_fn(config: DQFDConfig, state: DQFDState, steps: int) -> tuple[DQFDState, dict]:
  """``steps`` (static) gradient steps on ``batch_size`` demonstration samples each; the
  target network moves by ``update_target_weight`` every
  ``pretrain_target_update_frequency`` steps. Pure and jit-able; metrics averaged over
  the steps. The caller makes sure demonstrations are stored (``pretrain`` checks)."""
  base = state.dqn
  key, scan_key = jax.random.split(base.key)

  def one(carry, k):
    params, target, opt_state, dstate, count = carry
    current = state._replace(dqn=base._replace(target_params=target), demo=dstate)
    parts = _sample_parts(config, current, k, 0, config.batch_size)
    params, opt_state, errors, metrics = gradient_step(config, current.dqn, parts, params,
                                                       opt_state)
    part = parts[0]
    dstate = part.memory.update_priorities(dstate, part.sample.index, errors)
    count = count + 1
    due = count % config.pretrain_target_update_frequency == 0
    synced = soft_update(target, params, config.update_target_weight)
    target = jax.tree.map(lambda new, old: jnp.where(due, new, old), synced, target)
    return (params, target, opt_state, dstate, count), metrics

  carry = (base.params, base.target_params, base.opt_state, state.demo, state.pretrain_steps)
  (params, target, opt_state, dstate, count), metrics = jax.lax.scan(
      one, carry, jax.random.split(scan_key, steps))
  base = base._replace(params=params, target_params=target, opt_state=opt_state, key=key)
  return (state._replace(dqn=base, demo=dstate, pretrain_steps=count),
          jax.tree.map(jnp.mean, metrics))


@functools.lru_cache(maxsize=16)
def _pretrain_jit(config: DQFDConfig, steps: int):
  return jax.jit(lambda state: pretrain_fn(config, state, steps))


def demo_size(state: DQFDState) -> int:
  """Demonstration transitions stored (the smallest over a leading seed axis, if any)."""
  memory = demo_memory_of(state.static.config)
  return int(np.min(np.asarray(state.demo.filled))) * memory.width


def pretrain(state: DQFDState, steps: int) -> tuple[DQFDState, dict]:
  """``steps`` gradient steps on the demonstrations alone (TensorForce's ``pretrain``);
  returns the new state and the metrics averaged over the steps.

  Raises:
    NoDemonstrationsError: no demonstrations are stored yet.
  """
  if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
    raise UserInputError(f"pretrain steps must be a positive int, got {steps!r}.")
  if demo_size(state) == 0:
    raise NoDemonstrationsError(
        "pretrain needs demonstrations, and none are stored: call import_demonstrations("
        "observations) or set_demonstrations(arrays) first (or set dqfd.demonstrations).")
  return _pretrain_jit(state.static.config, int(steps))(state)


# ---------------------------------------------------------------------- demonstrations


def _unchecked(state: DQFDState, observations) -> TransitionItem:
  """Observations -> checked transitions in the memory's form (DQN's conversion)."""
  config, info = state.static.config, state.dqn.info
  return replay.memory_transitions(info, dqn.encoder(config, info), observations)


def _count(items: TransitionItem) -> int:
  return int(np.shape(items.reward)[0])


def _converted(state: DQFDState, observations) -> TransitionItem:
  """``_unchecked``, at most ``demo_memory_capacity`` of them."""
  config = state.static.config
  items = _unchecked(state, observations)
  if _count(items) > config.demo_memory_capacity:
    raise UserInputError(f"{_count(items)} demonstration transitions do not fit the "
                         f"demonstration memory (demo_memory_capacity="
                         f"{config.demo_memory_capacity}); raise demo_memory_capacity or "
                         "give fewer.")
  return items


def _stored(state: DQFDState) -> TransitionItem:
  """The stored demonstrations, oldest first (one column: the memory has width 1)."""
  demo = state.demo
  rows, filled, head = jax.tree.leaves(demo.items)[0].shape[0], int(demo.filled), int(demo.head)
  order = (head + np.arange(filled)) % rows if filled == rows else np.arange(filled)
  return jax.tree.map(lambda x: np.asarray(x)[order, 0], demo.items)


def with_demo_capacity(state: DQFDState, capacity: int) -> DQFDState:
  """``state`` with a demonstration memory of ``capacity`` holding the stored
  demonstrations in their order (their priorities start over), and its config to match.

  A ``Model`` made from the old config must not be given the result: make one from
  ``state.static.config`` (``batchrl.Agent`` rebuilds its own, see ``growing``)."""
  config = dataclasses.replace(state.static.config, demo_memory_capacity=int(capacity))
  memory = demo_memory_of(config)
  empty = memory.init(jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[2:], x.dtype),
                                   state.demo.items))
  stored = _stored(state)
  demo = import_transitions(memory, empty, stored) if _count(stored) else empty
  return state._replace(demo=demo, static=Static(config))


def growing(replace: bool):
  """The object API's ``import_demonstrations`` (``replace``: ``set_demonstrations``) as a
  host method that makes room first: demonstrations beyond ``demo_memory_capacity`` grow
  the memory (to at least twice its size, so a series of imports grows it a few times)
  instead of being refused or overwriting older ones. Returns ``(state, changes)``:
  ``{"demo_memory_capacity": rows}`` when it grew (the agent spec then changes), else
  None."""
  def method(state: DQFDState, observations):
    items = _unchecked(state, observations)
    capacity = state.static.config.demo_memory_capacity
    needed = _count(items) + (0 if replace else demo_size(state))
    changes = None
    if needed > capacity:
      capacity = max(needed, 2 * capacity)
      state = with_demo_capacity(state, capacity)
      changes = {"demo_memory_capacity": capacity}
    memory = demo_memory_of(state.static.config)
    target = memory.init(jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[2:], x.dtype),
                                      state.demo.items)) if replace else state.demo
    return state._replace(demo=import_transitions(memory, target, items)), changes
  return method


def import_observations(state: DQFDState, observations) -> DQFDState:
  """Fills the online replay memory (not the demonstration one), as DQN's
  ``import_observations`` (TensorForce's DQFD agent inherits it from its memory agent)."""
  return state._replace(dqn=dqn.import_observations(state.dqn, observations))


def import_demonstrations(state: DQFDState, observations) -> DQFDState:
  """Adds demonstrations to the demonstration memory (TensorForce's
  ``import_demonstrations``).

  ``observations``: a list of dicts with ``state``, ``action``, ``reward``, ``terminal``
  (False/0, True/1, 2 = truncated) and ``internal`` (empty), consecutive entries being
  consecutive steps; or one dict of arrays (``states``, ``actions``, ``rewards``,
  ``terminals``, optional ``next_states``). States and actions are checked against the
  spaces first; errors name the field and the index. Once the memory is full the oldest
  demonstrations are overwritten. Host-side (not jitted).
  """
  items = _converted(state, observations)
  memory = demo_memory_of(state.static.config)
  return state._replace(demo=import_transitions(memory, state.demo, items))


def set_demonstrations(state: DQFDState, arrays) -> DQFDState:
  """Replaces the stored demonstrations by ``arrays`` (TensorForce's ``set_demonstrations``:
  a dict with ``states``, ``actions``, ``rewards``, ``terminals``, optional ``next_states``;
  a list of observation dicts works too). Checked as ``import_demonstrations``."""
  items = _converted(state, arrays)
  memory = demo_memory_of(state.static.config)
  empty = memory.init(jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[2:], x.dtype),
                                   state.demo.items))
  return state._replace(demo=import_transitions(memory, empty, items))
