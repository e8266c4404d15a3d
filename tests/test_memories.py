"""Replay memories: circular writes and wrap-around, windows, uniform / sequential /
prioritized / naive sampling against numpy references (chi-square on 100k draws, importance
weights), zero priorities never drawn (including a float32 case that breaks the usual sum-tree
descent), size checks, imports from observation dicts, vmap over seeds."""
import functools

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from batchrl import memories
from batchrl.memories import (
  Memory,
  MemoryCapacityError,
  MemorySpecError,
  TransitionItem,
  check_transitions,
  import_transitions,
  make_memory,
  replay,
  transition_window_mask,
  transitions_from_observations,
)
from batchrl.memories import prioritized as pr


def scalar_item():
  return {"x": jnp.float32(0), "t": jnp.int32(0)}


def row(t, width):
  """Row ``t``: column ``c`` holds x = 10 t + c, t = t."""
  return {"x": 10.0 * t + jnp.arange(width, dtype=jnp.float32),
          "t": jnp.full((width,), t, jnp.int32)}


@functools.lru_cache(maxsize=None)
def jitted(memory: Memory, method: str, *static):
  """One compiled method per memory (tests call them often; eager dispatch is slow)."""
  return jax.jit(getattr(memory, method), static_argnums=static)


def fill(memory, num_rows, state=None):
  """``num_rows`` rows of ``row(t)`` added in one compiled call."""
  state = jitted(memory, "init")(scalar_item()) if state is None else state
  rows = jax.tree.map(lambda *r: jnp.stack(r), *[row(t, memory.width) for t in range(num_rows)])
  return jitted(memory, "add_rows")(state, rows)


# ---------------------------------------------------------------------------- building


def test_unknown_type_names_the_closest_one():
  with pytest.raises(MemorySpecError, match="'prioritised_replay'.*did you mean "
                     "'prioritized_replay'"):
    make_memory("prioritised_replay", capacity=10)
  with pytest.raises(MemorySpecError, match="unknown memory key 'capacty'.*'capacity'"):
    make_memory({"type": "replay", "capacty": 10})


def test_capacity_and_options_are_checked():
  with pytest.raises(MemorySpecError, match="at least one row of width 8"):
    Memory(capacity=4, width=8)
  with pytest.raises(MemorySpecError, match="capacity must be a positive int"):
    Memory(capacity=0)
  with pytest.raises(MemorySpecError, match="sequence_length applies to the 'sequential'"):
    Memory(type="replay", capacity=8, sequence_length=2)
  with pytest.raises(MemorySpecError, match="sequence_length .5. exceeds the rows"):
    Memory(type="sequential", capacity=8, width=2, sequence_length=5)
  assert Memory(capacity=10, width=4).num_items == 8  # whole rows


def test_too_large_a_memory_is_an_error_naming_the_bytes(monkeypatch):
  item = {"obs": jax.ShapeDtypeStruct((84, 84, 4), jnp.uint8)}
  memory = Memory(capacity=10**6)
  with pytest.raises(MemoryCapacityError, match=r"needs 28224000000 bytes \(26\.3 GiB\)"):
    monkeypatch.setattr(replay, "available_bytes", lambda: (10**9, "test memory"))
    memory.init(item)
  monkeypatch.setattr(replay, "available_bytes", lambda: (10**12, "test memory"))
  assert memory.nbytes(item) == 28_224 * 10**6
  prioritized = Memory(type="prioritized_replay", capacity=1000)
  assert prioritized.nbytes({"a": jnp.float32(0)}) == 1000 * 4 + 2 * 2 * 1024 * 4


def test_available_bytes_reads_the_host():
  free, where = memories.available_bytes()
  assert free is None or free > 0
  assert isinstance(where, str)


# ---------------------------------------------------------------------------- writing


def test_wrap_around_overwrites_the_oldest_rows():
  memory = Memory(capacity=8, width=2)  # 4 rows
  state = fill(memory, 7)
  assert int(state.head) == 3 and int(state.filled) == 4 and int(memory.size(state)) == 8
  # rows 0..2 were overwritten by steps 4..6; row 3 still holds step 3
  np.testing.assert_array_equal(state.items["t"][:, 0], [4, 5, 6, 3])
  np.testing.assert_array_equal(state.items["x"][1], [50.0, 51.0])
  rows = {"x": jnp.stack([row(t, 2)["x"] for t in (7, 8)]),
          "t": jnp.asarray([[7, 7], [8, 8]], jnp.int32)}
  state = memory.add_rows(state, rows)
  np.testing.assert_array_equal(state.items["t"][:, 0], [8, 5, 6, 7])
  assert int(state.head) == 1 and int(state.filled) == 4


def test_uniform_samples_only_written_items_evenly():
  memory = Memory(capacity=16, width=2)  # 8 rows, 3 written
  state = fill(memory, 3)
  sample = memory.sample(state, jax.random.key(0), 30_000)
  assert set(np.unique(np.asarray(sample.index))) == set(range(6))
  np.testing.assert_array_equal(sample.items["x"], 10.0 * (sample.index // 2) + sample.index % 2)
  counts = np.bincount(np.asarray(sample.index), minlength=6)
  assert stats.chisquare(counts).pvalue > 1e-3
  np.testing.assert_array_equal(sample.weight, 1.0)
  np.testing.assert_allclose(memory.probabilities(state)[:6], 1 / 6)


def test_windows_stop_at_the_newest_row_across_the_wrap():
  memory = Memory(capacity=4, width=1)
  state = fill(memory, 6)  # rows hold t = 4, 5, 2, 3; newest is row 1 (t = 5)
  items, mask = memory.windows(state, jnp.asarray([2, 3, 1]), 3)
  np.testing.assert_array_equal(items["t"], [[2, 3, 4], [3, 4, 5], [5, 2, 3]])
  np.testing.assert_array_equal(mask, [[1, 1, 1], [1, 1, 1], [1, 0, 0]])


def test_sequential_windows_are_contiguous_and_stored():
  memory = Memory(type="sequential", capacity=10, width=2, sequence_length=3)  # 5 rows
  state = fill(memory, 7)  # t = 2..6 stored
  sample = memory.sample(state, jax.random.key(1), 2000)
  t = np.asarray(sample.items["t"])
  assert t.shape == (2000, 3)
  np.testing.assert_array_equal(np.diff(t, axis=1), 1)
  assert set(np.unique(t[:, 0])) == {2, 3, 4}  # every window lies inside the stored steps
  assert np.asarray(sample.mask).all()
  np.testing.assert_array_equal(sample.items["x"][:, 0], 10.0 * t[:, 0] + sample.index % 2)


def transition_rows(obs, next_obs, terminated=None, truncated=None):
  n = len(obs)
  zeros = np.zeros(n, bool)
  return TransitionItem(jnp.asarray(obs, jnp.float32)[:, None, None],
                        jnp.zeros((n, 1), jnp.int32), jnp.arange(n, dtype=jnp.float32)[:, None],
                        jnp.asarray(zeros if terminated is None else terminated)[:, None],
                        jnp.asarray(zeros if truncated is None else truncated)[:, None],
                        jnp.asarray(next_obs, jnp.float32)[:, None, None])


def test_transition_windows_cut_at_episode_ends_and_discontinuities():
  # obs: 0 -> 1 -> 2 (terminated) | 10 -> 11 (truncated) | 20 -> 21, then 30: env restarted
  obs = [0, 1, 2, 10, 11, 20, 30, 31]
  next_obs = [1, 2, 3, 11, 12, 21, 31, 32]
  terminated = [0, 0, 1, 0, 0, 0, 0, 0]
  truncated = [0, 0, 0, 0, 1, 0, 0, 0]
  memory = Memory(capacity=8)
  item = TransitionItem(jnp.zeros(1), jnp.int32(0), jnp.float32(0), jnp.bool_(0), jnp.bool_(0),
                        jnp.zeros(1))
  state = memory.add_rows(memory.init(item), transition_rows(obs, next_obs, terminated,
                                                             truncated))
  items, mask = memory.windows(state, jnp.arange(8), 3)
  alive = np.asarray(transition_window_mask(items, mask)).astype(int)
  np.testing.assert_array_equal(alive, [[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0],
                                        [1, 0, 0], [1, 1, 0], [1, 0, 0]])


# ---------------------------------------------------------------------------- priorities


def test_sum_tree_sums_and_minimum_match_numpy():
  rng = np.random.default_rng(0)
  values = rng.random(13).astype(np.float32)
  values[[2, 7]] = 0
  tree = pr.tree_update(pr.tree_init(13), jnp.arange(13), jnp.asarray(values))
  assert tree.num_leaves == 16
  np.testing.assert_allclose(tree.total, values.sum(), rtol=1e-6)
  assert float(tree.min) == values[values > 0].min()
  # a batch with duplicate indices: the tree stays consistent with its leaves
  tree = pr.tree_update(tree, jnp.asarray([3, 3, 5]), jnp.asarray([0.5, 0.25, 2.0]))
  leaves = np.asarray(tree.leaves())
  assert leaves[3] in (0.5, 0.25) and leaves[5] == 2.0
  sums = np.asarray(tree.sums)
  np.testing.assert_array_equal(sums[1:16], sums[2:32:2] + sums[3:32:2])


def numpy_descent(sums: np.ndarray, u: np.float32) -> int:
  """The usual sum-tree descent ("left iff value < left sum") in float32."""
  p = len(sums) // 2
  value, pos = np.float32(np.float32(u) * sums[1]), 1
  while pos < p:
    if value < sums[2 * pos]:
      pos = 2 * pos
    else:
      value, pos = np.float32(value - sums[2 * pos]), 2 * pos + 1
  return pos - p


def test_zero_priority_is_never_drawn_even_where_float32_rounding_misleads():
  # found by search: the usual descent walks into the empty last leaf for u = 1 - 2^-24
  values = np.asarray([3.6412675097352576e-09, 1.0492703950149007e-06, 1.5498223815413326e-09,
                       1.1757693982872297e-06, 1.739259232635959e-06, 1.8261180230183527e-05,
                       7.053177978377789e-05, 0.0], np.float32)
  tree = pr.tree_update(pr.tree_init(8), jnp.arange(8), jnp.asarray(values))
  u = np.nextafter(np.float32(1), np.float32(0))
  assert values[numpy_descent(np.asarray(tree.sums), u)] == 0  # the flaw is real here
  near_one = u - np.arange(64, dtype=np.float32) * np.float32(2 ** -24)
  drawn = np.asarray(pr.tree_find(tree, jnp.asarray(near_one)))
  assert (values[drawn] > 0).all()
  drawn = np.asarray(pr.tree_sample(tree, jax.random.key(0), 100_000))
  assert (values[drawn] > 0).all()


@pytest.fixture(scope="module")
def prioritized_state():
  """A prioritized memory (alpha 0.5) of 40 items with known errors, 6 of them zero."""
  memory = Memory(type="prioritized_replay", capacity=48, width=4, prioritization_weight=0.5,
                  prioritization_constant=0.0, beta_initial=0.4, beta_steps=100)
  state = fill(memory, 10)
  rng = np.random.default_rng(1)
  errors = rng.uniform(0.0, 3.0, 40).astype(np.float32)
  errors[[0, 5, 11, 17, 30, 39]] = 0.0
  state = memory.update_priorities(state, jnp.arange(40), jnp.asarray(errors))
  return memory, state, errors


def test_prioritized_frequencies_match_priorities(prioritized_state):
  memory, state, errors = prioritized_state
  sample = jax.jit(memory.sample, static_argnums=2)(state, jax.random.key(3), 100_000, 0)
  counts = np.bincount(np.asarray(sample.index), minlength=48)
  expected = np.sqrt(errors.astype(np.float64))  # alpha = 0.5
  expected = expected / expected.sum() * 100_000
  assert counts[40:].sum() == 0 and counts[:40][errors == 0].sum() == 0
  positive = errors > 0
  assert stats.chisquare(counts[:40][positive], expected[positive]).pvalue > 1e-3
  np.testing.assert_allclose(memory.probabilities(state)[:40], expected / 100_000, rtol=1e-5)


def test_importance_weights_match_numpy(prioritized_state):
  memory, state, errors = prioritized_state
  sample = memory.sample(state, jax.random.key(4), 256, step=50)  # beta = 0.4 + 0.6 / 2
  p = np.sqrt(errors.astype(np.float64))
  stored = p > 0
  n, probability = 40, p / p.sum()
  weights = np.zeros_like(p)
  weights[stored] = (n * probability[stored]) ** -0.7
  reference = weights / weights[stored].max()
  np.testing.assert_allclose(sample.weight, reference[np.asarray(sample.index)], rtol=1e-4)
  assert float(memory.beta(50)) == pytest.approx(0.7)
  assert float(memory.beta(10_000)) == pytest.approx(1.0)


def test_new_items_get_the_largest_priority_seen(prioritized_state):
  memory, state, errors = prioritized_state
  assert float(state.max_priority) == pytest.approx(errors.max())
  state = memory.add(state, row(99, 4))  # row 10: items 40..43
  np.testing.assert_allclose(memory.priorities_of(state)[40:44], np.sqrt(errors.max()),
                             rtol=1e-6)
  inactive = memory.update_priorities(state, jnp.asarray([40]), jnp.asarray([9.0]),
                                      active=False)
  np.testing.assert_array_equal(memory.priorities_of(inactive), memory.priorities_of(state))


def test_naive_prioritized_matches_the_same_probabilities(prioritized_state):
  _, tree_state, errors = prioritized_state
  memory = Memory(type="naive_prioritized_replay", capacity=48, width=4,
                  prioritization_weight=0.5, prioritization_constant=0.0)
  state = fill(memory, 10)
  state = memory.update_priorities(state, jnp.arange(40), jnp.asarray(errors))
  sample = jax.jit(memory.sample, static_argnums=2)(state, jax.random.key(5), 100_000, 0)
  counts = np.bincount(np.asarray(sample.index), minlength=48)
  expected = np.sqrt(errors.astype(np.float64))
  expected = expected / expected.sum() * 100_000
  assert counts[40:].sum() == 0 and counts[:40][errors == 0].sum() == 0
  positive = errors > 0
  assert stats.chisquare(counts[:40][positive], expected[positive]).pvalue > 1e-3
  np.testing.assert_allclose(memory.probabilities(state)[:40],
                             Memory(type="prioritized_replay", capacity=48, width=4)
                             .probabilities(tree_state)[:40], rtol=1e-5)


def test_concat_samples_keeps_each_memory_index():
  a, b = Memory(capacity=8, width=2), Memory(capacity=4, width=1)
  sa = a.sample(fill(a, 2), jax.random.key(0), 3)
  sb = b.sample(fill(b, 4), jax.random.key(1), 2)
  both = memories.concat_samples(sa, sb)
  assert both.index.shape == (5,) and both.items["x"].shape == (5,)
  np.testing.assert_array_equal(both.index[3:], sb.index)


def test_memory_vmaps_over_seeds():
  memory = Memory(type="prioritized_replay", capacity=8, width=2)

  def run(key):
    state = fill(memory, 3)
    return memory.sample(state, key, 4).index

  index = jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(0), 3))
  assert index.shape == (3, 4) and (np.asarray(index) < 6).all()


# ---------------------------------------------------------------------------- importing


def observations():
  """Two episodes: 0, 1, 2 (terminated) and 10, 11 (truncated), then 20 (unfinished)."""
  entries = []
  for state, terminal in ((0, False), (1, False), (2, True), (10, 0), (11, 2), (20, 0)):
    entries.append({"state": np.asarray([state, state], np.float32), "action": state % 2,
                    "reward": float(state), "terminal": terminal, "internal": []})
  return entries


def test_observation_dicts_become_transitions():
  items = transitions_from_observations(observations())
  assert items.obs.shape == (5, 2)  # the unfinished last step has no next state: dropped
  np.testing.assert_array_equal(items.obs[:, 0], [0, 1, 2, 10, 11])
  np.testing.assert_array_equal(items.next_obs[:, 0], [1, 2, 2, 11, 11])
  np.testing.assert_array_equal(items.terminated, [0, 0, 1, 0, 0])
  np.testing.assert_array_equal(items.truncated, [0, 0, 0, 0, 1])
  given = observations()
  given[-1]["next_state"] = np.asarray([21, 21], np.float32)
  assert transitions_from_observations(given).obs.shape == (6, 2)
  arrays = {"states": np.arange(4.0)[:, None], "actions": np.zeros(4, int),
            "rewards": np.ones(4), "terminals": np.asarray([0, 0, 0, 1])}
  np.testing.assert_array_equal(transitions_from_observations(arrays).next_obs[:, 0],
                                [1, 2, 3, 3])


def test_bad_observations_name_the_field_and_index():
  entries = observations()
  entries[3]["state"] = np.zeros(3, np.float32)
  with pytest.raises(ValueError, match=r"states at index 3 has shape\(s\) \[\(3,\)\]"):
    transitions_from_observations(entries)
  entries = observations()
  entries[2]["terminal"] = 5
  with pytest.raises(ValueError, match="'terminal' at index 2 is 5"):
    transitions_from_observations(entries)
  with pytest.raises(ValueError, match="'internal' must be empty"):
    transitions_from_observations([dict(observations()[0], internal=[1.0])])
  items = transitions_from_observations(observations())
  box, actions = gym.spaces.Box(-100, 100, (2,)), gym.spaces.Discrete(2)
  check_transitions(items, box, actions)
  with pytest.raises(ValueError, match=r"actions at index 1 is 3, not a valid value"):
    check_transitions(items._replace(action=np.asarray([0, 3, 0, 1, 1])), box, actions)
  with pytest.raises(ValueError, match=r"states have shape \(2,\) per observation, the space "
                     r"needs \(3,\)"):
    check_transitions(items, gym.spaces.Box(-1, 1, (3,)), actions)


def test_import_fills_columns_in_time_order():
  items = transitions_from_observations(observations()[:4] + [
      {"state": np.asarray([11, 11], np.float32), "action": 1, "reward": 11.0, "terminal": 2,
       "internal": []}])
  items = items._replace(obs=items.obs[:4], action=items.action[:4], reward=items.reward[:4],
                         terminated=items.terminated[:4], truncated=items.truncated[:4],
                         next_obs=items.next_obs[:4])
  memory = Memory(capacity=8, width=2)
  template = TransitionItem(jnp.zeros(2), jnp.int32(0), jnp.float32(0), jnp.bool_(0),
                            jnp.bool_(0), jnp.zeros(2))
  state = import_transitions(memory, memory.init(template), items)
  np.testing.assert_array_equal(state.items.obs[:2, :, 0], [[0, 2], [1, 10]])  # columns
  assert int(state.filled) == 2
  with pytest.raises(MemorySpecError, match="importing 3 transitions into a memory of width 2"):
    import_transitions(memory, state, jax.tree.map(lambda x: x[:3], items))
