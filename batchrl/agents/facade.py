"""What ``batchrl.Agent`` is built from: its spec turned into spaces, preprocessing stacks,
explorations, a model and the compiled calls of ``batchrl.agents.interaction``.

``Runtime`` holds no mutable state: ``Agent`` passes the ``AgentState`` in and out. Compiled
calls are cached by what changes their shapes (streams per call, commit mode, ...), so a
steady loop reuses one compiled function and never retraces.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Literal

from batchrl.agent import STAGE_DEPTH, AgentUsageError, _all_finite
from batchrl.agents import interaction, registry, spaces
from batchrl.agents.interaction import AgentState, Parts
from batchrl.configclass import ConfigError
from batchrl.exploration import build_explorations
from batchrl.ops.running_stats import RunningStats
from batchrl.preprocessing import build_preprocessing, build_stack
from batchrl.specs import EnvSpec, to_space


class StateError(AgentUsageError):
  """A state that does not match its spec (shape, dtype, names, values)."""


def _usage_error(message: str) -> Exception:
  return AgentUsageError(message)


# ---------------------------------------------------------------- spaces and stacks


def _kind(space: gym.Space) -> str:
  if isinstance(space, gym.spaces.MultiBinary):
    return "bool"
  if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
    return "int"
  if isinstance(space, gym.spaces.Box):
    return "float" if np.issubdtype(space.dtype, np.floating) else "int"
  raise ConfigError(f"states and actions must be bool, int or float specs (or a dict of "
                    f"named ones), got {space}.")


def _named(space: gym.Space) -> dict[str, gym.Space] | None:
  return dict(space.spaces) if isinstance(space, gym.spaces.Dict) else None


def _processed_space(space: gym.Space, stack) -> gym.Space:
  """The space a state has after its preprocessing stack."""
  if not stack.preprocessors:
    return space
  if stack.processed_dtype() == "float":
    return gym.spaces.Box(-np.inf, np.inf, stack.processed_shape(), np.float32)
  return space


def _build_stacks(spec: dict, raw: gym.Space, masks: dict):
  named = _named(raw)
  if named is None:
    return build_preprocessing(spec.get("preprocessing"), tuple(raw.shape), _kind(raw))
  kept = {k: v for k, v in named.items() if k not in masks}
  return build_preprocessing(spec.get("preprocessing"), {k: tuple(v.shape) for k, v in
                                                          kept.items()},
                             {k: _kind(v) for k, v in kept.items()})


def _action_leaves(space: gym.Space) -> dict[str | None, gym.Space]:
  named = _named(space)
  return {None: space} if named is None else named


# --------------------------------------------------------------------------- runtime


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity: a compile-cache key
class Runtime:
  spec: dict
  raw_space: gym.Space
  processed_space: gym.Space
  action_space: gym.Space
  masks: dict  # mask state name -> action name (None for the single action)
  stacks: Any  # Stack or {name: Stack}
  reward_stack: Any
  explorations: Any  # Exploration | None or {name: Exploration | None}
  parts: Parts
  independent_calls: list = dataclasses.field(default_factory=lambda: [0])  # key counter

  # ---------------------------------------------------------------- device pieces

  def preprocess(self, pstate, obs, reset, active, update):
    if not isinstance(self.stacks, dict):
      return self.stacks.process(pstate, obs, reset, update=update, active=active)
    new_state, out = {}, {}
    for name, stack in self.stacks.items():
      new_state[name], out[name] = stack.process(pstate[name], obs[name], reset,
                                                 update=update, active=active)
    for name in self.masks:
      out[name] = obs[name]
    return new_state, out

  def preprocess_init(self, n: int):
    if not isinstance(self.stacks, dict):
      return self.stacks.init(n)
    return {name: stack.init(n) for name, stack in self.stacks.items()}

  def reward_preprocess(self, rstate, reward, active):
    return self.reward_stack.process(rstate, reward, None, update=True, active=active)

  def explore(self, xstate, key, action, extras, obs, timestep, active, reset):
    if self.explorations is None or all(x is None for x in _as_dict(self.explorations)
                                        .values()):
      return xstate, action, extras
    explored = dict(_as_dict(action))
    new_state = dict(xstate)
    keys = jax.random.split(key, len(explored))
    for key_i, (name, value) in zip(keys, sorted(explored.items(), key=lambda x: str(x[0]))):
      exploration = _as_dict(self.explorations).get(name)
      if exploration is None:
        continue
      space = _action_leaves(self.action_space)[name]
      state_i = exploration.reset(xstate[str(name)], reset)
      mask_name = "action_mask" if name is None else f"{name}_mask"
      new_state[str(name)], explored[name] = exploration.apply(
          state_i, key_i, value, timestep, active=active,
          mask=obs.get(mask_name) if isinstance(obs, dict) else None, **_bounds(space))
    action = explored[None] if None in explored else explored
    if "raw_action" in extras:  # policy-gradient models learn from what was taken
      extras = dict(extras, raw_action=_raw_action(self.action_space, action))
    return new_state, action, extras

  def explore_init(self, n: int):
    state = {}
    for name, exploration in _as_dict(self.explorations).items():
      if exploration is not None:
        space = _action_leaves(self.action_space)[name]
        state[str(name)] = exploration.init(n, tuple(space.shape))
    return state

  # ---------------------------------------------------------------- state

  def init_state(self) -> AgentState:
    return _init_state(self)

  @functools.cached_property
  def recurrent(self) -> bool:
    model = jax.eval_shape(self._init_model)
    return bool(jax.tree.leaves(getattr(model, "carry", ())))

  def _init_model(self):
    key = jax.random.key(int(self.spec["seed"]))
    env_spec = EnvSpec(self.processed_space, self.action_space, self.parts.num_streams)
    return self.parts.model.init(jax.random.fold_in(key, 0), env_spec)

  # ---------------------------------------------------------------- host checks

  def check_states(self, states):
    """User states -> (numpy arrays with a leading batch axis k, whether batched)."""
    if type(states) is np.ndarray and not isinstance(self.raw_kinds, dict):
      return _check_leaf("state", self.raw_space, states, self.raw_kinds)  # the common case
    return check_states(self.raw_space, self.masks, self.action_space, states,
                        self.raw_kinds)

  @functools.cached_property
  def raw_kinds(self):
    """``_kind`` of the state space, or per named state (computed once: it is slow)."""
    named = _named(self.raw_space)
    if named is None:
      return _kind(self.raw_space)
    return {name: _kind(space) for name, space in named.items()}

  def to_user(self, action, batched: bool):
    # np.asarray, not jax.device_get: a few microseconds less per array
    if isinstance(action, dict):
      return {k: _user_value(np.asarray(v), batched) for k, v in action.items()}
    return _user_value(np.asarray(action), batched)

  # ---------------------------------------------------------------- compiled calls

  def act(self, state, obs, idx, reward, terminal, next_held, has_next, reset, *, commit,
          slots, flush, update, deterministic):
    k = len(idx)
    fn = _act_fn(self, k, commit, flush, update, deterministic)
    if slots is None:
      slots = np.zeros(k, np.int32)
    return fn(state, obs, idx, reward, terminal, next_held, has_next, reset, slots)

  def held_next(self, state, stored: dict, idx):
    """``([k] next states given for cut steps, has_next[k])`` for this act's streams."""
    k = len(idx)
    present = [int(i) in stored for i in idx]
    if not any(present):
      return _zeros_next(self, k), np.zeros(k, bool)
    zero = _zeros_next(self, 1)
    rows = [stored[int(i)] if p else zero for i, p in zip(idx, present)]
    return jax.tree.map(lambda *r: jnp.concatenate(r), *rows), np.asarray(present)

  def process_next(self, state, obs, idx):
    return _process_next_fn(self)(state, obs, idx)

  @staticmethod
  def row(rows, j: int):
    return jax.tree.map(lambda x: x[j:j + 1], rows)

  def act_independent(self, state, obs, k: int, deterministic: bool, internals):
    if self.recurrent and internals is None:
      raise _usage_error("This policy is recurrent: independent acting needs internals= "
                         "(start from agent.initial_internals()); it returns (actions, "
                         "internals).")
    fn = _independent_fn(self, k, bool(deterministic), internals is not None)
    self.independent_calls[0] += 1
    key = jax.random.fold_in(jax.random.key(int(self.spec["seed"]) + 1),
                             self.independent_calls[0])
    carry = internals["carry"] if internals is not None else ()
    action, new_carry = fn(state, obs, key, carry)
    return action, ({"carry": new_carry} if internals is not None else None)

  def initial_internals(self):
    if not self.recurrent:
      return {}
    model = jax.eval_shape(self._init_model)
    return {"carry": jax.tree.map(lambda c: np.zeros((1,) + c.shape[1:], c.dtype),
                                  model.carry)}


def _as_dict(value) -> dict:
  return value if isinstance(value, dict) else {None: value}


def _bounds(space: gym.Space) -> dict:
  kind = _kind(space)
  if isinstance(space, gym.spaces.Discrete):
    return dict(kind=kind, low=int(space.start), num_values=int(space.n))
  if isinstance(space, gym.spaces.MultiDiscrete):
    return dict(kind=kind, low=0, num_values=int(np.max(space.nvec)))
  if kind == "float":
    low = None if np.all(np.isneginf(space.low)) else jnp.asarray(space.low)
    high = None if np.all(np.isposinf(space.high)) else jnp.asarray(space.high)
    return dict(kind=kind, low=low, high=high)
  return dict(kind=kind)


def _raw_action(space: gym.Space, action):
  """The env action in the policy's units (int offsets removed)."""
  def raw(s, a):
    if isinstance(s, gym.spaces.Discrete):
      return a - int(s.start)
    if isinstance(s, gym.spaces.MultiDiscrete):
      return a - jnp.asarray(s.start, a.dtype)
    return a
  if isinstance(action, dict):
    return {k: raw(space.spaces[k], v) for k, v in action.items()}
  return raw(space, action)


def _user_value(x: np.ndarray, batched: bool):
  if batched:
    return x
  value = x[0]
  return value.item() if np.ndim(value) == 0 else value


# ---------------------------------------------------------------- building


def build_runtime(spec: dict) -> Runtime:
  """Everything ``Agent`` needs from its spec; bad specs raise before anything is built."""
  n = spec.get("parallel_interactions", 1)
  if isinstance(n, bool) or not isinstance(n, int) or n < 1:
    raise ConfigError(f"parallel_interactions must be a positive int, got {n!r}.")
  raw = to_space(spec["states"])
  action_space = to_space(spec["actions"])
  for space in _action_leaves(action_space).values():
    _kind(space)
  spaces.check_masks(raw, action_space)
  masks = spaces.mask_names(raw, action_space)
  stacks = _build_stacks(spec, raw, masks)
  named = _named(raw)
  if named is None:
    processed = _processed_space(raw, stacks)
  else:
    processed = gym.spaces.Dict({name: (space if name in masks else
                                        _processed_space(space, stacks[name]))
                                 for name, space in named.items()})
  reward_stack = build_stack(spec.get("reward_preprocessing"), (), "float",
                             "reward_preprocessing")
  leaves = _action_leaves(action_space)
  names = None if None in leaves else list(leaves)
  kinds = {str(k): _kind(v) for k, v in leaves.items()} if names else _kind(action_space)
  explorations = build_explorations(spec.get("exploration"), names, kinds)
  agent_type = registry.get(spec["type"])
  context = registry.BuildContext(n, spec.get("network", "auto"), action_space,
                                  spec.get("max_episode_timesteps"))
  model = agent_type.build(dict(spec.get("config") or {}), context)
  runtime = Runtime(spec, raw, processed, action_space, masks, stacks, reward_stack,
                    explorations, None)
  parts = Parts(model, n, STAGE_DEPTH, runtime.preprocess, runtime.reward_preprocess,
                runtime.explore, runtime.explore_init)
  return dataclasses.replace(runtime, parts=parts)


def _init_state(rt: Runtime) -> AgentState:
  try:
    return _init_fn(rt)()
  except (TypeError, ValueError) as e:
    raise ConfigError(f"cannot build agent {rt.spec['type']!r} for these states/actions: "
                      f"{e}") from e


@functools.lru_cache(maxsize=None)
def _init_fn(rt: Runtime):
  """The compiled initial state (cached: agents sharing a runtime compile it once)."""
  parts = rt.parts
  n = parts.num_streams

  def init():
    key = jax.random.key(int(rt.spec["seed"]))
    model = rt._init_model()
    obs = spaces.zeros_like_space(rt.processed_space, (n,))
    obs = _allow_all(rt, obs)
    action, extras = parts.model.act(model, obs, jax.random.fold_in(key, 1), False)
    stage = interaction.empty_stage(parts, obs, action, extras)
    return AgentState(model, rt.preprocess_init(n), rt.reward_stack.init(n),
                      rt.explore_init(n), jax.random.fold_in(key, 2), obs, action, extras,
                      stage, jnp.int32(0))

  return jax.jit(init)


def _allow_all(rt: Runtime, obs):
  if not rt.masks:
    return obs
  return {k: (jnp.ones_like(v) if k in rt.masks else v) for k, v in obs.items()}


# ---------------------------------------------------------------- compiled call caches


@functools.lru_cache(maxsize=None)
def _act_fn(rt: Runtime, k: int, commit: str, flush: int, update: str, deterministic: bool):
  del k  # part of the cache key: each batch size compiles once
  step = functools.partial(interaction.act_step, rt.parts, commit=commit, flush=flush,
                           update=update, deterministic=deterministic)
  return jax.jit(step, donate_argnums=0)


@functools.lru_cache(maxsize=None)
def _process_next_fn(rt: Runtime):
  return jax.jit(functools.partial(interaction.process_next, rt.parts))


@functools.lru_cache(maxsize=None)
def _zeros_next(rt: Runtime, k: int):
  return spaces.zeros_like_space(rt.processed_space, (k,))


@functools.lru_cache(maxsize=None)
def _independent_fn(rt: Runtime, k: int, deterministic: bool, with_carry: bool):
  del k

  def run(state: AgentState, obs, key, carry):
    processed = _independent_preprocess(rt, state.preprocess, obs)
    model = state.model
    if with_carry:
      model = model._replace(carry=carry)
    action, extras = rt.parts.model.act(model, processed, key, deterministic)
    return action, extras.get("carry", ()) if with_carry else ()

  return jax.jit(run)


def _independent_preprocess(rt: Runtime, pstate, obs):
  """Every state as an episode start (fresh sequence stacks), learned statistics kept."""
  def one(stack, state, x):
    k = x.shape[0]
    fresh = stack.init(k)
    state = tuple(t if isinstance(t, RunningStats) else f for t, f in zip(state, fresh))
    return stack.process(state, x, jnp.ones((k,), jnp.bool_), update=False)[1]
  if not isinstance(rt.stacks, dict):
    return one(rt.stacks, pstate, obs)
  out = {name: one(stack, pstate[name], obs[name]) for name, stack in rt.stacks.items()}
  for name in rt.masks:
    out[name] = obs[name]
  return out


# ---------------------------------------------------------------- fast path (deferred commits)
#
# The fused step (``interaction.act_step``) commits the previous transition of each stream
# inside the next act, so every act passes the whole state (~70 arrays for PPO) through
# one compiled call. When every stream acts in each call and the model's ``act`` reads no
# part of its state that ``store`` writes, the act does not need that commit: it can run
# alone on the few arrays it reads (``interaction.act_only``), its outputs wait on the
# host, and ``interaction.commit_rows`` stores many transitions in one call.
# Updates keep running where the fused path runs them (the act after the period's last
# transition is a fused act), and the key stream and timestep are the fused path's, so
# both paths give the same states, actions and updates.


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity: a compile-cache key
class FastPlan:
  """What the fast path of one ``Runtime`` needs to know (``fast_plan``)."""

  layout: interaction.FastLayout
  model_treedef: Any
  model_leaves: tuple  # per leaf of the model state: its index in ``reads`` or a stand-in
  reads: tuple[int, ...]  # the model-state leaves ``act`` reads
  carries: bool  # preprocessing or exploration keep state: act_only passes it in and out
  actions: tuple  # (name | None, first column, last column, shape, dtype) per action


def fast_plan(rt: Runtime, state: AgentState) -> FastPlan | str:
  """The fast path's plan for this agent, or why it cannot take it (a sentence)."""
  model = rt.parts.model
  if model.period is None:
    return ("the model has no fixed update period, so only the model knows when an update "
            "is due")
  try:
    reads = act_reads(model, state.model, state.obs, state.key)
    written = _store_writes(model, state)
  except Exception as e:  # noqa: BLE001  an optimization: any doubt keeps the fused path
    return f"the model's act and store could not be traced to check them ({e!r})"
  clash = [i for i, (r, w) in enumerate(zip(reads, written)) if r and w]
  if clash:
    paths = jax.tree_util.tree_flatten_with_path(state.model)[0]
    return (f"the model's act reads model{jax.tree_util.keystr(paths[clash[0]][0])}, "
            "which store changes (a recurrent carry, normalization statistics, a step "
            "counter), so each act must follow the previous store")
  try:
    layout = _fast_layout(rt, state)
  except (TypeError, ValueError) as e:  # e.g. a key in the extras: nothing to bit-cast
    return f"the act outputs cannot be packed into words: {e}"
  leaves, treedef = jax.tree.flatten(state.model)
  read = tuple(i for i, r in enumerate(reads) if r)
  position = {i: j for j, i in enumerate(read)}
  model_leaves = tuple(position[i] if i in position else _stand_in(leaf)
                       for i, leaf in enumerate(leaves))
  carries = bool(jax.tree.leaves((state.preprocess, state.explore)))
  return FastPlan(layout, treedef, model_leaves, read, carries,
                  _action_columns(rt, state, layout))


def _live_inputs(closed) -> list[bool]:
  """Per input of a traced function: whether any output depends on it (a backward pass
  over the top-level equations; a nested call counts all its inputs, which only errs on
  the side of 'read')."""
  jaxpr = closed.jaxpr
  live = {v for v in jaxpr.outvars if not isinstance(v, Literal)}
  for eqn in reversed(jaxpr.eqns):
    if any(v in live for v in eqn.outvars):
      live.update(v for v in eqn.invars if not isinstance(v, Literal))
  return [v in live for v in jaxpr.invars]


def act_reads(model, model_state, obs, key=None) -> list[bool]:
  """Per leaf of ``model_state``: whether ``model.act`` (either mode) reads it. ``obs`` may
  be arrays or ``ShapeDtypeStruct``s of a batch; ``key`` a key like those ``act`` gets."""
  key = jax.random.key(0) if key is None else key
  count = len(jax.tree.leaves(model_state))
  reads = [False] * count
  for deterministic in (False, True):
    closed = jax.make_jaxpr(lambda m, o, k, d=deterministic: model.act(m, o, k, d))(
        model_state, obs, key)
    reads = [a or b for a, b in zip(reads, _live_inputs(closed)[:count])]
  return reads


def _store_writes(model, state: AgentState) -> list[bool]:
  """Per model-state leaf: whether ``model.store`` may return something else than it got."""
  flags = jnp.zeros((len(jax.tree.leaves(state.action)[0]),), jnp.bool_)
  transition = interaction.Transition(state.obs, state.action, flags.astype(jnp.float32),
                                      flags, flags, state.obs, state.extras)
  closed = jax.make_jaxpr(model.store)(state.model, transition)
  inputs = closed.jaxpr.invars[:len(jax.tree.leaves(state.model))]
  outputs = closed.jaxpr.outvars
  if len(outputs) != len(inputs):
    return [True] * len(inputs)
  return [o is not i for o, i in zip(outputs, inputs)]


def _stand_in(leaf) -> Any:
  """What stands for a model-state leaf ``act`` does not read: a zero of its shape."""
  if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
    data = jax.random.key_data(leaf)
    return ("key", data.shape, jax.random.key_impl(leaf))
  return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)


def _model_from(plan: FastPlan, read: list):
  """The model state ``act`` sees inside ``act_only``: real leaves where it reads."""
  leaves = []
  for entry in plan.model_leaves:
    if isinstance(entry, int):
      leaves.append(read[entry])
    elif isinstance(entry, tuple):
      leaves.append(jax.random.wrap_key_data(jnp.zeros(entry[1], jnp.uint32), impl=entry[2]))
    else:
      leaves.append(jnp.zeros(entry.shape, entry.dtype))
  return jax.tree.unflatten(plan.model_treedef, leaves)


def _fast_layout(rt: Runtime, state: AgentState) -> interaction.FastLayout:
  n = rt.parts.num_streams

  def raw_leaf(space):  # as check_states hands states over
    return np.zeros((n,) + tuple(space.shape), _DTYPES[_kind(space)])

  named = _named(rt.raw_space)
  raw = raw_leaf(rt.raw_space) if named is None else {k: raw_leaf(v) for k, v in named.items()}
  out = (state.obs, state.action, state.extras)
  key_data = jax.random.key_data(state.key)
  return interaction.FastLayout(interaction.Packing.of(raw), interaction.Packing.of(out),
                                tuple(key_data.shape), jax.random.key_impl(state.key))


def _action_columns(rt: Runtime, state: AgentState, layout: interaction.FastLayout) -> tuple:
  out = layout.out
  first = len(jax.tree.leaves(state.obs))
  names = sorted(state.action) if isinstance(state.action, dict) else [None]
  return tuple((name, out.offsets[first + j], out.offsets[first + j + 1],
                out.shapes[first + j], out.dtypes[first + j])
               for j, name in enumerate(names))


@functools.lru_cache(maxsize=None)
def _act_only_fn(rt: Runtime, plan: FastPlan, deterministic: bool):
  """``(read, pstate, xstate, words) -> (pstate, xstate, words)``, or without the
  preprocessing and exploration states when they are empty (an argument costs
  microseconds even when it holds no arrays)."""
  def run(read, pstate, xstate, words):
    return interaction.act_only(rt.parts, plan.layout, _model_from(plan, read), pstate,
                                xstate, words, deterministic=deterministic)
  if plan.carries:
    return jax.jit(run, donate_argnums=(1, 2))
  n = rt.parts.num_streams
  return jax.jit(lambda read, words: run(read, rt.preprocess_init(n), rt.explore_init(n),
                                         words)[2])


@functools.lru_cache(maxsize=None)
def _commit_rows_fn(rt: Runtime, plan: FastPlan):
  return jax.jit(functools.partial(interaction.commit_rows, rt.parts, plan.layout),
                 donate_argnums=0)


@functools.lru_cache(maxsize=None)
def _key_chain_fn(rt: Runtime, plan: FastPlan, steps: int):
  return jax.jit(functools.partial(interaction.key_chain, plan.layout, steps=steps))


@functools.lru_cache(maxsize=None)
def _pack_last_fn(rt: Runtime, plan: FastPlan):
  return jax.jit(lambda obs, action, extras: plan.layout.out.pack((obs, action, extras)))


@functools.lru_cache(maxsize=None)
def _key_data_fn(rt: Runtime):
  return jax.jit(jax.random.key_data)


class DeferredCommits:
  """The host side of the fast path: acts whose transitions the model has not stored yet.

  Holds up to ``depth + 1`` acts (``uint32[N, W]`` outputs of ``act_only`` each) with what
  ``observe`` said after them; act ``j`` and the next state from act ``j + 1`` form a
  transition. ``sync`` stores the complete ones and writes the last act, the key and the
  timestep into the device state, which is then exactly the fused path's. The key stream
  and the timestep advance on the host meanwhile (the act call gets them in its input).
  """

  MAX_DEPTH = 256  # transitions stored per commit call (a call costs ~0.2 ms on 2 cores)
  MAX_BYTES = 8 << 20  # ... unless that many acts would take more memory (images)
  KEY_STEPS = 256  # key-stream steps computed per call

  def __init__(self, rt: Runtime, plan: FastPlan):
    n, layout = rt.parts.num_streams, plan.layout
    self.rt, self.plan, self.n = rt, plan, n
    act_bytes = 4 * n * max(layout.out.width, 1)
    self.depth = int(np.clip(self.MAX_BYTES // act_bytes - 1, 1, self.MAX_DEPTH))
    self.words = np.zeros((self.depth + 1, n, layout.out.width), np.uint32)
    self.reward = np.zeros((self.depth, n), np.float32)
    self.terminal = np.zeros((self.depth, n), np.int32)
    self.count = 0  # acts held (slot 0 may already be in the device state)
    self.dirty = False  # the device state lacks some held act or transition
    self.header = layout.header  # words before the per-stream rows
    self.inputs = np.zeros(layout.header + n * (2 + layout.raw.width), np.uint32)
    self.rows = self.inputs[layout.header:].reshape(n, 2 + layout.raw.width)
    self.rows[:, 0] = np.arange(n)  # stream indices: all streams, in order
    self.raw_columns = [self.rows[:, 2 + a:2 + b]
                        for a, b in zip(layout.raw.offsets, layout.raw.offsets[1:])]
    # one float state (the common case) is written without the loop over leaves
    self.one_float = (layout.raw.treedef.num_leaves == 1
                      and layout.raw.dtypes[0] == np.float32)
    self.fns = {}  # deterministic -> compiled act_only
    self.scalar = None  # (column, word dtype, dtype) of a single scalar action
    if len(plan.actions) == 1 and plan.actions[0][0] is None and plan.actions[0][3] == ():
      _, column, _, _, dtype = plan.actions[0]
      wide = (dtype if dtype.itemsize == 4 and dtype != np.bool_ else
              np.dtype(np.float32 if np.issubdtype(dtype, np.floating) else np.int32))
      self.scalar = (column, wide, dtype)
    self.idx = np.arange(n, dtype=np.int32)
    self.forget()

  def forget(self) -> None:
    """The device state changed behind our back (a fused act, a restore): re-read the key,
    the timestep, the model leaves and the last act from it when needed."""
    self.count = 0
    self.dirty = False
    self.clock = None  # timestep of the next act
    self.keys = None  # key data after each of the next KEY_STEPS acts [S, ...]
    self.headers = None  # act_only's input header of each of those acts [S, 2 * kw + 1]
    self.key_base = None  # key data before keys[0]
    self.key_pos = 0  # acts taken of those
    self.read = None  # the model-state leaves act reads

  # ---------------------------------------------------------------- acting

  def act(self, state: AgentState, obs, reset, reward, terminal, commit: str,
          deterministic: bool):
    """One act of all streams. ``commit``: 'direct' (the previous acts were observed with
    ``reward``/``terminal``) or 'none' (nothing held: the previous act, if any, was
    dropped). Returns ``(state, uint32[N, W] words)``."""
    if commit == "none":
      if self.count > 1:  # transitions before the dropped act are still to be stored
        state = self.sync(state)
      self.count = 0
    else:
      if self.count == self.depth + 1:
        state = self.sync(state)
      if self.count == 0:  # the previous act is only in the device state
        self.words[0] = np.asarray(_pack_last_fn(self.rt, self.plan)(
            state.obs, state.action, state.extras))
        self.count = 1
      self.reward[self.count - 1] = reward
      self.terminal[self.count - 1] = terminal
    state, words = self._act_only(state, obs, reset, deterministic)
    self.words[self.count] = words
    self.count += 1
    self.dirty = True
    return state, words

  def _act_only(self, state: AgentState, obs, reset, deterministic: bool):
    if self.headers is None or self.key_pos == self.KEY_STEPS:
      self._next_headers(state)
    self.inputs[:self.header] = self.headers[self.key_pos]
    self.key_pos += 1
    self.rows[:, 1] = reset
    if self.one_float:
      self.raw_columns[0][...] = obs.reshape(self.n, -1).view(np.uint32)
    else:
      leaves = [obs[k] for k in sorted(obs)] if isinstance(obs, dict) else (obs,)
      for columns, leaf in zip(self.raw_columns, leaves):  # sorted keys: the pytree order
        columns[...] = interaction.host_words(leaf)
    if self.read is None:
      leaves = jax.tree.leaves(state.model)
      self.read = [leaves[i] for i in self.plan.reads]
    fn = self.fns.get(deterministic) or self.fns.setdefault(
        deterministic, _act_only_fn(self.rt, self.plan, deterministic))
    if self.plan.carries:
      pstate, xstate, words = fn(self.read, state.preprocess, state.explore, self.inputs)
      state = state._replace(preprocess=pstate, explore=xstate)
    else:
      words = fn(self.read, self.inputs)
    self.clock += self.n
    return state, np.asarray(words)

  def _next_headers(self, state: AgentState) -> None:
    """Keys and timesteps of the next ``KEY_STEPS`` acts, in one call."""
    if self.clock is None:
      self.clock = int(np.asarray(state.timestep))
    base = self._key_now(state)
    chain, sub = _key_chain_fn(self.rt, self.plan, self.KEY_STEPS)(base)
    clocks = self.clock + self.n * np.arange(self.KEY_STEPS, dtype=np.int64)
    self.headers = np.concatenate([np.asarray(sub), clocks[:, None].astype(np.uint32)], 1)
    self.keys, self.key_base, self.key_pos = np.asarray(chain), base, 0

  def _key_now(self, state: AgentState) -> np.ndarray:
    """Key data after the acts so far."""
    if self.keys is None:
      return np.asarray(_key_data_fn(self.rt)(state.key))
    return self.keys[self.key_pos - 1] if self.key_pos else self.key_base

  # ---------------------------------------------------------------- committing

  def sync(self, state: AgentState) -> AgentState:
    """Stores the complete transitions held here and brings the device state up to date;
    keeps the last act (as slot 0) for the transition its observe will complete."""
    if not self.dirty:
      return state
    last = self.count - 1
    # copies: the call may still read its inputs after returning (async dispatch)
    state = _commit_rows_fn(self.rt, self.plan)(
        state, self.words.copy(), self.reward.copy(), self.terminal.copy(), np.int32(last),
        self.idx, self._key_now(state).copy(), np.int32(self.clock))
    self.words[0] = self.words[last]
    self.count = 1
    self.dirty = False
    self.read = None  # the call donated the state: its arrays are new
    return state

  def action_to_user(self, words: np.ndarray, batched: bool):
    """The action columns of ``words`` as ``Runtime.to_user`` returns them."""
    if self.scalar is not None and not batched:  # one scalar action: no arrays to build
      column, wide, dtype = self.scalar
      value = words[0, column].view(wide).item()
      return bool(value) if dtype == np.bool_ else value
    values = {}
    for name, a, b, shape, dtype in self.plan.actions:
      value = interaction.host_leaf(words[:, a:b], shape, dtype)
      if not batched:
        value = value[0]
      values[name] = value.item() if value.ndim == 0 else value.copy()  # not a view
    return values[None] if None in values else values


# ---------------------------------------------------------------- checking states


def check_states(raw: gym.Space, masks: dict, action_space: gym.Space, states, kinds=None):
  named = _named(raw)
  if kinds is None:
    kinds = _kind(raw) if named is None else {k: _kind(v) for k, v in named.items()}
  if named is None:
    if isinstance(states, Mapping):
      raise StateError(f"expected one state of shape {raw.shape}, got a dict with "
                       f"{sorted(states)}; this agent has a single unnamed state.")
    array, batched = _check_leaf("state", raw, states, kinds)
    return array, batched
  if not isinstance(states, Mapping):
    raise StateError(f"expected a dict of named states {sorted(named)}, got "
                     f"{type(states).__name__}.")
  missing = [n for n in named if n not in states and n not in masks]
  extra = [n for n in states if n not in named]
  if missing or extra:
    raise StateError(f"states must be named {sorted(named)}; missing {missing}, "
                     f"unknown {extra}.")
  out, batch = {}, None
  for name, space in named.items():
    if name not in states:
      continue
    out[name], batched = _check_leaf(name, space, states[name], kinds[name])
    if batch is not None and batched != batch[0]:
      raise StateError("give every named state either as one value or as a batch, not mixed.")
    if batch is not None and out[name].shape[0] != batch[1]:
      raise StateError(f"state {name!r} has a batch of {out[name].shape[0]}, others "
                       f"{batch[1]}.")
    batch = (batched, out[name].shape[0])
  for name in masks:
    if name not in out:
      out[name] = np.ones((batch[1],) + tuple(named[name].shape), bool)
    elif not out[name].any(axis=-1).all():
      raise StateError(f"mask {name!r} allows no action for some element; at least one "
                       "value must be True (allowed).")
  return out, batch[0]


_DTYPES = {"float": np.float32, "int": np.int32, "bool": np.bool_}


def _check_leaf(name: str, space: gym.Space, value, kind: str):
  try:
    array = np.asarray(value)
  except Exception as e:  # ragged lists and the like
    raise StateError(f"state {name!r} cannot be read as an array: {e}") from None
  shape = tuple(space.shape)
  if array.shape == shape:
    batched = False
    array = array[None]
  elif array.ndim == len(shape) + 1 and array.shape[1:] == shape:
    batched = True
  else:
    raise StateError(f"state {name!r} must have shape {shape} (or a batch [k, *{shape}]), "
                     f"got {array.shape}.")
  if kind == "float":
    if array.dtype.kind not in "fiub":
      raise StateError(f"state {name!r} must be numbers, got dtype {array.dtype}.")
    array = array.astype(np.float32, copy=False)
    if not _all_finite(array):
      raise StateError(f"state {name!r} contains NaN or inf.")
  elif kind == "int":
    if array.dtype.kind not in "iub":
      raise StateError(f"state {name!r} must be ints, got dtype {array.dtype}.")
    array = array.astype(np.int32, copy=False)
  else:
    if array.dtype.kind not in "bi":
      raise StateError(f"state {name!r} must be bools, got dtype {array.dtype}.")
    array = array.astype(bool, copy=False)
  return array, batched
