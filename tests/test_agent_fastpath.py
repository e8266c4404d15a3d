"""The fast path of ``batchrl.Agent`` (``fast_path.DeferredCommits``): acts that do not commit,
transitions stored many at a time. It must give exactly what the fused path gives: the same
actions, the same update reports and the same state, bit for bit, for the same seed and
experience. Each test drives two agents of one spec, one forced onto the fused path."""
import jax
import numpy as np
import pytest

from batchrl import Agent, jax_internals
from batchrl.agent import AgentUsageError, fast_path, interaction
from batchrl.agent.streams import terminal_codes

# Both paths compile with the options users get ("long"): the fused act step and the fast
# path's commit are different programs, and unoptimized ("once", the fast-compile default of
# tests) they need not round alike: on jax 0.12 a reward statistic's mean differed by one ulp.
pytestmark = pytest.mark.optimized

CARTPOLE = dict(states=dict(type="float", shape=(4,)), actions=dict(type="int", num_values=2))
SMALL = dict(network=[dict(type="dense", size=8)], batch_size=8, optimizer_batch_size=8,
             epochs=1, seed=3)


def twins(**spec):
  """A fast agent and the same agent held on the fused path. Agents of one spec share a
  runtime, so each program compiles once."""
  fast, fused = Agent.create("ppo", **spec), Agent.create("ppo", **spec)
  assert fast._rt is fused._rt
  fused._fast_refusal = "test: the fused path on purpose"
  return fast, fused


def host_state(agent):
  def leaf(x):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x = jax.random.key_data(x)
    return np.asarray(x)
  return jax.tree.map(leaf, agent._state)  # _state commits what the fast path holds


def assert_same_state(a, b):
  jax.tree.map(np.testing.assert_array_equal, host_state(a), host_state(b))


def count_fast_acts(monkeypatch) -> list:
  """Counts acts on the fast path: ``act`` (any streams) and ``act_one`` (one stream)."""
  calls = []
  for name in ("act", "act_one"):
    method = getattr(fast_path.DeferredCommits, name)

    def counting(self, *args, method=method, **kwargs):
      calls.append(1)
      return method(self, *args, **kwargs)

    monkeypatch.setattr(fast_path.DeferredCommits, name, counting)
  return calls


def test_one_stream_matches_the_fused_path_bit_for_bit(monkeypatch):
  # tiny buffers: commits when full, key-stream refills and updates all fall mid-run
  monkeypatch.setattr(fast_path.DeferredCommits, "MAX_DEPTH", 3)
  monkeypatch.setattr(fast_path.DeferredCommits, "KEY_STEPS", 5)
  fast_acts = count_fast_acts(monkeypatch)
  # stateful preprocessing: statistics, and a frame stack that episode starts refill
  fast, fused = twins(**CARTPOLE, **SMALL,
                      preprocessing=[dict(type="running_standardize"),
                                     dict(type="sequence", length=2)])
  rng = np.random.default_rng(0)
  log = {id(fast): [], id(fused): []}
  for t in range(40):
    state = rng.normal(size=4).astype(np.float32)
    reward, terminal = float(rng.normal()), int(rng.integers(0, 7) == 0)
    final = rng.normal(size=4).astype(np.float32)
    for agent in (fast, fused):
      out = log[id(agent)]
      out.append(agent.act(state, deterministic=(t % 11 == 5)))
      if t == 13:  # an act never observed: reset drops it
        agent.reset()
        out.append(agent.act(state))
      if t == 9:  # cut short with the state it reached: the next act is fused
        out.append(agent.observe(reward, terminal=2, next_states=final))
      else:
        out.append(agent.observe(reward, terminal=terminal))
      if t % 10 == 7:
        out.append(agent.act(final, independent=True, deterministic=True))
    if t in (6, 22):  # reading the state mid-run commits; the runs go on identically
      assert_same_state(fast, fused)
  assert log[id(fast)] == log[id(fused)]
  assert fast.updates == fused.updates >= 4 and fast.timesteps == fused.timesteps == 41
  assert fast._fast is not None and fused._fast is None
  assert len(fast_acts) >= 30  # most acts took the fast path
  assert_same_state(fast, fused)


def test_streams_named_states_and_actions_with_masks_match(monkeypatch):
  fast_acts = count_fast_acts(monkeypatch)
  states = dict(pos=dict(type="float", shape=(3,)), flag=dict(type="bool", shape=(2,)),
                move_mask=dict(type="bool", shape=(3,)))
  actions = dict(move=dict(type="int", num_values=3), grip=dict(type="bool"),
                 force=dict(type="float", shape=(2,), min_value=-1.0, max_value=1.0))
  # no update in 20 steps (updates: the test above), so no update is compiled here
  fast, fused = twins(states=states, actions=actions, parallel_interactions=2,
                      preprocessing=dict(pos=[dict(type="clip", min_value=-1, max_value=1)]),
                      exploration=dict(move=0.3, force=dict(type="gaussian", sigma=0.2)),
                      **dict(SMALL, batch_size=64, optimizer_batch_size=64, network=dict(
                          branches=dict(pos=[], flag=[]), combine="concat",
                          layers=[dict(type="dense", size=8)])))
  assert fast._rt.adapters.raw_kinds == {"pos": "float", "flag": "bool", "move_mask": "bool"}
  rng = np.random.default_rng(1)
  for t in range(20):
    batch = dict(pos=rng.normal(size=(2, 3)).astype(np.float32), flag=rng.random((2, 2)) < 0.5,
                 move_mask=np.array([[1, 0, 1], [1, 1, 0]], bool))
    terminal = (rng.integers(0, 5, 2) == 0).astype(int)
    a, b = fast.act(batch), fused.act(batch)
    assert a.keys() == b.keys() == {"move", "grip", "force"}
    for name in a:
      assert a[name].dtype == b[name].dtype and a[name].shape[0] == 2
      np.testing.assert_array_equal(a[name], b[name])
    assert a["move"][0] != 1 and a["move"][1] != 2  # masked moves never taken
    assert fast.observe(np.ones(2), terminal) == fused.observe(np.ones(2), terminal)
  assert len(fast_acts) == 20
  assert_same_state(fast, fused)
  paths = [jax.tree_util.keystr(p) for p, _ in
           jax.tree_util.tree_flatten_with_path(fast._device.model)[0]]
  reads = fast._fast.plan.reads  # act reads the policy's parameters, not the buffer
  assert reads and all("['policy']" in paths[i] for i in reads)


def test_one_stream_scalar_path_keeps_every_check():
  # after the first act the agent takes Agent._act_one / _observe_one; what they do not
  # take (bad input, errors) goes through the general path with its messages
  from batchrl.agent import StateError
  agent = Agent.create("ppo", **CARTPOLE, **SMALL, max_episode_timesteps=3)
  state = np.zeros(4, np.float32)
  agent.act(state)
  agent.observe(1.0, False)
  assert agent._fast is not None
  for bad in (np.nan, np.inf, -np.inf):
    with pytest.raises(StateError, match="contains NaN or inf"):
      agent.act(np.array([0, bad, 0, 0], np.float32))
  with pytest.raises(StateError, match="must have shape"):
    agent.act(np.zeros(5, np.float32))
  assert agent.act(np.zeros(4, np.float64)) in (0, 1)  # other dtypes: the general path
  with pytest.raises(AgentUsageError, match="act called twice"):
    agent.act(state)
  for reward in (float("nan"), 1e39, 10 ** 40):  # 1e39 overflows float32
    with pytest.raises(AgentUsageError, match="reward must be finite"), \
        np.errstate(over="ignore"):
      agent.observe(reward, False)
  with pytest.raises(AgentUsageError, match="terminal must be a bool or 0/1/2"):
    agent.observe(1.0, 3)
  assert agent.observe(3, 0) is False  # an int reward
  with pytest.raises(AgentUsageError, match="without an act"):
    agent.observe(1.0, False)
  agent.act(state)
  agent.observe(1.0, 0)
  with pytest.raises(AgentUsageError, match="has run 3 timesteps"):
    agent.act(state)
  assert agent.timesteps == 3 and agent.episodes == 0
  agent.reset()
  agent.act(state)
  assert agent.observe(1.0, True) is False and agent.episodes == 1


def test_which_agents_take_the_fast_path():
  normalized = Agent.create("ppo", **CARTPOLE, **SMALL, normalize_observations=True)
  reason = fast_path.fast_plan(normalized._rt, normalized._device)
  assert "act reads model.obs_stats" in reason and "which store changes" in reason
  random = Agent.create("random", **CARTPOLE, seed=0)
  assert "no fixed update period" in fast_path.fast_plan(random._rt, random._device)
  assert random.act(np.zeros(4, np.float32)) in (0, 1)  # the fused path, as before
  assert random._fast is None and "period" in random._fast_refusal


def test_packing_round_trips_every_dtype_on_device_and_host():
  rng = np.random.default_rng(2)
  tree = {"f": rng.normal(size=(3, 2, 2)).astype(np.float32),
          "h": rng.normal(size=(3,)).astype(np.float16),
          "i": rng.integers(-5, 5, (3, 4)).astype(np.int32),
          "b": rng.random((3, 1)) < 0.5, "u": rng.integers(0, 255, (3, 2)).astype(np.uint8),
          "n": np.array([-np.inf, np.nan, -0.0], np.float32)}
  packing = interaction.Packing.of(tree)
  assert packing.width == 4 + 1 + 4 + 1 + 2 + 1
  words = jax.jit(packing.pack)(tree)
  assert words.shape == (3, packing.width) and words.dtype == np.uint32
  back = jax.jit(packing.unpack)(words)
  host = np.asarray(words)
  for j, name in enumerate(sorted(tree)):  # leaves in pytree order: sorted keys
    a, b = packing.offsets[j], packing.offsets[j + 1]
    for value in (np.asarray(back[name]),
                  interaction.host_leaf(host[:, a:b], packing.shapes[j], packing.dtypes[j])):
      assert value.dtype == tree[name].dtype
      np.testing.assert_array_equal(value, tree[name])
    np.testing.assert_array_equal(interaction.host_words(tree[name]), host[:, a:b])


def test_read_leaves_pack_into_one_float_array_and_back_exactly():
  rng = np.random.default_rng(4)
  leaves = [rng.normal(size=s).astype(np.float32) for s in [(4, 8), (8,), (8, 3), (3,), ()]]
  places = fast_path._read_floats(leaves)
  offsets = [offset for offset, _ in places]
  assert all(o % fast_path.FLOAT_ALIGN == 0 for o in offsets) and offsets == sorted(offsets)
  packed = jax.jit(lambda x: fast_path._pack_floats(places, x))(leaves)
  for leaf, back in zip(leaves, jax.jit(lambda p: fast_path._unpack_floats(places, p))(packed)):
    np.testing.assert_array_equal(np.asarray(back), leaf)
  assert fast_path._read_floats(leaves + [np.zeros(2, np.int32)]) is None  # a list then
  agent = Agent.create("ppo", **CARTPOLE, **SMALL)
  agent.act(np.zeros(4, np.float32))
  assert agent._fast.plan.read_floats is not None  # PPO's policy weights: one argument


def test_unrolled_threefry_gives_the_same_bits_and_restores_the_rule():
  def draws(key):
    k1, k2 = jax.random.split(key)
    return (jax.random.bits(k1, (5,)), jax.random.normal(k2, (3,)),
            jax.random.categorical(k1, np.zeros((2, 4), np.float32)))
  key = jax.random.key(7)
  rolled = jax.jit(draws)(key)
  program = fast_path._lowered_unrolled(jax.jit(draws), key)  # lowered unrolled, then run
  for a, b in zip(rolled, program(key)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  table, prim, _ = jax_internals.UNROLLED_THREEFRY.get()
  rule = table[prim]
  with fast_path.unrolled_threefry():
    assert table[prim] is not rule
  assert table[prim] is rule


def test_terminal_codes_without_isin():
  assert [terminal_codes(v) for v in (False, True, 0, 1, 2, 2.0, np.int64(1),
                                      np.bool_(True))] == [0, 1, 0, 1, 2, 2, 1, 1]
  np.testing.assert_array_equal(terminal_codes(np.array([True, False])), [1, 0])
  np.testing.assert_array_equal(terminal_codes([0, 2, 1.0]), [0, 2, 1])
  assert terminal_codes(np.array(2)) == 2
  for bad in (5, 1.5, -1, [0, 3], np.array([np.nan]), "1"):
    with pytest.raises(AgentUsageError, match="terminal must be a bool or 0/1/2"):
      terminal_codes(bad)


def test_inline_dispatch_only_when_nobody_chose(monkeypatch):
  from batchrl.agent.dispatch import prefer_inline_dispatch
  calls = []
  monkeypatch.setattr(jax.config, "update", lambda name, value: calls.append((name, value)))
  monkeypatch.setattr(jax_internals, "backends_started", lambda: False)
  monkeypatch.delenv("JAX_CPU_ENABLE_ASYNC_DISPATCH", raising=False)
  monkeypatch.setenv("BATCHRL_ASYNC_DISPATCH", "1")
  prefer_inline_dispatch()
  assert calls == []  # opted out
  monkeypatch.delenv("BATCHRL_ASYNC_DISPATCH")
  monkeypatch.setenv("JAX_CPU_ENABLE_ASYNC_DISPATCH", "true")
  prefer_inline_dispatch()
  assert calls == []  # the user set JAX's own variable
  monkeypatch.delenv("JAX_CPU_ENABLE_ASYNC_DISPATCH")
  prefer_inline_dispatch()
  assert calls == [("jax_cpu_enable_async_dispatch", False)]
  monkeypatch.setattr(jax_internals, "backends_started", lambda: True)
  prefer_inline_dispatch()
  assert len(calls) == 1  # too late: the backend exists, the setting is left as it is
