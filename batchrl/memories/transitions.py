"""Transitions as memory items: the item type, windows of them, and imports from observations.

``TransitionItem`` is what the value-based agents (DQN, NAF, DQFD) store. Every item keeps
its own ``next_obs`` (the final observation when the episode ended there), so a 1-step target
needs no neighbour, and a window of consecutive items in one column can check that it still
follows one episode: step ``l + 1`` continues step ``l`` only if ``l`` did not end the
episode and ``obs[l + 1]`` equals ``next_obs[l]``. The second test catches what no flag
records: an environment restarted between two stores, the boundary between two imported
chunks, the first online row after imported data.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.errors import UserInputError
from batchrl.memories.replay import Memory, MemorySpecError, MemoryState


class TransitionItem(NamedTuple):
  """One stored step; leaves ``[...]`` per item (``[rows, width, ...]`` in a memory).

  obs / next_obs: the observation (a pytree for named states) before and after the step.
  action: the action taken, as the agent stores it (e.g. an index ``0 .. K - 1``).
  reward: ``float32``. terminated: ``bool`` true end (no bootstrap).
  truncated: ``bool`` cut short (time limit): bootstrap from ``next_obs``.
  """

  obs: Any
  action: Any
  reward: Any
  terminated: Any
  truncated: Any
  next_obs: Any


def _same(a, b) -> jax.Array:
  """``[...]`` whether two pytrees of ``[..., *shape]`` leaves are equal per leading index."""
  out = None
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    equal = x == y
    equal = jnp.all(equal.reshape(equal.shape[:2] + (-1,)), axis=-1)
    out = equal if out is None else out & equal
  return out


def transition_window_mask(items: TransitionItem, mask: jax.Array) -> jax.Array:
  """``bool[K, L]``: steps of windows ``[K, L]`` that still belong to the first step's episode.

  Step 0 always counts. Step ``l > 0`` counts when step ``l - 1`` counts, did not end the
  episode (terminated or truncated), was followed by ``l`` (``obs[l] == next_obs[l - 1]``)
  and ``mask[:, l]`` holds (written after step 0, from ``Memory.windows``).
  """
  done = jnp.logical_or(items.terminated, items.truncated)
  if done.shape[1] == 1:
    return jnp.ones(done.shape, jnp.bool_)
  follows = _same(jax.tree.map(lambda x: x[:, 1:], items.obs),
                  jax.tree.map(lambda x: x[:, :-1], items.next_obs))
  step_ok = jnp.logical_and(jnp.logical_and(follows, ~done[:, :-1]), mask[:, 1:])
  first = jnp.ones(done.shape[:1] + (1,), jnp.bool_)
  return jnp.cumprod(jnp.concatenate([first, step_ok], axis=1).astype(jnp.int32),
                     axis=1).astype(jnp.bool_)


# --------------------------------------------------------------------------- importing

_KEYS = {"state": ("state", "states"), "action": ("action", "actions"),
         "reward": ("reward", "rewards"), "terminal": ("terminal", "terminals"),
         "internal": ("internal", "internals"), "next_state": ("next_state", "next_states")}


def _field(entry: Mapping, name: str, where: str, required: bool = True):
  found = [k for k in _KEYS[name] if k in entry]
  if len(found) > 1:
    raise UserInputError(f"{where}: give one of {found}, not both.")
  if not found:
    if required:
      raise UserInputError(f"{where}: missing {name!r} (observation keys: state, action, reward, "
                       "terminal, internal; next_state optional).")
    return None
  return entry[found[0]]


def _check_internal(value, where: str) -> None:
  if value is None:
    return
  if isinstance(value, Mapping) and not value:
    return
  if isinstance(value, (list, tuple)) and len(value) == 0:
    return
  raise UserInputError(f"{where}: 'internal' must be empty ([] or {{}}): these agents keep no "
                   f"internal (recurrent) state; got {value!r}.")


def _stack(values: Sequence, what: str):
  """Stacks a list of values (pytrees of the same structure) to ``[M, ...]`` numpy leaves;
  the error names the first index that differs from index 0. A value is one array (lists
  are arrays) or a dict of named arrays."""
  values = [{k: np.asarray(v) for k, v in value.items()} if isinstance(value, Mapping)
            else np.asarray(value) for value in values]
  first = jax.tree.structure(values[0])
  first_shapes = [np.shape(x) for x in jax.tree.leaves(values[0])]
  for i, value in enumerate(values):
    if jax.tree.structure(value) != first:
      raise UserInputError(f"{what} at index {i} has structure {jax.tree.structure(value)}, "
                       f"index 0 has {first}.")
    shapes = [np.shape(x) for x in jax.tree.leaves(value)]
    if shapes != first_shapes:
      raise UserInputError(f"{what} at index {i} has shape(s) {shapes}, index 0 has "
                       f"{first_shapes}.")
  return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *values)


def _terminal_codes(terminal, count: int) -> np.ndarray:
  """0 = continue, 1 = terminated, 2 = truncated (TensorForce's terminal 2: cut short)."""
  codes = np.asarray(terminal)
  if codes.shape != (count,):
    raise UserInputError(f"'terminal' must have one value per observation ({count}), got shape "
                     f"{codes.shape}.")
  codes = codes.astype(np.int64)
  bad = np.flatnonzero((codes < 0) | (codes > 2))
  if bad.size:
    raise UserInputError(f"'terminal' at index {bad[0]} is {codes[bad[0]]}; valid: False/0 "
                     "(continue), True/1 (terminated), 2 (truncated).")
  return codes


def transitions_from_observations(observations) -> TransitionItem:
  """Numpy ``TransitionItem`` ``[M, ...]`` from TensorForce observations.

  ``observations`` is an iterable of dicts with ``state``, ``action``, ``reward``,
  ``terminal`` (False/0, True/1 = terminated, 2 = truncated) and ``internal`` (must be
  empty), optionally ``next_state``; or one dict of arrays with the plural names (``states``
  ``[M, ...]`` or a dict of them, ``actions``, ``rewards``, ``terminals``, optional
  ``next_states``). Consecutive entries are consecutive steps: a step that did not end takes
  the next entry's state as its next state, so a final entry that did not end and has no
  ``next_state`` is dropped. A terminated step's next state is never used; a truncated one
  without ``next_state`` bootstraps from its own state.
  """
  if isinstance(observations, Mapping):
    entries = None
    states = _field(observations, "state", "observations")
    actions = _field(observations, "action", "observations")
    rewards = np.asarray(_field(observations, "reward", "observations"), np.float32)
    terminal = _field(observations, "terminal", "observations")
    next_states = _field(observations, "next_state", "observations", required=False)
    _check_internal(_field(observations, "internal", "observations", required=False),
                    "observations")
    states = jax.tree.map(np.asarray, states)
    actions = jax.tree.map(np.asarray, actions)
    if next_states is not None:
      next_states = jax.tree.map(np.asarray, next_states)
  else:
    entries = list(observations)
    if not entries:
      raise UserInputError("no observations to import.")
    for i, entry in enumerate(entries):
      if not isinstance(entry, Mapping):
        raise UserInputError(f"observation {i} must be a dict with state, action, reward, "
                         f"terminal, internal; got {type(entry).__name__}.")
      _check_internal(_field(entry, "internal", f"observation {i}", required=False),
                      f"observation {i}")
    states = _stack([_field(e, "state", f"observation {i}") for i, e in enumerate(entries)],
                    "states")
    actions = _stack([_field(e, "action", f"observation {i}") for i, e in enumerate(entries)],
                     "actions")
    rewards = np.asarray([_field(e, "reward", f"observation {i}")
                          for i, e in enumerate(entries)], np.float32)
    terminal = [_field(e, "terminal", f"observation {i}") for i, e in enumerate(entries)]
    given = [_field(e, "next_state", f"observation {i}", required=False)
             for i, e in enumerate(entries)]
    next_states = None
    if any(g is not None for g in given):
      next_states = [g for g in given]
  return _assemble(states, actions, rewards, terminal, next_states)


def _count(tree) -> int:
  leaves = jax.tree.leaves(tree)
  if not leaves:
    raise UserInputError("observations hold no state arrays.")
  counts = {np.shape(x)[0] if np.ndim(x) else None for x in leaves}
  if len(counts) != 1 or None in counts:
    raise UserInputError(f"every state array needs the same leading length (one row per "
                     f"observation); got lengths {sorted(map(str, counts))}.")
  return counts.pop()


def _assemble(states, actions, rewards, terminal, next_states) -> TransitionItem:
  count = _count(states)
  for name, tree in (("actions", actions), ("rewards", rewards)):
    if any(np.shape(x)[:1] != (count,) for x in jax.tree.leaves(tree)):
      raise UserInputError(f"'{name}' must have one entry per observation ({count}).")
  codes = _terminal_codes(terminal, count)
  index = np.arange(count)
  following = jax.tree.map(lambda x: x[np.minimum(index + 1, count - 1)], states)
  own = states
  if isinstance(next_states, list):  # per-entry next states, some None
    present = np.asarray([g is not None for g in next_states])
    filler = jax.tree.map(lambda x: x[0], states)
    given = _stack([g if g is not None else filler for g in next_states], "next states")
  elif next_states is not None:
    present = np.ones(count, bool)
    given = next_states
  else:
    present, given = np.zeros(count, bool), states
  # continue -> next entry's state; ended -> own state; a given next_state wins
  choice = np.where(codes == 0, 1, 0)

  def pick(own_x, following_x, given_x):
    shape = (count,) + (1,) * (np.ndim(own_x) - 1)
    x = np.where(choice.reshape(shape) == 1, following_x, own_x)
    return np.where(present.reshape(shape), given_x, x)

  next_obs = jax.tree.map(pick, own, following, given)
  keep = ~((index == count - 1) & (codes == 0) & ~present)
  if not keep.any():
    raise UserInputError("a single observation that did not end has no next state; give "
                     "'next_state' or more observations.")
  take = lambda x: np.asarray(x)[keep]
  return TransitionItem(jax.tree.map(take, states), jax.tree.map(take, actions),
                        rewards[keep], (codes == 1)[keep], (codes == 2)[keep],
                        jax.tree.map(take, next_obs))


def import_transitions(memory: Memory, state: MemoryState, items: TransitionItem
                       ) -> MemoryState:
  """Writes ``M`` transitions (leaves ``[M, ...]``, one stream in time order) into ``memory``.

  The stream is cut into ``width`` consecutive chunks, chunk ``c`` filling column ``c`` (so a
  column stays in time order for windows); ``M`` must be a multiple of ``width``. More than
  the capacity overwrites the oldest, as ``add`` does. Leaves are cast to the memory's
  dtypes; their shapes must match the memory's items.
  """
  count = _count(items.reward)
  width = memory.width
  if count % width:
    raise MemorySpecError(
        f"importing {count} transitions into a memory of width {width} (one column per "
        f"environment/stream): the count must be a multiple of {width}. Import "
        f"{count - count % width} or {count + width - count % width}, or use a memory of "
        "width 1.")
  if jax.tree.structure(state.items) != jax.tree.structure(items):
    raise UserInputError(f"imported transitions do not match the memory's item structure: "
                     f"{jax.tree.structure(items)} vs {jax.tree.structure(state.items)}.")
  for path, want, have in zip(_paths(state.items), jax.tree.leaves(state.items),
                              jax.tree.leaves(items)):
    if tuple(want.shape[2:]) != tuple(np.shape(have)[1:]):
      raise UserInputError(f"imported {path} has per-item shape {tuple(np.shape(have)[1:])}, the "
                       f"memory holds {tuple(want.shape[2:])}.")
  rows = count // width

  def to_rows(x, column):
    x = np.asarray(x).astype(column.dtype)
    return x.reshape((width, rows) + x.shape[1:]).swapaxes(0, 1)

  stacked = jax.tree.map(to_rows, items, state.items)
  return _add_rows_jit(memory, state, stacked)


def _paths(tree) -> list[str]:
  return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


@functools.lru_cache(maxsize=None)
def _add_rows_fn(memory: Memory):
  return jax.jit(memory.add_rows)


def _add_rows_jit(memory: Memory, state: MemoryState, rows) -> MemoryState:
  return _add_rows_fn(memory)(state, rows)


# --------------------------------------------------------------------------- checking


def _first_bad(bad: np.ndarray) -> int | None:
  rows = np.flatnonzero(np.asarray(bad).reshape(len(bad), -1).any(axis=1)) if len(bad) else []
  return int(rows[0]) if len(rows) else None


def _check_leaf(what: str, x: np.ndarray, space: gym.Space) -> np.ndarray:
  """One state or action leaf ``[M, *shape]`` against its space; errors name the index."""
  x = np.asarray(x)
  shape = tuple(space.shape)
  if x.shape[1:] != shape:
    raise UserInputError(f"{what} have shape {x.shape[1:]} per observation, the space needs "
                     f"{shape} ({space}).")
  if x.dtype.kind not in "biuf":
    raise UserInputError(f"{what} must be numbers, got dtype {x.dtype}.")
  if isinstance(space, gym.spaces.Box):
    bad = ~np.isfinite(x.astype(np.float64)) if space.dtype.kind == "f" else np.zeros_like(x, bool)
  elif isinstance(space, gym.spaces.Discrete):
    bad = (x != np.round(x)) | (x < space.start) | (x >= space.start + space.n)
  elif isinstance(space, gym.spaces.MultiDiscrete):
    bad = (x != np.round(x)) | (x < space.start) | (x >= space.start + space.nvec)
  elif isinstance(space, gym.spaces.MultiBinary):
    bad = (x != 0) & (x != 1)
  else:
    raise UserInputError(f"{what}: {type(space).__name__} spaces cannot be imported.")
  index = _first_bad(bad)
  if index is not None:
    raise UserInputError(f"{what} at index {index} is {x[index].tolist()!r}, not a valid value of "
                     f"{space}.")
  return x


def _check_tree(what: str, tree, space: gym.Space, optional: tuple[str, ...] = ()):
  if not isinstance(space, gym.spaces.Dict):
    if isinstance(tree, Mapping):
      raise UserInputError(f"{what} are a dict {sorted(tree)}, but the space is one {space}.")
    return _check_leaf(what, tree, space)
  if not isinstance(tree, Mapping):
    raise UserInputError(f"{what} must be a dict of {sorted(space.spaces)}, got "
                     f"{type(tree).__name__}.")
  missing = [k for k in space.spaces if k not in tree and k not in optional]
  extra = [k for k in tree if k not in space.spaces]
  if missing or extra:
    raise UserInputError(f"{what} must be named {sorted(space.spaces)}; missing {missing}, unknown "
                     f"{extra}.")
  count = _count(tree)
  out = {}
  for name, sub in space.spaces.items():
    if name in tree:
      out[name] = _check_leaf(f"{what[:-1]} {name!r} values", tree[name], sub)
    else:  # an absent mask allows everything
      out[name] = np.ones((count,) + tuple(sub.shape), bool)
  return out


def check_transitions(items: TransitionItem, observation_space: gym.Space,
                      action_space: gym.Space, optional_states: tuple[str, ...] = ()
                      ) -> TransitionItem:
  """Checks imported transitions against the spaces before anything is written.

  Errors say which field (states, next states, actions, rewards; the named state) and the
  first index that is wrong. States in ``optional_states`` (action masks) may be absent and
  are then all True.
  """
  obs = _check_tree("states", items.obs, observation_space, optional_states)
  next_obs = _check_tree("next states", items.next_obs, observation_space, optional_states)
  action = _check_tree("actions", items.action, action_space)
  reward = np.asarray(items.reward, np.float32)
  index = _first_bad(~np.isfinite(reward))
  if index is not None:
    raise UserInputError(f"rewards at index {index} is {reward[index]}, not a finite number.")
  return TransitionItem(obs, action, reward, items.terminated, items.truncated, next_obs)
