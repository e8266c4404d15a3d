"""Replay memories inside the compiled program: fixed capacity, circular, plain pytrees.

A memory is two things. ``Memory`` is its static description (type, capacity, width,
prioritization settings): a frozen, hashable dataclass whose methods are pure functions, so
it can live in a jitted closure. ``MemoryState`` is what it holds: arrays only, so it sits
inside an agent's state, runs in the fused training loop, is saved by
``batchrl.checkpoint`` with the agent and ``vmap``-s over seeds.

Types (TensorForce's names)::

    replay                    uniform sampling of single items
    sequential                uniform sampling of windows of ``sequence_length`` consecutive
                              steps of one stream (for recurrent networks)
    prioritized_replay        proportional prioritization through a sum tree: O(log N) per
                              draw, an item of priority 0 is never drawn (see
                              ``batchrl.memories.prioritized``), importance weights with an
                              annealed beta
    naive_prioritized_replay  the same probabilities, drawn in O(N) over the flat priority
                              array (TensorForce's simple variant; fine for small memories)

Layout: items are stored ``[rows, width]``. ``add`` writes one row of ``width`` items (one
per environment or stream, all at the same step) over the oldest row, so a column is one
stream in time order and windows are contiguous reads. ``capacity`` is in items and is
rounded down to whole rows (``Memory.num_items``). Flat item indices are
``row * width + column``.

API (``K`` = batch size, ``L`` = window length; every method is jit-able)::

    memory = make_memory("prioritized_replay", capacity=100_000, width=num_envs,
                         prioritization_weight=0.6, beta_steps=100_000)
    # or Memory(type=..., capacity=..., width=..., ...)
    state = memory.init(item)                 # item: ONE item (pytree of arrays or
                                              # ShapeDtypeStruct). Checks capacity x item
                                              # bytes against the free memory first
                                              # (MemoryCapacityError names the bytes needed).
    state = memory.add(state, row)            # row: leaves [width, ...]; new items get the
                                              # largest priority seen so far
    state = memory.add_rows(state, rows)      # [T, width, ...], as T adds
    memory.size(state)                        # int32[] items stored
    s = memory.sample(state, key, K, step)    # Sample(items [K, ...], index [K], weight [K],
                                              # mask [K]); 'sequential': [K, L, ...], mask
                                              # [K, L]. step anneals beta (prioritized).
    items, mask = memory.windows(state, s.index, L)   # windows starting at sampled items
                                              # (n-step returns); mask False past the newest row
    s = memory.sample_sequences(state, key, K, L)     # uniform windows from any memory
    state = memory.update_priorities(state, s.index, td_errors, active=ready)
                                              # priority (|e| + constant) ** alpha; a no-op
                                              # for uniform memories or where not active
    memory.probabilities(state)               # [num_items] draw probabilities (tests, plots)
    memory.priorities_of(state)               # [num_items] stored priorities

Transitions (what DQN, NAF and DQFD store) are ``TransitionItem(obs, action, reward,
terminated, truncated, next_obs)``; ``transition_window_mask(items, mask)`` cuts windows at
episode ends and wherever a step does not follow the previous one (its ``obs`` differs from
the previous ``next_obs``: a restarted env, the seam between imported chunks).

Importing: ``transitions_from_observations(observations)`` turns TensorForce observation
dicts (``state``, ``action``, ``reward``, ``terminal`` with 2 = truncated, ``internal``) or a
dict of arrays into a numpy ``TransitionItem`` ``[M, ...]``; ``import_transitions(memory,
state, items)`` writes them (agents convert states/actions to their stored form between the
two, e.g. ``batchrl.agents.replay.q_learning.import_observations``); ``check_transitions(items,
observation_space, action_space)`` validates them first, naming the field and index.

Two memories (DQFD: an online and a demonstration memory). Keep two states with their own
``Memory`` (the demonstration one with ``width=1`` and a capacity of the demonstrations),
sample each with a static share of the batch, concatenate, and hand each memory back its
part of the errors::

    online = online_memory.sample(online_state, k1, batch - n_demo, step)
    demo = demo_memory.sample(demo_state, k2, n_demo, step)
    batch = concat_samples(online, demo)           # items/weights [batch, ...]
    errors = td_errors(batch)                      # [batch]
    online_state = online_memory.update_priorities(online_state, online.index,
                                                   errors[:batch - n_demo])
    demo_state = demo_memory.update_priorities(demo_state, demo.index, errors[batch - n_demo:])
"""
from batchrl.memories.prioritized import (
  SumTree,
  importance_weights,
  naive_sample,
  tree_find,
  tree_init,
  tree_sample,
  tree_update,
)
from batchrl.memories.replay import (
  MEMORY_TYPES,
  Memory,
  MemoryCapacityError,
  MemorySpecError,
  MemoryState,
  Sample,
  available_bytes,
  check_fits,
  concat_samples,
  item_nbytes,
  make_memory,
)
from batchrl.memories.transitions import (
  TransitionItem,
  check_transitions,
  import_transitions,
  transition_window_mask,
  transitions_from_observations,
)

__all__ = [
    "MEMORY_TYPES", "Memory", "MemoryCapacityError", "MemorySpecError", "MemoryState", "Sample",
    "SumTree", "TransitionItem", "available_bytes", "check_fits", "check_transitions",
    "concat_samples", "import_transitions", "importance_weights", "item_nbytes", "make_memory",
    "naive_sample",
    "transition_window_mask", "transitions_from_observations", "tree_find", "tree_init",
    "tree_sample", "tree_update",
]
