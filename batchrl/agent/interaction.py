"""The device side of ``batchrl.Agent``: pure functions over one ``AgentState`` pytree.

The object API keeps ``N`` streams (``parallel_interactions``). Each stream alternates
``act`` and ``observe``. A transition ``(s, a, r, terminal, s')`` is complete only when its
next state ``s'`` is known: at the stream's next ``act`` (or, for a terminal step, from
``next_states`` given to ``observe``). So rewards wait on the host and every transition is
*committed* to the model inside the next ``act`` of its stream, fused with preprocessing and
acting into one compiled call: one device call per step.

The model stores ``[N]`` rows (one transition of every stream). When all streams act
together (a batched runner, or ``N = 1``) their transitions form a row at once
(``commit='direct'``). Streams that act on their own (``parallel=[i]``, threads) go
through a small staging area ``[K, N]``; a row is handed to the model once every stream
has a staged transition (``commit='staged'``).

Where the model's ``act`` reads nothing that its ``store`` writes, the commit need not come
first: ``act_only`` acts alone and ``commit_rows`` later stores many held transitions in
one call (the fast path, bottom of this file; the same computations, grouped differently).

Shapes: ``N`` streams, ``k`` streams acting in this call, ``K`` staging depth.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from batchrl.agents.core import Model, Transition

PyTree = Any


class AgentState(NamedTuple):
  """Everything the object API keeps on the device; saved whole by ``Agent.save``."""

  model: PyTree
  preprocess: PyTree  # per named state: the stack's state (frames [N, ...], statistics)
  reward_preprocess: PyTree
  explore: PyTree  # per action: exploration state (OU noise [N, ...])
  key: jax.Array
  obs: PyTree  # [N, ...] processed state each stream last acted on
  action: PyTree  # [N, ...] action each stream last took (after exploration)
  extras: PyTree  # [N, ...] what the model's act returned with it
  stage: Transition  # [K, N, ...] committed transitions waiting for a full row
  timestep: jax.Array  # [] int32 timesteps acted (drives exploration schedules)


@dataclasses.dataclass(frozen=True)
class AgentParts:
  """The static pieces an ``AgentState`` is computed with."""

  model: Model
  num_streams: int
  stage_depth: int
  preprocess: Callable  # (pstate, obs[N], reset[N], active[N]|None, update) -> (pstate, obs')
  reward_preprocess: Callable  # (rstate, reward[N], active[N]|None) -> (rstate, reward')
  explore: Callable  # (xstate, key, action[N], extras[N], obs[N], timestep, active[N],
  #                     reset[N]) -> (xstate, action, extras)
  explore_init: Callable  # () -> xstate


# ------------------------------------------------------------------------- helpers


def scatter(full, rows, idx):
  """``full[idx] = rows`` for every leaf (``full`` ``[N, ...]``, ``rows`` ``[k, ...]``)."""
  return jax.tree.map(lambda f, r: f.at[idx].set(r.astype(f.dtype)), full, rows)


def gather(full, idx):
  return jax.tree.map(lambda f: f[idx], full)


def _active(idx: jax.Array, n: int) -> jax.Array:
  return jnp.zeros((n,), jnp.bool_).at[idx].set(True)


def _where_rows(mask: jax.Array, new, old):
  """Per leaf ``[N, ...]``: rows of ``new`` where ``mask[N]``, else ``old``."""
  def pick(a, b):
    return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)
  return jax.tree.map(pick, new, old)


def empty_stage(parts: AgentParts, obs, action, extras) -> Transition:
  """Zeros for ``[K, N]`` staged transitions, shaped like one row of ``[N]`` experience."""
  depth, n = parts.stage_depth, parts.num_streams
  zeros = lambda x: jnp.zeros((depth,) + jnp.shape(x), jnp.result_type(x))
  flags = jnp.zeros((depth, n), jnp.bool_)
  return Transition(jax.tree.map(zeros, obs), jax.tree.map(zeros, action),
                    jnp.zeros((depth, n), jnp.float32), flags, flags,
                    jax.tree.map(zeros, obs), jax.tree.map(zeros, extras))


# ------------------------------------------------------------------------- commit


def _held_transitions(parts: AgentParts, state: AgentState, idx, reward, terminal, next_obs):
  """The ``[k]`` transitions of the acting streams, completed with their next state."""
  rstate, reward_full = parts.reward_preprocess(
      state.reward_preprocess, jnp.zeros((parts.num_streams,), jnp.float32).at[idx].set(reward),
      _active(idx, parts.num_streams))
  transition = Transition(gather(state.obs, idx), gather(state.action, idx),
                          reward_full[idx], terminal == 1, terminal == 2, next_obs,
                          gather(state.extras, idx))
  return state._replace(reward_preprocess=rstate), transition


def commit_direct(parts: AgentParts, state: AgentState, transition: Transition, update: str):
  """All ``N`` streams committed together: one row straight to the model.

  ``update``: 'cond' = ``model.observe`` (updates under ``lax.cond`` when ready); for models
  with a fixed ``period`` the host counts rows instead and says 'store' (no update due) or
  'now' (this row completes the batch). That keeps ``lax.cond`` out of the step: on CPU a
  cond over the whole state copies the experience buffer on every call.
  """
  if update == "cond":
    model, metrics = parts.model.observe(state.model, transition)
    return state._replace(model=model), metrics["updated"]
  model = parts.model.store(state.model, transition)
  if update == "now":
    model, _ = parts.model.update(model)
    return state._replace(model=model), jnp.float32(1.0)
  return state._replace(model=model), jnp.float32(0.0)


def commit_staged(parts: AgentParts, state: AgentState, transition: Transition, idx, slots,
                  flush: int):
  """Stages ``[k]`` transitions at ``stage[slots[j], idx[j]]``, then hands the first
  ``flush`` complete rows to the model (the host counts what is staged, so ``flush`` is a
  Python int) and shifts the rest up."""
  stage = jax.tree.map(lambda s, t: s.at[slots, idx].set(t.astype(s.dtype)),
                       state.stage, transition)
  updated = jnp.float32(0.0)
  model = state.model
  for row in range(flush):
    model, metrics = parts.model.observe(model, jax.tree.map(lambda s: s[row], stage))
    updated = jnp.maximum(updated, metrics["updated"])
  if flush:
    stage = jax.tree.map(lambda s: jnp.roll(s, -flush, axis=0), stage)
  return state._replace(model=model, stage=stage), updated


# ---------------------------------------------------------------------------- act


def act_step(parts: AgentParts, state: AgentState, obs, idx, reward, terminal, next_obs_held,
             has_next, reset, slots, *, commit: str, flush: int, update: str,
             deterministic: bool):
  """One ``act`` of the streams ``idx`` ``[k]``: preprocess their states, commit their held
  transitions (``commit`` 'none' | 'direct' | 'staged'), then act for them.

  Args:
    obs: raw states ``[k, ...]``.
    reward, terminal: ``[k]`` what the previous ``observe`` of each stream said.
    next_obs_held: ``[k, ...]`` processed next states given to ``observe`` for steps cut
      short (terminal 2), where ``has_next[k]``; otherwise a cut step bootstraps from the
      state it acted on.
    reset: ``bool[k]``: these streams start a new episode now.
    slots: ``int[k]`` staging rows (``commit='staged'`` only).
    update: how a direct commit updates (``commit_direct``).
  Returns:
    ``(state, action[k], updated)`` with ``updated`` a float32 flag.
  """
  key, act_key, explore_key = jax.random.split(state.key, 3)
  pstate, processed_k, active, full_reset = _preprocess_streams(parts, state.preprocess, obs,
                                                                idx, reset)
  state = state._replace(preprocess=pstate, key=key)
  updated = jnp.float32(0.0)
  if commit != "none":
    state, updated = _commit_held(parts, state, idx, reward, terminal, processed_k,
                                  next_obs_held, has_next, slots, commit=commit, flush=flush,
                                  update=update)
  obs_full = scatter(state.obs, processed_k, idx)
  xstate, action, extras = _policy_step(parts, state.model, state.explore, state.timestep,
                                        obs_full, active, full_reset, act_key, explore_key,
                                        deterministic)
  state = state._replace(
      obs=obs_full, action=scatter(state.action, gather(action, idx), idx),
      extras=scatter(state.extras, gather(extras, idx), idx), explore=xstate,
      timestep=state.timestep + idx.shape[0])
  return state, gather(action, idx), updated


def _preprocess_streams(parts: AgentParts, pstate, obs, idx, reset):
  """Raw ``[k]`` states of streams ``idx`` -> ``(pstate, processed[k], active[N],
  reset[N])``."""
  n = parts.num_streams
  active = _active(idx, n)
  full_reset = jnp.zeros((n,), jnp.bool_).at[idx].set(reset)
  pstate, processed = parts.preprocess(pstate, _raw_rows(obs, idx, n), full_reset, active,
                                       True)
  return pstate, gather(processed, idx), active, full_reset


def _commit_held(parts: AgentParts, state: AgentState, idx, reward, terminal, processed_k,
                 next_obs_held, has_next, slots, *, commit: str, flush: int, update: str):
  """Completes the held ``[k]`` transitions with their next state and commits them."""
  ended = _where_rows(has_next, next_obs_held, gather(state.obs, idx))
  next_obs = _where_rows(terminal == 0, processed_k, ended)
  state, transition = _held_transitions(parts, state, idx, reward, terminal, next_obs)
  if commit == "direct":
    return commit_direct(parts, state, transition, update)
  return commit_staged(parts, state, transition, idx, slots, flush)


def _policy_step(parts: AgentParts, model, xstate, timestep, obs_full, active, full_reset, act_key,
                 explore_key, deterministic: bool):
  """The model's ``[N]`` actions, explored unless ``deterministic``."""
  action, extras = parts.model.act(model, obs_full, act_key, deterministic)
  if not deterministic:
    xstate, action, extras = parts.explore(xstate, explore_key, action, extras, obs_full,
                                           timestep, active, full_reset)
  return xstate, action, extras


def _raw_rows(obs, idx, n: int):
  """Raw states scattered into ``[N]`` rows (other rows zero: they are inactive)."""
  def rows(x):
    full = jnp.zeros((n,) + x.shape[1:], x.dtype)
    return full.at[idx].set(x)
  return jax.tree.map(rows, obs)


def process_next(parts: AgentParts, state: AgentState, obs, idx):
  """Processed ``[k]`` next states for bootstrapping (statistics and stacks untouched)."""
  n = parts.num_streams
  _, processed = parts.preprocess(state.preprocess, _raw_rows(obs, idx, n),
                                  jnp.zeros((n,), jnp.bool_), _active(idx, n), False)
  return gather(processed, idx)


# ------------------------------------------------------------------ deferred commits
#
# The fast path of ``batchrl.Agent`` (see ``fast_path.DeferredCommits``): when every stream
# acts in each call and the model's ``act`` reads nothing that ``store`` writes, an act
# need not wait for the model to store the previous transition. ``act_only`` then acts
# alone, its outputs wait on the host, and ``commit_rows`` stores many rows in one call.
# The computations are those of ``act_step``; only the grouping into calls changes, so the
# results are the same.


@dataclasses.dataclass(frozen=True)
class Packing:
  """Where each leaf of a pytree of ``[k, ...]`` arrays lies in one ``uint32[k, W]`` array,
  one word per element (bit casts for 32-bit types, exact casts for narrower ones).

  A compiled call pays microseconds of dispatch per argument and per result, so the fast
  path moves one packed array each way instead of one array per leaf.
  """

  treedef: Any
  shapes: tuple  # per leaf, without the leading k
  dtypes: tuple  # numpy dtypes
  offsets: tuple  # column where each leaf starts; the last entry is W

  @staticmethod
  def of(tree) -> "Packing":
    """The packing of ``tree`` (arrays or ``jax.ShapeDtypeStruct`` with a leading axis)."""
    leaves, treedef = jax.tree.flatten(tree)
    shapes = tuple(tuple(x.shape[1:]) for x in leaves)
    dtypes = tuple(np.dtype(x.dtype) for x in leaves)
    offsets = tuple(np.cumsum([0] + [math.prod(s) for s in shapes]).tolist())
    return Packing(treedef, shapes, dtypes, offsets)

  @property
  def width(self) -> int:
    return self.offsets[-1]

  def pack(self, tree) -> jax.Array:
    """``tree`` of ``[k, ...]`` leaves -> ``uint32[k, W]``."""
    leaves = jax.tree.leaves(tree)
    k = leaves[0].shape[0] if leaves else 0
    cols = [_to_words(jnp.asarray(x)).reshape(k, -1) for x in leaves]
    return jnp.concatenate(cols, axis=1) if cols else jnp.zeros((k, 0), jnp.uint32)

  def unpack(self, words: jax.Array):
    """``uint32[k, W]`` -> the tree (on the device)."""
    k = words.shape[0]
    leaves = [_from_words(words[:, a:b], dtype).reshape((k,) + shape)
              for a, b, shape, dtype in zip(self.offsets, self.offsets[1:], self.shapes,
                                            self.dtypes)]
    return jax.tree.unflatten(self.treedef, leaves)


def _to_words(x: jax.Array) -> jax.Array:
  if x.dtype.itemsize == 4 and x.dtype != jnp.bool_:
    return jax.lax.bitcast_convert_type(x, jnp.uint32)
  wide = jnp.float32 if jnp.issubdtype(x.dtype, jnp.floating) else jnp.int32
  return jax.lax.bitcast_convert_type(x.astype(wide), jnp.uint32)


def _from_words(words: jax.Array, dtype: np.dtype) -> jax.Array:
  if dtype.itemsize == 4 and dtype != np.bool_:
    return jax.lax.bitcast_convert_type(words, dtype)
  wide = jnp.float32 if np.issubdtype(dtype, np.floating) else jnp.int32
  return jax.lax.bitcast_convert_type(words, wide).astype(dtype)


def host_words(x: np.ndarray) -> np.ndarray:
  """The host side of ``Packing``: ``[k, ...]`` -> ``uint32[k, size]`` words."""
  x = x.reshape(x.shape[0], -1)
  if x.dtype.itemsize == 4 and x.dtype != np.bool_:
    return x.view(np.uint32)
  wide = np.float32 if np.issubdtype(x.dtype, np.floating) else np.int32
  return x.astype(wide).view(np.uint32)


def host_leaf(words: np.ndarray, shape: tuple, dtype: np.dtype) -> np.ndarray:
  """The host side of ``Packing.unpack`` for one leaf's columns ``uint32[k, size]``."""
  if dtype.itemsize == 4 and dtype != np.bool_:
    value = words.view(dtype)
  else:
    wide = np.float32 if np.issubdtype(dtype, np.floating) else np.int32
    value = words.view(wide).astype(dtype)
  return value.reshape((words.shape[0],) + shape)


@dataclasses.dataclass(frozen=True)
class FastLayout:
  """The static shapes of the fast path's packed arrays.

  ``act_only`` takes ``uint32[H + N * (2 + R)]``: a header (act key, explore key, timestep;
  ``H = 2 * key_words + 1``) and per stream its index, its reset flag and its raw state
  (``raw``, ``R`` words). It returns ``uint32[N, W]``: per stream the processed state, the
  action and the model's extras (``out``), what a transition needs from an act.
  """

  raw: Packing
  out: Packing
  key_shape: tuple  # of the key data, e.g. (2,) for threefry
  key_impl: Any

  @property
  def key_words(self) -> int:
    return math.prod(self.key_shape)

  @property
  def header(self) -> int:
    return 2 * self.key_words + 1


def act_only(parts: AgentParts, layout: FastLayout, model, pstate, xstate, words, *,
             deterministic: bool):
  """``act_step`` for all ``N`` streams without its commit: preprocess, act, explore.

  ``model`` is the model state (only what ``act`` reads is real, see
  ``batchrl.agents.act_reads``). Returns ``(pstate, xstate, uint32[N, W])``.
  """
  n, kw = parts.num_streams, layout.key_words
  act_key = _wrap_key(layout, words[:kw])
  explore_key = _wrap_key(layout, words[kw:2 * kw])
  timestep = jax.lax.bitcast_convert_type(words[2 * kw], jnp.int32)
  rows = words[layout.header:].reshape(n, -1)
  obs = layout.raw.unpack(rows[:, 2:])
  reset = rows[:, 1] != 0
  # every stream acts, in order (the fast path's condition; column 0 holds 0..N-1): the
  # [k] rows are the [N] rows, so the scatters and gathers of ``act_step`` are identities,
  # left out (each is a kernel launch per call)
  active = jnp.ones((n,), jnp.bool_)
  pstate, processed = parts.preprocess(pstate, obs, reset, active, True)
  xstate, action, extras = _policy_step(parts, model, xstate, timestep, processed, active,
                                        reset, act_key, explore_key, deterministic)
  return pstate, xstate, layout.out.pack((processed, action, extras))


def commit_rows(parts: AgentParts, layout: FastLayout, state: AgentState, words, reward,
                terminal, count, idx, key_data, timestep):
  """Stores the first ``count`` transitions the fast path kept on the host, then makes
  ``state`` what ``act_step`` would have left: the last act's obs, action and extras, the
  key and the timestep after it.

  Args:
    words: ``uint32[K + 1, N, W]`` outputs of ``act_only``; transition ``j`` is act ``j``
      with the next state of act ``j + 1``.
    reward, terminal: ``[K, N]`` what ``observe`` said after act ``j``.
    count: ``int32[]`` transitions to store (no update is due among them).
    idx: ``int32[N]`` ``0..N-1``; key_data: the key after the last act; timestep: ``int32[]``.
  """
  no_next = jnp.zeros((parts.num_streams,), jnp.bool_)

  def last_act(state, j):
    obs, action, extras = layout.out.unpack(words[j])
    return state._replace(obs=scatter(state.obs, obs, idx),
                          action=scatter(state.action, action, idx),
                          extras=scatter(state.extras, extras, idx))

  def store(j, state):
    state = last_act(state, j)
    next_obs = layout.out.unpack(words[j + 1])[0]
    state, _ = _commit_held(parts, state, idx, reward[j], terminal[j], next_obs,
                            jax.tree.map(jnp.zeros_like, next_obs), no_next, None,
                            commit="direct", flush=0, update="store")
    return state

  state = jax.lax.fori_loop(0, count, store, state)
  state = last_act(state, count)
  return state._replace(key=_wrap_key(layout, key_data), timestep=timestep)


def key_chain(layout: FastLayout, key_data, *, steps: int):
  """The next ``steps`` steps of the agent's key stream, as ``act_step`` splits it.

  Returns ``(keys uint32[steps, *key_shape], subkeys uint32[steps, 2 * key_words])``: the
  key after step ``t`` and the act and explore keys step ``t`` uses.
  """
  def step(data, _):
    key, act_key, explore_key = jax.random.split(_wrap_key(layout, data), 3)
    data = jax.random.key_data(key)
    return data, (data, jnp.concatenate([jax.random.key_data(act_key).ravel(),
                                         jax.random.key_data(explore_key).ravel()]))
  _, chain = jax.lax.scan(step, key_data, None, length=steps)
  return chain


def _wrap_key(layout: FastLayout, words) -> jax.Array:
  return jax.random.wrap_key_data(words.reshape(layout.key_shape), impl=layout.key_impl)
