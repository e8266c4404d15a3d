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

from batchrl.agent import STAGE_DEPTH, AgentUsageError
from batchrl.agents import interaction, registry, spaces
from batchrl.agents.interaction import AgentState, Parts
from batchrl.configs.base import ConfigError
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
    return check_states(self.raw_space, self.masks, self.action_space, states)

  def to_user(self, action, batched: bool):
    host = jax.device_get(action)
    if isinstance(host, dict):
      return {k: _user_value(v, batched) for k, v in host.items()}
    return _user_value(host, batched)

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
  context = registry.BuildContext(n, spec.get("network", "auto"), action_space)
  model = agent_type.build(dict(spec.get("config") or {}), context)
  runtime = Runtime(spec, raw, processed, action_space, masks, stacks, reward_stack,
                    explorations, None)
  parts = Parts(model, n, STAGE_DEPTH, runtime.preprocess, runtime.reward_preprocess,
                runtime.explore, runtime.explore_init)
  return dataclasses.replace(runtime, parts=parts)


def _init_state(rt: Runtime) -> AgentState:
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

  try:
    return jax.jit(init)()
  except (TypeError, ValueError) as e:
    raise ConfigError(f"cannot build agent {rt.spec['type']!r} for these states/actions: "
                      f"{e}") from e


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


# ---------------------------------------------------------------- checking states


def check_states(raw: gym.Space, masks: dict, action_space: gym.Space, states):
  named = _named(raw)
  if named is None:
    if isinstance(states, Mapping):
      raise StateError(f"expected one state of shape {raw.shape}, got a dict with "
                       f"{sorted(states)}; this agent has a single unnamed state.")
    array, batched = _check_leaf("state", raw, states)
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
    out[name], batched = _check_leaf(name, space, states[name])
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


def _check_leaf(name: str, space: gym.Space, value):
  kind = _kind(space)
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
    if not np.isfinite(array).all():
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
