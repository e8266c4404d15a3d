"""The fast path of ``batchrl.Agent``: acts that do not commit, transitions stored many at
a time.

The fused step (``interaction.act_step``) commits the previous transition of each stream
inside the next act, so every act passes the whole state (~70 arrays for PPO) through one
compiled call. When every stream acts in each call and the model's ``act`` reads no part of
its state that ``store`` writes, the act does not need that commit: it can run alone on the
few arrays it reads (``interaction.act_only``), its outputs wait on the host
(``DeferredCommits``), and ``interaction.commit_rows`` stores many transitions in one call.
Updates keep running where the fused path runs them (the act after the period's last
transition is a fused act), and the key stream and timestep are the fused path's, so both
paths give the same states, actions and updates.

One act is then one compiled call with two arguments (the leaves ``act`` reads, packed into
one array when they are all float32, and one word array with the keys, timestep and states)
and one result read back; its program is lowered with the random hash unrolled
(``unrolled_threefry``). The single-stream agent path calls ``DeferredCommits.act_one``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from batchrl import jax_internals, programs
from batchrl.agent import interaction
from batchrl.agent.adapters import Adapters
from batchrl.agent.interaction import AgentParts, AgentState
from batchrl.agent.runtime import Runtime
from batchrl.agents.act_reads import act_reads, store_writes
from batchrl.specs import DTYPES, named_spaces, space_kind


# eq=False: hashed by identity (a cache key); repr=False: keys print short
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FastPlan:
  """What the fast path of one ``Runtime`` needs to know (``fast_plan``)."""

  layout: interaction.FastLayout
  model_treedef: Any
  model_leaves: tuple  # per leaf of the model state: its index in ``reads`` or a stand-in
  reads: tuple[int, ...]  # the model-state leaves ``act`` reads
  carries: bool  # preprocessing or exploration keep state: act_only passes it in and out
  read_floats: tuple | None  # (offset, shape) per read leaf in one float32 array, or None
  actions: tuple  # (name | None, first column, last column, shape, dtype) per action


def fast_plan(rt: Runtime, state: AgentState) -> FastPlan | str:
  """The fast path's plan for agents of this runtime, or why they cannot take it (a
  sentence). Made once per runtime: it depends on the structure of ``state`` only."""
  return rt.memo("fast_plan", lambda: _make_plan(rt, state))


def _make_plan(rt: Runtime, state: AgentState) -> FastPlan | str:
  model = rt.parts.model
  if model.period is None:
    return ("the model has no fixed update period, so only the model knows when an update "
            "is due")
  try:
    reads = act_reads(model, state.model, state.obs, state.key)
    written = store_writes(model, state.model, state.obs, state.action, state.extras)
  except Exception as e:  # an optimization: any doubt keeps the fused path
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
                  _read_floats([leaves[i] for i in read]), _action_columns(state, layout))


FLOAT_ALIGN = 16  # floats: each read leaf starts on a 64-byte boundary of the packed array


def _read_floats(leaves: list) -> tuple | None:
  """Where each leaf ``act`` reads sits in one float32 array, when they are all float32
  (an MLP's weights): a compiled call pays ~0.25 µs per argument array, six for a 2x64
  policy, more than copying the weights inside the call costs. None: they go as a list."""
  if not leaves or any(leaf.dtype != jnp.float32 for leaf in leaves):
    return None
  places, offset = [], 0
  for leaf in leaves:
    places.append((offset, tuple(leaf.shape)))
    offset += -(-leaf.size // FLOAT_ALIGN) * FLOAT_ALIGN
  return tuple(places)


def _pack_floats(places: tuple, leaves: list) -> jax.Array:
  """The read leaves as one float32 array (``FastPlan.read_floats``; zeros between)."""
  parts = []
  for (offset, _), leaf, end in zip(places, leaves, [p[0] for p in places[1:]] + [None]):
    flat = leaf.ravel()
    pad = 0 if end is None else end - offset - flat.size
    parts.extend([flat, jnp.zeros((pad,), jnp.float32)] if pad else [flat])
  return jnp.concatenate(parts)


def _unpack_floats(places: tuple, packed: jax.Array) -> list:
  return [packed[offset:offset + math.prod(shape)].reshape(shape) for offset, shape in places]


def _stand_in(leaf) -> Any:
  """What stands for a model-state leaf ``act`` does not read: a zero of its shape."""
  if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
    data = jax.random.key_data(leaf)
    return ("key", data.shape, jax.random.key_impl(leaf))
  return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)


def _model_from(plan: FastPlan, read):
  """The model state ``act`` sees inside ``act_only``: real leaves where it reads
  (``read``: a list of them, or them packed, see ``FastPlan.read_floats``)."""
  if plan.read_floats is not None:
    read = _unpack_floats(plan.read_floats, read)
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
    return np.zeros((n,) + tuple(space.shape), DTYPES[space_kind(space)])

  raw_space = rt.adapters.raw_space
  named = named_spaces(raw_space)
  raw = raw_leaf(raw_space) if named is None else {k: raw_leaf(v) for k, v in named.items()}
  out = (state.obs, state.action, state.extras)
  key_data = jax.random.key_data(state.key)
  return interaction.FastLayout(interaction.Packing.of(raw), interaction.Packing.of(out),
                                tuple(key_data.shape), jax.random.key_impl(state.key))


def _action_columns(state: AgentState, layout: interaction.FastLayout) -> tuple:
  out = layout.out
  first = len(jax.tree.leaves(state.obs))
  names = sorted(state.action) if isinstance(state.action, dict) else [None]
  return tuple((name, out.offsets[first + j], out.offsets[first + j + 1],
                out.shapes[first + j], out.dtypes[first + j])
               for j, name in enumerate(names))


# ---------------------------------------------------------------- programs
#
# Cached on the runtime (``Runtime.memo``, keyed by the plan); each closes over the
# adapters, parts and plan, never the runtime.


# The act programs are lowered with JAX's random hash unrolled: JAX's CPU lowering keeps its
# five rounds in a loop, which in a program as small as one act costs more than the rest of
# the policy (measured: 2-2.5 µs of a ~25 µs act + observe). Same bits either way; a JAX
# where the swap does not work lowers them its own way (``jax_internals.lower_unrolled``).
unrolled_threefry = jax_internals.unrolled_threefry


def _lowered_unrolled(program, *args):
  """``program`` (a ``jax.jit``) once lowered for arguments like ``args`` with the hash
  unrolled: its first call with such arguments finds that lowering in JAX's cache."""
  return jax_internals.lower_unrolled(program, *args)


def _act_only_program(adapters: Adapters, parts: AgentParts, plan: FastPlan, deterministic: bool):
  """``(read, pstate, xstate, words) -> (pstate, xstate, words)``, or without the
  preprocessing and exploration states when they are empty (an argument costs
  microseconds even when it holds no arrays)."""
  def run(read, pstate, xstate, words):
    return interaction.act_only(parts, plan.layout, _model_from(plan, read), pstate,
                                xstate, words, deterministic=deterministic)
  if plan.carries:
    return programs.jit_now(run, "long", donate_argnums=(1, 2))
  n = parts.num_streams
  return programs.jit_now(lambda read, words: run(read, adapters.preprocess_init(n),
                                                  adapters.explore_init(n), words)[2],
                          "long")


def _commit_rows_program(parts: AgentParts, plan: FastPlan):
  return programs.jit_now(functools.partial(interaction.commit_rows, parts, plan.layout),
                          "long", donate_argnums=0)


def _key_chain_program(plan: FastPlan, steps: int):
  return jax.jit(functools.partial(interaction.key_chain, plan.layout, steps=steps))


def _pack_last_program(plan: FastPlan):
  return jax.jit(lambda obs, action, extras: plan.layout.out.pack((obs, action, extras)))


# ---------------------------------------------------------------- the host side


class DeferredCommits:
  """The host side of the fast path: acts whose transitions the model has not stored yet.

  Holds up to ``depth + 1`` acts (``uint32[N, W]`` outputs of ``act_only`` each) with what
  ``observe`` said after them; act ``j`` and the next state from act ``j + 1`` form a
  transition. ``sync`` stores the complete ones and writes the last act, the key and the
  timestep into the device state, which is then exactly the fused path's. The key stream
  and the timestep advance on the host meanwhile (the act call gets them in its input).
  """

  # a commit call costs ~0.15-0.5 ms on 2 cores (PPO 2x64), mostly fixed (the donated
  # state): 4096 transitions a call make that ~0.13 µs a step (1024: ~0.35 µs)
  MAX_DEPTH = 4096  # transitions stored per commit call
  MAX_BYTES = 8 << 20  # ... unless that many acts would take more memory (images)
  KEY_STEPS = 1024  # key-stream steps computed per call (~0.1 µs a step, unrolled hash)

  def __init__(self, rt: Runtime, plan: FastPlan):
    n, layout = rt.parts.num_streams, plan.layout
    self.rt, self.plan, self.n = rt, plan, n
    act_bytes = 4 * n * max(layout.out.width, 1)
    self.depth = int(np.clip(self.MAX_BYTES // act_bytes - 1, 1, self.MAX_DEPTH))
    self.words = np.zeros((self.depth + 1, n, layout.out.width), np.uint32)
    self.word_rows = list(self.words)
    self.reward = np.zeros((self.depth, n), np.float32)
    self.terminal = np.zeros((self.depth, n), np.int32)
    self.reward1, self.terminal1 = self.reward[:, 0], self.terminal[:, 0]  # N == 1: scalars
    self.count = 0  # acts held (slot 0 may already be in the device state)
    self.dirty = False  # the device state lacks some held act or transition
    self.header = layout.header  # words before the per-stream rows
    self.inputs = np.zeros(layout.header + n * (2 + layout.raw.width), np.uint32)
    self.rows = self.inputs[layout.header:].reshape(n, 2 + layout.raw.width)
    self.rows[:, 0] = np.arange(n)  # stream indices: all streams, in order
    self.raw_columns = [self.rows[:, 2 + a:2 + b]
                        for a, b in zip(layout.raw.offsets, layout.raw.offsets[1:])]
    # one float state (the common case) is written as floats, without the loop over leaves
    self.one_float = None
    if layout.raw.treedef.num_leaves == 1 and layout.raw.dtypes[0] == np.float32:
      self.one_float = self.raw_columns[0].view(np.float32)
    self.header_words = self.inputs[:layout.header]  # views made once (act_one)
    self.obs_words = None if self.one_float is None else self.one_float[0]
    self.act_only = {}  # deterministic -> compiled act_only
    self.pack_last = rt.memo(("pack_last", plan), lambda: _pack_last_program(plan))
    self.commit_rows = rt.memo(("commit_rows", plan),
                               lambda: _commit_rows_program(rt.parts, plan))
    key_data = jax.ShapeDtypeStruct(plan.layout.key_shape, np.uint32)
    self.key_chain = rt.memo(("key_chain", plan, self.KEY_STEPS), lambda: _lowered_unrolled(
        _key_chain_program(plan, self.KEY_STEPS), key_data))
    self.key_data = rt.memo("key_data", lambda: jax.jit(jax.random.key_data))
    self.pack_read = None if plan.read_floats is None else rt.memo(
        ("pack_read", plan), lambda: jax.jit(functools.partial(_pack_floats, plan.read_floats)))
    self.scalar = None  # (words viewed as its word dtype, column, dtype): one scalar action
    if len(plan.actions) == 1 and plan.actions[0][0] is None and plan.actions[0][3] == ():
      _, column, _, _, dtype = plan.actions[0]
      wide = (dtype if dtype.itemsize == 4 and dtype != np.bool_ else
              np.dtype(np.float32 if np.issubdtype(dtype, np.floating) else np.int32))
      # ndarray.item(i, j, k) on a view made once: a tenth of indexing, .view and .item
      self.scalar = (self.words.view(wide), column, dtype)
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
    dropped). ``reset``, ``reward``, ``terminal``: per stream ``[N]``, or scalars when
    ``N == 1`` (the agent's single-stream path; a row write costs several scalar ones).
    Returns the state; ``last_action`` reads what it took."""
    count = self.count
    if commit == "none":
      if count > 1:  # transitions before the dropped act are still to be stored
        state = self.sync(state)
      count = 0
    else:
      if count == self.depth + 1 or count == 0:  # rare: tested inline, handled in a call
        state, count = self._make_room(state, count)
      if type(reward) is np.ndarray:
        self.reward[count - 1] = reward
        self.terminal[count - 1] = terminal
      else:
        self.reward1[count - 1] = reward
        self.terminal1[count - 1] = terminal
    self.count = count
    state, words = self._act_only(state, obs, reset, deterministic)
    self.word_rows[count][...] = words  # a view made once: less than self.words[count]
    self.count = count + 1
    self.dirty = True
    return state

  def act_one(self, state: AgentState, obs: np.ndarray, reset: bool, reward, terminal,
              direct: bool, deterministic: bool):
    """``act`` then ``last_action(False)`` for one stream with one float vector state
    ``obs`` (``one_float``) and one scalar action (``scalar``): the agent's single-stream
    path (``Agent._act_one``), all in one method (a Python call, a numpy view or a slice
    write costs 0.05-0.2 µs each, as much as a step's compute on this path).
    ``direct``: commit 'direct' with ``reward``/``terminal``, else 'none'. Returns
    ``(state, action)``."""
    count = self.count
    if direct:
      if count == self.depth + 1 or count == 0:
        state, count = self._make_room(state, count)
      self.reward1[count - 1] = reward
      self.terminal1[count - 1] = terminal
    else:
      if count > 1:  # transitions before the dropped act are still to be stored
        state = self.sync(state)
      count = 0
    self.count = count
    self.header_words[...] = self._header_row(state)
    self.inputs[self.header + 1] = reset
    self.obs_words[...] = obs
    state, words = self._call_act(state, deterministic)
    self.clock += 1
    self.word_rows[count][...] = np.asarray(words)
    self.count = count + 1
    self.dirty = True
    typed, column, dtype = self.scalar
    value = typed.item(count, 0, column)
    return state, (bool(value) if dtype == np.bool_ else value)

  def _make_room(self, state: AgentState, count: int) -> tuple[AgentState, int]:
    """Before a 'direct' commit: stores the held rows when they are full, and puts the
    previous act in row 0 when it is only in the device state. Returns ``(state, count)``:
    the rows now held, the previous act's last."""
    if count == self.depth + 1:
      state = self.sync(state)
      count = self.count
    if count == 0:  # the previous act is only in the device state
      self.words[0] = np.asarray(self.pack_last(state.obs, state.action, state.extras))
      count = 1
    return state, count

  def _act_only(self, state: AgentState, obs, reset, deterministic: bool):
    self.header_words[...] = self._header_row(state)
    if type(reset) is np.ndarray:
      self.rows[:, 1] = reset
    else:
      self.inputs[self.header + 1] = reset
    if self.one_float is None:
      leaves = [obs[k] for k in sorted(obs)] if isinstance(obs, dict) else (obs,)
      for columns, leaf in zip(self.raw_columns, leaves):  # sorted keys: the pytree order
        columns[...] = interaction.host_words(leaf)
    elif obs.ndim == 1:  # one stream's vector state (the agent's single-stream path)
      self.one_float[0] = obs
    else:
      self.one_float[...] = obs if obs.ndim == 2 else obs.reshape(self.n, -1)
    state, words = self._call_act(state, deterministic)
    self.clock += self.n
    return state, np.asarray(words)

  def _header_row(self, state: AgentState):
    """The next act's keys and timestep words (``KEY_STEPS`` made per refill)."""
    pos = self.key_pos
    if self.headers is None or pos == self.KEY_STEPS:
      self._next_headers(state)
      pos = 0
    self.key_pos = pos + 1
    return self.headers[pos]

  def _call_act(self, state: AgentState, deterministic: bool):
    """The compiled ``act_only`` on ``self.inputs`` (filled by the caller); returns the
    state with its preprocessing/exploration carries advanced and the output words."""
    read = self.read
    if read is None:
      read = self.read = self.read_now(state)
    fn = self.act_only.get(deterministic) or self._act_only_fn(deterministic, read, state)
    if self.plan.carries:
      pstate, xstate, words = fn(read, state.preprocess, state.explore, self.inputs)
      return state._replace(preprocess=pstate, explore=xstate), words
    return state, fn(read, self.inputs)

  def read_now(self, state: AgentState):
    """The model-state leaves ``act_only`` reads: a list, or packed into one array
    (``FastPlan.read_floats``; once per commit or update, not per act)."""
    leaves = jax.tree.leaves(state.model)
    read = [leaves[i] for i in self.plan.reads]
    return read if self.pack_read is None else self.pack_read(read)

  def _act_only_fn(self, deterministic: bool, read: list, state: AgentState):
    rt, plan = self.rt, self.plan
    args = (read, state.preprocess, state.explore) if plan.carries else (read,)
    fn = rt.memo(("act_only", plan, deterministic), lambda: _lowered_unrolled(
        _act_only_program(rt.adapters, rt.parts, plan, deterministic), *args, self.inputs))
    self.act_only[deterministic] = fn
    return fn

  def _next_headers(self, state: AgentState) -> None:
    """Keys and timesteps of the next ``KEY_STEPS`` acts, in one call."""
    if self.clock is None:
      self.clock = int(np.asarray(state.timestep))
    base = self._key_now(state)
    chain, sub = self.key_chain(base)
    clocks = self.clock + self.n * np.arange(self.KEY_STEPS, dtype=np.int64)
    self.headers = np.concatenate([np.asarray(sub), clocks[:, None].astype(np.uint32)], 1)
    self.keys, self.key_base, self.key_pos = np.asarray(chain), base, 0

  def _key_now(self, state: AgentState) -> np.ndarray:
    """Key data after the acts so far."""
    if self.keys is None:
      return np.asarray(self.key_data(state.key))
    return self.keys[self.key_pos - 1] if self.key_pos else self.key_base

  # ---------------------------------------------------------------- committing

  def sync(self, state: AgentState) -> AgentState:
    """Stores the complete transitions held here and brings the device state up to date;
    keeps the last act (as slot 0) for the transition its observe will complete."""
    if not self.dirty:
      return state
    last = self.count - 1
    # copies: the call may still read its inputs after returning (async dispatch)
    state = self.commit_rows(
        state, self.words.copy(), self.reward.copy(), self.terminal.copy(), np.int32(last),
        self.idx, self._key_now(state).copy(), np.int32(self.clock))
    self.words[0] = self.words[last]
    self.count = 1
    self.dirty = False
    self.read = None  # the call donated the state: its arrays are new
    return state

  def last_action(self, batched: bool):
    """The action of the last ``act`` as ``Adapters.to_user`` returns it."""
    last = self.count - 1
    if self.scalar is not None and not batched:  # one scalar action: no arrays to build
      typed, column, dtype = self.scalar
      value = typed.item(last, 0, column)
      return bool(value) if dtype == np.bool_ else value
    words = self.words[last]
    values = {}
    for name, a, b, shape, dtype in self.plan.actions:
      value = interaction.host_leaf(words[:, a:b], shape, dtype)
      if not batched:
        value = value[0]
      values[name] = value.item() if value.ndim == 0 else value.copy()  # not a view
    return values[None] if None in values else values
