"""What stands between the user's states and actions and the model of ``batchrl.Agent``: the
spaces of both, the preprocessing stacks, the explorations and the action masks.

``Adapters`` is static (compiled programs close over it): its device functions are pure and
its host functions check what ``act`` is given and convert what it returns.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.agent.states import check_leaf, check_states
from batchrl.agents import spaces
from batchrl.exploration import build_explorations
from batchrl.ops.running_stats import RunningStats
from batchrl.preprocessing import build_preprocessing, build_stack
from batchrl.specs import named_spaces, space_kind, space_kinds, to_space


@dataclasses.dataclass(frozen=True, eq=False)
class Adapters:
  raw_space: gym.Space  # the states the user gives
  processed_space: gym.Space  # ... as the model sees them, after preprocessing
  action_space: gym.Space
  masks: dict  # mask state name -> action name (None for the single action)
  stacks: Any  # Stack or {name: Stack}
  reward_stack: Any
  explorations: Any  # Exploration | None or {name: Exploration | None}

  # ---------------------------------------------------------------- device functions

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

  def preprocess_fresh(self, pstate, obs):
    """Every state as an episode start (fresh sequence stacks), learned statistics kept:
    how independent acts see their states."""
    def one(stack, state, x):
      k = x.shape[0]
      fresh = stack.init(k)
      state = tuple(t if isinstance(t, RunningStats) else f for t, f in zip(state, fresh))
      return stack.process(state, x, jnp.ones((k,), jnp.bool_), update=False)[1]
    if not isinstance(self.stacks, dict):
      return one(self.stacks, pstate, obs)
    out = {name: one(stack, pstate[name], obs[name]) for name, stack in self.stacks.items()}
    for name in self.masks:
      out[name] = obs[name]
    return out

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
      space = action_leaves(self.action_space)[name]
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
        space = action_leaves(self.action_space)[name]
        state[str(name)] = exploration.init(n, tuple(space.shape))
    return state

  def allow_all(self, obs):
    """Processed states with every mask allowing every action (the initial state)."""
    if not self.masks:
      return obs
    return {k: (jnp.ones_like(v) if k in self.masks else v) for k, v in obs.items()}

  # ---------------------------------------------------------------- host functions

  def check_states(self, states):
    """User states -> (numpy arrays with a leading batch axis k, whether batched)."""
    if type(states) is np.ndarray and not isinstance(self.raw_kinds, dict):
      return check_leaf("state", self.raw_space, states, self.raw_kinds)  # the common case
    return check_states(self.raw_space, self.masks, states, self.raw_kinds)

  @functools.cached_property
  def raw_kinds(self):
    """``space_kinds`` of the state space (computed once: it is slow)."""
    return space_kinds(self.raw_space)

  def to_user(self, action, batched: bool):
    # np.asarray, not jax.device_get: a few microseconds less per array
    if isinstance(action, dict):
      return {k: _user_value(np.asarray(v), batched) for k, v in action.items()}
    return _user_value(np.asarray(action), batched)


def build_adapters(spec: dict) -> Adapters:
  """The adapters of an agent spec; a bad state, action, preprocessing or exploration spec
  raises before anything is built."""
  raw = to_space(spec["states"])
  action_space = to_space(spec["actions"])
  for space in action_leaves(action_space).values():
    space_kind(space)
  spaces.check_masks(raw, action_space)
  masks = spaces.mask_names(raw, action_space)
  stacks = _build_stacks(spec, raw, masks)
  named = named_spaces(raw)
  if named is None:
    processed = _processed_space(raw, stacks)
  else:
    processed = gym.spaces.Dict({name: (space if name in masks else
                                        _processed_space(space, stacks[name]))
                                 for name, space in named.items()})
  reward_stack = build_stack(spec.get("reward_preprocessing"), (), "float",
                             "reward_preprocessing")
  leaves = action_leaves(action_space)
  names = None if None in leaves else list(leaves)
  kinds = ({str(k): space_kind(v) for k, v in leaves.items()} if names
           else space_kind(action_space))
  explorations = build_explorations(spec.get("exploration"), names, kinds)
  return Adapters(raw, processed, action_space, masks, stacks, reward_stack, explorations)


def action_leaves(space: gym.Space) -> dict[str | None, gym.Space]:
  """The action spaces by name (``None`` for the single unnamed action)."""
  named = named_spaces(space)
  return {None: space} if named is None else named


def _processed_space(space: gym.Space, stack) -> gym.Space:
  """The space a state has after its preprocessing stack."""
  if not stack.preprocessors:
    return space
  if stack.processed_dtype() == "float":
    return gym.spaces.Box(-np.inf, np.inf, stack.processed_shape(), np.float32)
  return space


def _build_stacks(spec: dict, raw: gym.Space, masks: dict):
  named = named_spaces(raw)
  if named is None:
    return build_preprocessing(spec.get("preprocessing"), tuple(raw.shape), space_kind(raw))
  kept = {k: v for k, v in named.items() if k not in masks}
  return build_preprocessing(spec.get("preprocessing"),
                             {k: tuple(v.shape) for k, v in kept.items()},
                             {k: space_kind(v) for k, v in kept.items()})


def _as_dict(value) -> dict:
  return value if isinstance(value, dict) else {None: value}


def _bounds(space: gym.Space) -> dict:
  kind = space_kind(space)
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
