"""The host-side bookkeeping of ``batchrl.Agent``'s streams, and the plan of each act.

Per stream: whether it acted and awaits ``observe``, whether it holds an observed step not
yet handed to the model (its reward and terminal), whether its next act starts an episode,
how many steps wait in staging, how long its episode runs. An act hands the held steps to
the model one of three ways (``plan_commit``): 'none' (nothing held), 'direct' (every
stream acts, in order, each holding one step) or 'staged' (some streams act: their steps
wait in per-stream slots until every stream has one, then a row of them is stored). For
models with a fixed update period the rows are counted here (``plan_update``), so a step
knows without a ``lax.cond`` whether its update is due.

Everything a checkpoint keeps of this is listed once, in ``COUNTS`` and ``PER_STREAM``
(``Streams.saved`` / ``Streams.restore``).

The scalar path: with one stream, ``act_one`` and ``observe_one`` do the same bookkeeping
with scalar reads and writes (a numpy slice, mask or reduction costs ~0.2-1 µs, an element
~0.04 µs), and decline (None), having changed nothing, where the general path must check,
raise or plan. Rewards and terminals may be Python or numpy scalars or 0-d arrays
(``scalar_number``, ``terminal_code``): each is stored as the general path stores it.
"""
from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from batchrl import measured
from batchrl.agent.errors import AgentUsageError, StreamAheadError
from batchrl.agent.runtime import STAGE_DEPTH, Runtime
from batchrl.agent.states import all_finite

# What a checkpoint keeps (``Agent.save``'s counters): counts (0 where a checkpoint lacks
# one), then per-stream arrays with their dtypes (kept as they are where it lacks one);
# ``rows`` (an int, or None: unknown) is saved after them.
COUNTS = ("timesteps", "episodes", "updates")
PER_STREAM = (("held", np.bool_), ("reward", np.float32), ("terminal", np.int32),
              ("start", np.bool_), ("staged", np.int64), ("episode_steps", np.int64))

SCALAR_CODES = {False: 0, True: 1, 2: 2}  # also matches 0, 1, 0.0, numpy scalars (==, hash)
F32 = np.dtype(np.float32)
F32_LIMIT = 2.0 ** 128 - 2.0 ** 103  # the float32 rounding of a number below this is finite


class Streams:
  """The per-stream arrays ``[N]`` and counters of one agent (see the module docstring).

  ``next``: stream -> the next state given for its held cut step (``observe(...,
  next_states=...)``); ``updated``: streams whose last act ran an update (rarely any);
  ``rows``: rows stored since the last update (None: unknown, the model decides).
  """

  __slots__ = ("n", "limit", "period", "acted", "next", "updated", "rows", "ranges",
               *COUNTS, *(name for name, _ in PER_STREAM))

  def __init__(self, n: int, limit: int | None, period: int | None):
    self.n, self.limit, self.period = n, limit, period
    self.acted = np.zeros(n, bool)
    for name in COUNTS:
      setattr(self, name, 0)
    for name, dtype in PER_STREAM:
      setattr(self, name, np.zeros(n, dtype))
    self.start[:] = True  # the first act of each stream starts an episode
    self.next: dict[int, Any] = {}
    self.updated: set[int] = set()
    self.rows = 0
    self.ranges: dict[int, tuple] = {}  # k -> streams 0..k-1 (see first)

  # ------------------------------------------------------------------------ checkpoints

  def saved(self) -> dict:
    counters = {name: getattr(self, name) for name in COUNTS}
    counters.update((name, getattr(self, name).tolist()) for name, _ in PER_STREAM)
    counters["rows"] = self.rows
    return counters

  def restore(self, counters: dict) -> None:
    """As ``saved`` gave ``counters``; an un-observed act and given next states are
    dropped (they belong to the state just replaced)."""
    for name in COUNTS:
      setattr(self, name, int(counters.get(name, 0)))
    for name, dtype in PER_STREAM:
      if name in counters:
        setattr(self, name, np.asarray(counters[name], dtype))
    self.acted[:] = False
    self.next.clear()
    self.rows = counters.get("rows")

  def reset(self) -> None:
    """``Agent.reset``: an un-observed act is dropped; a step observed without a terminal
    is kept as cut short (terminal 2)."""
    self.acted[:] = False
    cut = self.held & (self.terminal == 0)
    self.terminal[cut] = 2
    self.start[:] = True
    self.episode_steps[:] = 0

  # ------------------------------------------------------------------------ selecting

  def select(self, parallel, k: int, batched: bool, given: str = "states", shape=None):
    """``(idx, rows)``: the ``int32[k]`` stream indices of an act or observe call, and what
    selects them in the per-stream arrays: a slice when they are ``0..k-1`` (numpy slices
    cost a fraction of index arrays). ``given`` and ``shape`` name what the batch of ``k``
    was (``states``, ``rewards``...) in the error for more than the agent's streams."""
    n = self.n
    if k <= n and (parallel is None or (batched and isinstance(parallel, list)
                                        and parallel == self.first(k)[1])):
      first = self.first(k)  # validated once, cached
      return first[0], first[2]
    if parallel is None:  # more than the agent's streams
      raise AgentUsageError(batch_mismatch(n, k, given, shape))
    idx = np.atleast_1d(np.asarray(parallel))
    if idx.dtype.kind not in "iu":
      raise AgentUsageError(f"parallel must be stream indices (ints), got {parallel!r}.")
    if not batched and idx.shape != (1,):
      raise AgentUsageError(f"one state was given, so parallel must be one index, got "
                            f"{parallel!r}.")
    if len(idx) != k:
      raise AgentUsageError(f"parallel lists {len(idx)} streams but {k} {given} were given.")
    values = idx.tolist()  # checked in Python: numpy's reductions cost more on small arrays
    if len(set(values)) != len(values):
      raise AgentUsageError(f"parallel has repeated streams: {parallel!r}.")
    if values and (min(values) < 0 or max(values) >= n):
      raise AgentUsageError(f"parallel index {max(values) if max(values) >= n else min(values)}"
                            f" is out of range: this agent has parallel_interactions={n} "
                            f"(streams 0..{n - 1}).")
    if values == self.first(k)[1]:
      return self.first(k)[0], self.first(k)[2]
    return idx.astype(np.int32), idx

  def first(self, k: int) -> tuple[np.ndarray, list, slice]:
    """Streams ``0..k-1`` as ``int32[k]`` (never written to), as a list and as a slice."""
    first = self.ranges.get(k)
    if first is None:
      first = self.ranges[k] = (np.arange(k, dtype=np.int32), list(range(k)), slice(0, k))
    return first

  # ------------------------------------------------------------------------ acting

  def begin_act(self, parallel, k: int, batched: bool, shape=None):
    """``(idx, rows, held)`` of an act of ``k`` streams (states of ``shape``, for errors),
    after checking that each observed its last act and has not run past the episode limit.
    ``held`` may be a view."""
    idx, rows = self.select(parallel, k, batched, "states", shape)
    acted = self.acted[rows]
    if _any(acted):
      raise AgentUsageError(f"act called twice for stream {int(idx[acted][0])} without "
                            "observe in between; call agent.observe(reward, terminal) after "
                            "each act.")
    limit = self.limit
    if limit is not None and _any(self.episode_steps[rows] >= limit):
      i = int(idx[self.episode_steps[rows] >= limit][0])
      raise AgentUsageError(f"stream {i} has run {limit} timesteps, max_episode_timesteps; "
                            "end the episode with observe(terminal=2) (cut short) at the "
                            "limit, or create the agent with a larger limit.")
    return idx, rows, self.held[rows]

  def plan_commit(self, idx: np.ndarray, held: np.ndarray, every: bool, rt: Runtime):
    """How this act hands held transitions to the model: ``(commit, slots, flush)`` with
    commit 'none', 'direct' or 'staged'. ``rt`` is asked only when staging whether its
    policy is recurrent (a carry cannot wait for the other streams)."""
    if not _any(held):
      return "none", None, 0
    if _all(held) and every and not _any(self.staged):
      return "direct", None, 0
    if rt.recurrent:
      raise AgentUsageError("A recurrent policy with parallel_interactions > 1 needs every "
                            "stream in each act call (parallel=list(range(N))), e.g. a "
                            "Runner with several environments.")
    counts = self.staged.copy()
    full = idx[held & (counts[idx] >= STAGE_DEPTH)]
    if len(full):
      lag = int(np.argmin(counts))
      raise StreamAheadError(f"stream {int(full[0])} is {STAGE_DEPTH} steps ahead of stream "
                             f"{lag}; the model learns from rows holding one step of every "
                             "stream, so step the streams evenly (ThreadedRunner waits).")
    slots = np.where(held, counts[idx], STAGE_DEPTH).astype(np.int32)  # non-held: dropped
    counts[idx[held]] += 1
    flush = int(counts.min())
    self.staged = counts - flush
    return "staged", slots, flush

  def plan_update(self, commit: str) -> str:
    """For models with a fixed period, count stored rows here so the step needs no cond."""
    period = self.period
    if commit != "direct" or period is None:
      if commit == "staged" and period is not None:
        self.rows = None  # rows flushed from staging update under cond: stop counting
      return "cond"
    if self.rows is None:
      return "cond"
    self.rows += 1
    if self.rows >= period:
      self.rows = 0
      return "now"
    return "store"

  def after_act(self, idx, rows, held, updated: bool) -> None:
    if self.next:  # first: ``held`` may be a view of ``self.held``
      for i in idx[held]:
        self.next.pop(int(i), None)
    self.acted[rows] = True
    self.held[rows] = False
    self.start[rows] = False
    if updated:
      self.updated.update(idx.tolist())
    elif self.updated:
      self.updated.difference_update(idx.tolist())
    self.timesteps += len(idx)

  # ------------------------------------------------------------------------ observing

  def begin_observe(self, reward, terminal, parallel):
    """``(idx, rows, rewards, terminals)`` of an ``observe`` call, checked: rewards
    float32 (one or ``[k]``), terminals one int code or ``int32[k]``, each stream acted."""
    if type(reward) is float:  # one stream's reward, the common case: no array needed
      rewards, batched = np.float32(reward), False
    else:
      rewards = rewards_array(reward)
      if rewards.ndim > 1:
        raise AgentUsageError(f"reward must be one value or a batch [k], got shape "
                              f"{rewards.shape}.")
      batched = rewards.ndim == 1
    terminals = terminal_codes(terminal)
    k = rewards.shape[0] if batched else 1
    if (parallel is None and not isinstance(terminals, int) and terminals.ndim == 1
        and len(terminals) > max(k, self.n)):
      raise AgentUsageError(batch_mismatch(self.n, len(terminals), "terminals",
                                           terminals.shape))
    idx, rows = self.select(parallel, k, batched, "rewards", rewards.shape)
    if not isinstance(terminals, int) and terminals.shape != (k,):
      if not batched:
        raise AgentUsageError(f"reward is one value but terminal has shape "
                              f"{terminals.shape}; give one terminal per reward.")
      raise AgentUsageError(f"terminal must be one value or {k} values (one per reward), got "
                            f"shape {terminals.shape}.")
    if not (all_finite(rewards) if batched else math.isfinite(rewards)):
      raise AgentUsageError(f"reward must be finite, got {reward!r}.")
    acted = self.acted[rows]
    if not _all(acted):
      raise AgentUsageError(f"observe called for stream {int(idx[~acted][0])} without an "
                            "act before it; call agent.act(states) first.")
    return idx, rows, rewards, terminals

  def observe(self, idx, rows, rewards, terminals) -> bool:
    """Records checked rewards and terminal codes; returns whether an update ran in the
    act of one of these streams (and counts it)."""
    self.acted[rows] = False
    self.held[rows] = True
    self.reward[rows] = rewards
    self.terminal[rows] = terminals
    self.episode_steps[rows] += 1
    self._end_episodes(idx, rows, terminals)
    updated = False
    if self.updated:
      streams = idx.tolist()
      updated = not self.updated.isdisjoint(streams)
      self.updated.difference_update(streams)
    if updated:
      self.updates += 1
    return updated

  def _end_episodes(self, idx, rows, terminals) -> None:
    if isinstance(terminals, int):
      if not terminals:
        return
      ended = rows
      self.episodes += len(idx)
    else:
      count = np.count_nonzero(terminals)
      if not count:
        return
      ended = idx[terminals != 0]
      self.episodes += count
    self.start[ended] = True
    self.episode_steps[ended] = 0

  # ------------------------------------------------------------------------ one stream

  def act_one(self, fast, state, states, shape: tuple, deterministic):
    """``Agent.act`` of the one stream on the fast path (``fast``: ``DeferredCommits``) for a
    float32 vector state of ``shape``: ``(state, action)``, or None, having changed nothing,
    for anything else (another state type, a NaN, an error to raise, an update due, a step
    waiting in staging or with a next state): the general path takes it."""
    if (type(states) is not np.ndarray or states.dtype is not F32 or states.shape != shape
        or self.acted[0] or self.staged[0] or self.next or fast.scalar is None):
      return None
    limit = self.limit
    if limit is not None and self.episode_steps[0] >= limit:
      return None
    # a float64 sum of float32 values is finite iff they all are (and never warns)
    if not math.isfinite(sum(states.tolist())):
      return None
    if self.held[0]:  # plan_commit: 'direct'; plan_update: 'store' unless an update is due
      rows = self.rows
      if rows is None or rows + 1 >= self.period:
        return None
      self.rows = rows + 1
      taken = fast.act_one(state, states, self.start[0], self.reward[0], self.terminal[0], True,
                           bool(deterministic))
    else:
      taken = fast.act_one(state, states, self.start[0], 0.0, 0, False, bool(deterministic))
    self.acted[0] = True  # after_act
    self.held[0] = False
    self.start[0] = False
    if self.updated:
      self.updated.discard(0)
    self.timesteps += 1
    return taken

  def observe_one(self, reward, terminal) -> bool | None:
    """``observe`` of the one stream for one number (a Python or numpy number, or a 0-d
    array) and one terminal (bool, 0/1/2, numpy or 0-d); None, having changed nothing, where
    the general path must check or raise. A value is stored as the general path stores it
    (float32 reward, int code)."""
    if type(reward) is not float:
      reward = scalar_number(reward)
      if reward is None:
        return None
    code = SCALAR_CODES.get(terminal) if type(terminal) is bool else terminal_code(terminal)
    # float32(reward) is finite (NaN fails both comparisons)
    if code is None or not -F32_LIMIT < reward < F32_LIMIT or not self.acted[0]:
      return None
    self.acted[0] = False
    self.held[0] = True
    self.reward[0] = reward
    self.terminal[0] = code
    if code:  # _end_episodes
      self.episodes += 1
      self.start[0] = True
      self.episode_steps[0] = 0
    else:
      self.episode_steps[0] += 1
    if self.updated and 0 in self.updated:
      self.updated.discard(0)
      self.updates += 1
      return True
    return False


# ---------------------------------------------------------------------------- helpers


def batch_mismatch(n: int, k: int, given: str, shape) -> str:
  """The error for a batch of ``k`` values (``given``: 'states', 'rewards', 'terminals'; of
  ``shape``) given to an agent of ``n < k`` streams without ``parallel=``."""
  one = given.removesuffix("s")
  acts_for = "one stream" if n == 1 else f"{n} streams"
  shown = f" (shape {tuple(shape)})" if shape is not None else ""
  fewer = f"one {one}" if n == 1 else f"at most {n} {given}"
  return (f"this agent acts for {acts_for} (parallel_interactions={n}) but got a batch of "
          f"{k} {given}{shown}; create it with parallel_interactions={k} (or pass {fewer}).")


def update_ran(commit: str, flush: int, update: str, flag) -> bool:
  """Whether a fused act ran an update; reads the device flag only where the model chose."""
  if commit == "none" or (commit == "staged" and flush == 0):
    return False
  if commit == "direct" and update != "cond":
    return update == "now"
  return bool(np.asarray(flag))


def one_stream_shape(raw_space) -> tuple | None:
  """The shape of the states ``Streams.act_one`` takes: a single float vector state of at
  most ``measured.ONE_STREAM_SIZE`` elements (None: every act takes the general path)."""
  if (isinstance(raw_space, gym.spaces.Box) and np.issubdtype(raw_space.dtype, np.floating)
      and len(raw_space.shape) == 1 and raw_space.shape[0] <= measured.ONE_STREAM_SIZE):
    return tuple(raw_space.shape)
  return None


# numpy's number types whose value a Python float (floats) or int (ints) holds exactly, so
# storing that stores what numpy's own cast to float32 would (np.float64 subclasses float but
# is not ``float``: types are matched exactly)
NUMPY_FLOATS = frozenset((np.float16, np.float32, np.float64))
NUMPY_INTS = frozenset((np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32))


def scalar_number(value) -> float | int | None:
  """One real number given as a Python int/float, a numpy number (what Gymnasium envs
  return) or a 0-d numeric array, as a Python number; None for anything else (a bool, a
  batch, a string: the general path checks those)."""
  kind = type(value)
  if kind is float or kind is int:
    return value
  if kind is np.ndarray and value.ndim == 0:
    value = value[()]  # its numpy scalar
    kind = type(value)
  if kind in NUMPY_FLOATS:
    return float(value)
  if kind in NUMPY_INTS:
    return int(value)
  return None


def terminal_code(terminal) -> int | None:
  """The code of one terminal (``SCALAR_CODES``: bools, 0/1/2, their numpy scalars and 0-d
  arrays); None for anything else (a batch, a bad value: the general path says which).
  Bools and ints are read by type: a numpy scalar's ``==`` and hash, which a dict lookup
  calls, cost microseconds."""
  kind = type(terminal)
  if kind is np.ndarray:
    if terminal.ndim:
      return None
    terminal = terminal[()]  # its numpy scalar
    kind = type(terminal)
  if kind is bool or kind is np.bool_:
    return 1 if terminal else 0
  if kind is int or kind in NUMPY_INTS:
    code = int(terminal)
    return code if 0 <= code <= 2 else None
  try:
    return SCALAR_CODES.get(terminal)  # floats 0.0/1.0/2.0, as the general path takes them
  except TypeError:  # unhashable: a list
    return None


def rewards_array(reward) -> np.ndarray:
  """``reward`` as float32, or an error that says it is the reward that is wrong (numpy's
  own says only that a string is not a float)."""
  try:
    return np.asarray(reward, np.float32)
  except (TypeError, ValueError):
    raise AgentUsageError(f"reward must be a number or a batch [k] of numbers, got "
                          f"{reward!r}.") from None


def terminal_codes(terminal) -> int | np.ndarray:
  """One terminal code (an int) or ``int32[k]``; anything but bools and 0/1/2 is an error."""
  try:
    return SCALAR_CODES[terminal]
  except (KeyError, TypeError):  # an array (unhashable) or a bad value
    pass
  codes = np.asarray(terminal)
  if codes.dtype == bool:
    codes = codes.astype(np.int32)
  elif codes.dtype.kind not in "iuf" or np.count_nonzero((codes != 0) & (codes != 1)
                                                          & (codes != 2)):
    raise AgentUsageError(f"terminal must be a bool or 0/1/2 (2 = cut short, bootstrap), "
                          f"got {terminal!r}.")
  return int(codes) if codes.ndim == 0 else codes.astype(np.int32)


# Host checks on every act/observe: np.count_nonzero instead of .any()/.all(), which go
# through numpy's reduction machinery and cost several times more on small arrays; one
# stream's flag is read directly.


def _any(mask: np.ndarray) -> bool:
  return bool(mask[0]) if mask.size == 1 else np.count_nonzero(mask) > 0


def _all(mask: np.ndarray) -> bool:
  return bool(mask[0]) if mask.size == 1 else np.count_nonzero(mask) == mask.size
