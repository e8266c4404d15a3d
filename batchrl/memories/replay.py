"""The replay memory: a fixed-capacity circular buffer of ``[rows, width]`` items as a pytree.

See ``batchrl.memories`` for the API. Here: the ``Memory`` description (static, hashable, so
it can sit in a jitted closure), its state (``MemoryState``, plain arrays: it lives inside an
agent's state, is checkpointed with it and ``vmap``-s over seeds), writing, sampling (uniform,
windows, proportional) and the size check made before anything is allocated.

Why ``[rows, width]``: one ``add`` writes one row of ``width`` items, the transitions of
``width`` environments (or streams) at the same step. A column is then one stream in time
order, so windows of consecutive steps (n-step returns, sequences for recurrent networks)
are plain ``rows .. rows + L`` reads in one column, with no per-item links.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from batchrl.errors import UserInputError, did_you_mean
from batchrl.memories import prioritized as pr

MEMORY_TYPES = ("replay", "sequential", "prioritized_replay", "naive_prioritized_replay")
PRIORITIZED_TYPES = ("prioritized_replay", "naive_prioritized_replay")


class MemorySpecError(UserInputError):
  """A memory that cannot be built: unknown type, bad capacity or options."""


class MemoryCapacityError(MemorySpecError):
  """The memory would not fit in the memory available; the message gives the bytes needed."""


class MemoryState(NamedTuple):
  """What a memory holds; a pytree of arrays.

  items: the stored pytree, every leaf ``[rows, width, ...]``.
  head: ``int32[]`` the row the next ``add`` writes (the oldest row once full).
  filled: ``int32[]`` rows holding data (``<= rows``).
  priorities: ``SumTree`` (prioritized_replay), ``float32[rows * width]`` (naive), or ``()``.
    Stored priorities are ``(|error| + prioritization_constant) ** prioritization_weight``.
  max_priority: ``float32[]`` largest ``|error| + constant`` seen (new items get it, powered).

  Until the ring wraps, the rows past ``filled`` hold the zeros ``init`` wrote and the items
  there priority 0 (sum tree leaves 0, its min heap's ``inf``): a checkpoint stores what was
  written and puts those back (``batchrl.checkpoint`` cuts each big leaf where the rest
  equals its last element), so a 1M memory holding 20k transitions is saved as 20k.
  """

  items: Any
  head: jax.Array
  filled: jax.Array
  priorities: Any
  max_priority: jax.Array


class Sample(NamedTuple):
  """A sampled batch. ``index`` (flat ``row * width + column``) feeds ``update_priorities``.

  items: the items, leaves ``[K, ...]`` (single items) or ``[K, L, ...]`` (windows).
  index: ``int32[K]`` flat index of each item (of each window's first item).
  weight: ``float32[K]`` importance weights in ``(0, 1]`` (1 for uniform memories).
  mask: ``bool[K]`` (all True for single items) or ``bool[K, L]``: step ``l`` of a window
    holds data written after its first item (False past the newest row).
  """

  items: Any
  index: jax.Array
  weight: jax.Array
  mask: jax.Array


def _positive_int(name: str, value) -> None:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
    raise MemorySpecError(f"memory {name} must be a positive int, got {value!r}.")


@dataclasses.dataclass(frozen=True)
class Memory:
  """A memory's static description; its methods are pure functions of a ``MemoryState``.

  Attributes:
    type: one of ``MEMORY_TYPES``.
    capacity: items it holds; rounded down to whole rows of ``width`` (``num_items``).
    width: items per ``add`` (environments or streams written together).
    prioritization_weight: alpha, priorities are ``(|error| + constant) ** alpha``.
    prioritization_constant: added to ``|error|`` so no item's priority drops to 0.
    beta_initial, beta_final, beta_steps: importance-weight exponent, annealed linearly from
      ``beta_initial`` to ``beta_final`` over ``beta_steps`` (the ``step`` given to
      ``sample``); ``beta_steps=None`` keeps ``beta_initial``.
    sequence_length: 'sequential' only: the window length ``sample`` returns.
  """

  type: str = "replay"
  capacity: int = 100_000
  width: int = 1
  prioritization_weight: float = 0.6
  prioritization_constant: float = 1e-6
  beta_initial: float = 0.4
  beta_final: float = 1.0
  beta_steps: int | None = None
  sequence_length: int | None = None

  def __post_init__(self):
    if self.type not in MEMORY_TYPES:
      hint = did_you_mean(self.type, MEMORY_TYPES)
      raise MemorySpecError(f"unknown memory type {self.type!r}{hint}. Valid types: "
                            f"{', '.join(MEMORY_TYPES)}.")
    _positive_int("capacity", self.capacity)
    _positive_int("width", self.width)
    if self.capacity < self.width:
      raise MemorySpecError(f"memory capacity ({self.capacity}) must hold at least one row of "
                            f"width {self.width} items (one per environment/stream).")
    if self.prioritization_weight < 0 or self.prioritization_constant < 0:
      raise MemorySpecError("prioritization_weight and prioritization_constant must be >= 0, "
                            f"got {self.prioritization_weight!r}, "
                            f"{self.prioritization_constant!r}.")
    for name in ("beta_initial", "beta_final"):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise MemorySpecError(f"memory {name} must be in [0, 1], got {getattr(self, name)!r}.")
    if self.beta_steps is not None:
      _positive_int("beta_steps", self.beta_steps)
    if self.type == "sequential":
      _positive_int("sequence_length", self.sequence_length)
      if self.sequence_length > self.rows:
        raise MemorySpecError(f"sequence_length ({self.sequence_length}) exceeds the rows the "
                              f"memory holds ({self.rows} = capacity // width).")
    elif self.sequence_length is not None:
      raise MemorySpecError("sequence_length applies to the 'sequential' memory only, got "
                            f"it for {self.type!r}.")

  # ------------------------------------------------------------------ sizes

  @property
  def rows(self) -> int:
    return self.capacity // self.width

  @property
  def num_items(self) -> int:
    return self.rows * self.width

  @property
  def prioritized(self) -> bool:
    return self.type in PRIORITIZED_TYPES

  def nbytes(self, item) -> int:
    """Bytes the state takes for items shaped like ``item`` (one item, no batch axes)."""
    per_item = item_nbytes(item)
    extra = 0
    if self.type == "prioritized_replay":
      extra = 2 * 2 * pr.tree_size(self.num_items) * 4
    elif self.type == "naive_prioritized_replay":
      extra = self.num_items * 4
    return self.num_items * per_item + extra

  # ------------------------------------------------------------------ state

  def init(self, item) -> MemoryState:
    """An empty memory for items shaped like ``item`` (a pytree of arrays or
    ``jax.ShapeDtypeStruct`` for ONE item). Checks the size against the memory available
    first (``MemoryCapacityError`` names the bytes needed)."""
    check_fits(self.nbytes(item), f"{self.type} memory of {self.num_items} items "
               f"({item_nbytes(item)} bytes each)")
    items = jax.tree.map(
        lambda x: jnp.zeros((self.rows, self.width) + tuple(np.shape(x)), _dtype(x)), item)
    if self.type == "prioritized_replay":
      priorities = pr.tree_init(self.num_items)
    elif self.type == "naive_prioritized_replay":
      priorities = jnp.zeros((self.num_items,), jnp.float32)
    else:
      priorities = ()
    zero = jnp.int32(0)
    return MemoryState(items, zero, zero, priorities, jnp.float32(1.0))

  def size(self, state: MemoryState) -> jax.Array:
    """``int32[]`` items stored."""
    return state.filled * self.width

  # ------------------------------------------------------------------ writing

  def add(self, state: MemoryState, row) -> MemoryState:
    """Writes one row (leaves ``[width, ...]``) over the oldest; new items get the largest
    priority seen so far (so each is likely drawn at least once)."""
    items = jax.tree.map(
        lambda column, x: jax.lax.dynamic_update_index_in_dim(
            column, jnp.asarray(x).astype(column.dtype), state.head, 0),
        state.items, row)
    index = state.head * self.width + jnp.arange(self.width, dtype=jnp.int32)
    fresh = jnp.full((self.width,), self._powered(state.max_priority), jnp.float32)
    state = self._set_priorities(state, index, fresh)
    return state._replace(items=items, head=(state.head + 1) % self.rows,
                          filled=jnp.minimum(state.filled + 1, self.rows))

  def add_rows(self, state: MemoryState, rows) -> MemoryState:
    """Writes ``T`` rows (leaves ``[T, width, ...]``) in order, as ``T`` calls of ``add``."""
    return jax.lax.scan(lambda s, row: (self.add(s, row), None), state, rows)[0]

  # ------------------------------------------------------------------ sampling

  def sample(self, state: MemoryState, key: jax.Array, batch_size: int,
             step: jax.Array | int = 0) -> Sample:
    """``batch_size`` items: uniform ('replay'), windows of ``sequence_length``
    ('sequential') or proportional to priority with importance weights annealed by ``step``
    (prioritized types). Sample only a memory that holds at least one item."""
    if self.type == "sequential":
      return self.sample_sequences(state, key, batch_size, self.sequence_length)
    if self.type == "replay":
      index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(self.size(state), 1))
      weight = jnp.ones((batch_size,), jnp.float32)
    else:
      index, weight = self._sample_prioritized(state, key, batch_size, step)
    return Sample(self.gather(state, index), index.astype(jnp.int32), weight,
                  jnp.ones((batch_size,), jnp.bool_))

  def _sample_prioritized(self, state, key, batch_size, step):
    if self.type == "prioritized_replay":
      index = pr.tree_sample(state.priorities, key, batch_size)
      leaves, low = state.priorities.leaves(), state.priorities.min
    else:
      index = pr.naive_sample(state.priorities, key, batch_size)
      leaves, low = state.priorities, pr.naive_min(state.priorities)
    weight = pr.importance_weights(leaves[index], low, self.beta(step))
    return index, weight

  def beta(self, step: jax.Array | int) -> jax.Array:
    """The importance-weight exponent at ``step``."""
    if self.beta_steps is None:
      return jnp.float32(self.beta_initial)
    fraction = jnp.clip(jnp.asarray(step, jnp.float32) / self.beta_steps, 0.0, 1.0)
    return jnp.float32(self.beta_initial) + (self.beta_final - self.beta_initial) * fraction

  def gather(self, state: MemoryState, index: jax.Array):
    """Items at flat indices ``index[K]`` -> leaves ``[K, ...]``."""
    row, column = index // self.width, index % self.width
    return jax.tree.map(lambda x: x[row, column], state.items)

  def windows(self, state: MemoryState, index: jax.Array, length: int):
    """Windows of ``length`` consecutive rows in the column of each ``index[K]``.

    Returns ``(items, mask)``: leaves ``[K, length, ...]`` and ``bool[K, length]``, where
    ``mask[k, l]`` says row ``l`` of the window was written after the first one (it is not
    past the newest row). Episode ends inside a window are the caller's business (e.g.
    ``batchrl.memories.transition_window_mask``).
    """
    row, column = index // self.width, index % self.width
    newest = (state.head - 1) % self.rows
    ahead = (newest - row) % self.rows  # rows written after `row`
    steps = jnp.arange(length, dtype=jnp.int32)
    rows = (row[:, None] + steps) % self.rows
    items = jax.tree.map(lambda x: x[rows, column[:, None]], state.items)
    return items, steps[None, :] <= ahead[:, None]

  def sample_sequences(self, state: MemoryState, key: jax.Array, batch_size: int,
                       length: int) -> Sample:
    """``batch_size`` windows of ``length`` rows, starts uniform among those whose window
    lies inside the stored rows (all of them while fewer than ``length`` rows are stored)."""
    oldest = jnp.where(state.filled >= self.rows, state.head, 0)
    starts = jnp.maximum(state.filled - length + 1, 1)
    flat = jax.random.randint(key, (batch_size,), 0, starts * self.width)
    row = (oldest + flat // self.width) % self.rows
    index = (row * self.width + flat % self.width).astype(jnp.int32)
    items, mask = self.windows(state, index, length)
    return Sample(items, index, jnp.ones((batch_size,), jnp.float32), mask)

  # ------------------------------------------------------------------ priorities

  def _powered(self, raw: jax.Array) -> jax.Array:
    return jnp.power(jnp.asarray(raw, jnp.float32), self.prioritization_weight)

  def _set_priorities(self, state: MemoryState, index, values) -> MemoryState:
    if self.type == "prioritized_replay":
      return state._replace(priorities=pr.tree_update(state.priorities, index, values))
    if self.type == "naive_prioritized_replay":
      return state._replace(priorities=state.priorities.at[index].set(values))
    return state

  def priorities_of(self, state: MemoryState) -> jax.Array:
    """``float32[num_items]`` stored priorities (zeros for uniform memories)."""
    if self.type == "prioritized_replay":
      return state.priorities.leaves()[:self.num_items]
    if self.type == "naive_prioritized_replay":
      return state.priorities
    return jnp.zeros((self.num_items,), jnp.float32)

  def update_priorities(self, state: MemoryState, index: jax.Array, errors: jax.Array,
                        active: jax.Array | bool = True) -> MemoryState:
    """Sets the priorities of items ``index[K]`` from their errors (``|errors[K]|``, e.g.
    TD errors); a no-op for uniform memories, and where ``active`` is False (so it can run
    unconditionally after an update that may have been skipped)."""
    if not self.prioritized:
      return state
    raw = jnp.abs(jnp.asarray(errors, jnp.float32)) + self.prioritization_constant
    current = self.priorities_of(state)[index]
    values = jnp.where(active, self._powered(raw), current)
    state = self._set_priorities(state, index, values)
    seen = jnp.max(jnp.where(active, raw, 0.0))
    return state._replace(max_priority=jnp.maximum(state.max_priority, seen))

  def probabilities(self, state: MemoryState) -> jax.Array:
    """``float32[num_items]`` probability of each item under ``sample`` (single items)."""
    if self.prioritized:
      priorities = self.priorities_of(state)
      return priorities / jnp.maximum(jnp.sum(priorities), 1e-38)
    stored = jnp.arange(self.num_items) < self.size(state)
    return stored / jnp.maximum(self.size(state), 1).astype(jnp.float32)


def concat_samples(*samples: Sample) -> Sample:
  """One batch from several samples (e.g. online and demonstration memories), in order.

  The ``index`` entries keep pointing into their own memories: split errors back by the
  (static) batch sizes before ``update_priorities`` of each memory.
  """
  if not samples:
    raise ValueError("concat_samples needs at least one Sample.")
  return jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *samples)


# ------------------------------------------------------------------ sizes and budget


def _dtype(x):
  return x.dtype if hasattr(x, "dtype") else jnp.asarray(x).dtype


def item_nbytes(item) -> int:
  """Bytes of one item (a pytree of arrays or ``ShapeDtypeStruct``)."""
  return int(sum(math.prod(np.shape(x)) * np.dtype(_dtype(x)).itemsize
                 for x in jax.tree.leaves(item)))


def available_bytes() -> tuple[int | None, str]:
  """``(bytes, where)`` free on the default device: accelerator memory not in use, or the
  host's available memory (``MemAvailable``) for CPU. ``None`` when it cannot be read."""
  device = jax.devices()[0]
  if device.platform != "cpu":
    stats = device.memory_stats() or {}
    if "bytes_limit" in stats:
      return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0)), str(device)
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024, "host memory (MemAvailable)"
  except OSError:
    pass
  try:
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "host memory"
  except (ValueError, OSError, AttributeError):
    return None, "unknown"


def _human(n: float) -> str:
  for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
    if n < 1024 or unit == "TiB":
      return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
    n /= 1024
  return f"{n} B"  # pragma: no cover


def check_fits(nbytes: int, what: str) -> None:
  """Raises ``MemoryCapacityError`` when ``nbytes`` exceed the memory available now."""
  free, where = available_bytes()
  if free is not None and nbytes > free:
    raise MemoryCapacityError(
        f"the {what} needs {nbytes} bytes ({_human(nbytes)}), but only {free} bytes "
        f"({_human(free)}) are available in {where}. Lower memory_capacity (or the number "
        "of environments/seeds).")


# ------------------------------------------------------------------ from a spec

_SPEC_KEYS = ("type", "capacity", "prioritization_weight", "prioritization_constant",
              "beta_initial", "beta_final", "beta_steps", "sequence_length")


def make_memory(spec: Any = "replay", *, capacity: int | None = None, width: int = 1,
                **defaults) -> Memory:
  """A ``Memory`` from a TensorForce-style spec: a type name, or a dict with ``type`` and
  options (``capacity``, ``prioritization_weight``, ``prioritization_constant``,
  ``beta_initial``, ``beta_final``, ``beta_steps``, ``sequence_length``).

  ``capacity`` and ``defaults`` fill what the spec leaves out; unknown keys and types are
  errors naming the closest valid one.
  """
  if isinstance(spec, str):
    spec = {"type": spec}
  if not isinstance(spec, dict):
    raise MemorySpecError(f"memory must be a type name ({', '.join(MEMORY_TYPES)}) or a dict "
                          f"with 'type', got {spec!r}.")
  for key in list(spec) + list(defaults):
    if key not in _SPEC_KEYS:
      raise MemorySpecError(f"unknown memory key {key!r}{did_you_mean(key, _SPEC_KEYS)}. "
                            f"Valid keys: {', '.join(_SPEC_KEYS)}.")
  values = {"type": "replay", **defaults}
  if capacity is not None:
    values["capacity"] = capacity
  values.update(spec)
  return Memory(width=width, **values)
