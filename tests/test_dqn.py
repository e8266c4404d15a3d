"""DQN: config and space errors, Huber, (double) n-step targets against hand-computed ones
across episode ends and truncations, the first_update gate, target sync (tau = 1 and < 1),
both layouts (masked actions never chosen), imports, a checkpoint round trip with a full
prioritized memory, the object-API keys, and learning CartPole (fast; the named-config
budgets are marked slow). Compiled programs are built once per module."""
import functools
import json
import os

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import checkpoint, configs
from batchrl.agents import spaces
from batchrl.agents.core import Transition
from batchrl.agents.dqn import DQNConfig
from batchrl.agents.dqn import recipes as dqn_recipes
from batchrl.agents.dqn.family import FAMILY
from batchrl.agents.dqn.model import make_dqn
from batchrl.agents.family import BuildContext
from batchrl.agents.replay import losses, q_learning
from batchrl.agents.replay.q_keys import dqn_config
from batchrl.agents.replay.q_learning import import_observations
from batchrl.agents.replay.q_networks import Component, QNetworks
from batchrl.agents.replay.updates import Static, memory_of
from batchrl.configclass import ConfigError
from batchrl.configs import dqn as dqn_configs
from batchrl.memories import Sample, TransitionItem
from batchrl.specs import EnvSpec
from conftest import assert_resumes_exactly, example_agent_spec, fused_kit, learning_curve, leaves

BOX = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
TWO = gym.spaces.Discrete(2)


# ------------------------------------------------------------------------------ config


@pytest.mark.parametrize("changes, message", [
    (dict(memory="prioritised_replay"), "did you mean 'prioritized_replay'"),
    (dict(memory="sequential"), "DQN trains on single transitions"),
    (dict(memory_capacity=16, batch_size=32), r"memory_capacity \(16\) is smaller than "
     r"batch_size \(32\)"),
    (dict(update_target_weight=0.0), r"tau\) must be in \(0, 1\]"),
    (dict(n_step=0), "n_step must be >= 1"),
    (dict(exploration='{"type": "gaussian"}'), "cannot explore a int action"),
    (dict(network="[{"), "not valid JSON"),
])
def test_config_errors(changes, message):
  with pytest.raises(ConfigError, match=message):
    DQNConfig(**changes)


def test_continuous_actions_say_which_agent_fits():
  agent = make_dqn(DQNConfig())
  spec = EnvSpec(BOX, gym.spaces.Box(-1.0, 1.0, (1,), np.float32), 1)
  with pytest.raises(TypeError, match="Use 'naf' .*continuous actions"):
    agent.init(jax.random.key(0), spec)
  context = BuildContext(1, "auto", gym.spaces.Box(-1.0, 1.0, (1,), np.float32))
  with pytest.raises(ConfigError, match="'naf'"):
    dqn_config({}, context)


def test_capacity_below_a_batch_of_rows_is_an_error():
  agent = make_dqn(DQNConfig(memory_capacity=40, batch_size=36))
  with pytest.raises(ValueError, match=r"holds 35 transitions \(whole rows of 7 envs\)"):
    agent.init(jax.random.key(0), EnvSpec(BOX, TWO, 7))


# ------------------------------------------------------------------------------ losses


def test_huber():
  x = np.asarray([-3.0, -1.0, -0.5, 0.0, 0.25, 2.0], np.float32)
  expected = np.where(np.abs(x) <= 1.0, 0.5 * x ** 2, np.abs(x) - 0.5)
  np.testing.assert_allclose(losses.huber(jnp.asarray(x), 1.0), expected, rtol=1e-6)
  expected = np.where(np.abs(x) <= 2.0, 0.5 * x ** 2, 2.0 * (np.abs(x) - 1.0))
  np.testing.assert_allclose(losses.td_loss(jnp.asarray(x), 2.0), expected, rtol=1e-6)
  np.testing.assert_allclose(losses.td_loss(jnp.asarray(x), 0.0), 0.5 * x ** 2, rtol=1e-6)


# Q(s, a) = (s @ W)[a] with different online and target matrices, so DQN and Double DQN
# pick different next actions.
W_ONLINE = np.asarray([[1.0, 0.0], [0.0, 2.0]], np.float32)
W_TARGET = np.asarray([[0.5, 1.0], [3.0, 0.0]], np.float32)
LINEAR = QNetworks(init=None, q_values=lambda w, obs: {"action": obs @ w},
                   masks=lambda obs: {"action": jnp.ones(obs.shape[:-1] + (2,), jnp.bool_)},
                   components=(Component("action", (), 2),))
# One stream: an episode truncated after 3 steps, one terminated after 2, then one going on.
#            obs        next_obs    reward terminated truncated
STEPS = [((1.0, 0.0), (0.0, 1.0), 1.0, False, False),
         ((0.0, 1.0), (1.0, 1.0), 2.0, False, False),
         ((1.0, 1.0), (2.0, 0.5), 3.0, False, True),    # cut: bootstrap from (2, 0.5)
         ((0.0, 2.0), (1.0, 3.0), 4.0, False, False),   # a new episode (obs != last next_obs)
         ((1.0, 3.0), (5.0, 5.0), 5.0, True, False),    # true end: no bootstrap
         ((0.5, 0.5), (3.0, 1.0), 6.0, False, False)]   # the newest step


def value(next_obs, double: bool) -> float:
  s = np.asarray(next_obs, np.float32)
  q_target = s @ W_TARGET
  if double:
    return float(q_target[np.argmax(s @ W_ONLINE)])
  return float(q_target.max())


def hand_targets(n: int, double: bool, discount: float = 0.9) -> list[float]:
  out = []
  for start in range(len(STEPS)):
    total, power, k = 0.0, 1.0, start
    while True:
      _, next_obs, reward, terminated, truncated = STEPS[k]
      total += power * reward
      power *= discount
      ended = terminated or truncated
      last = k == len(STEPS) - 1 or k - start + 1 == n or ended
      if last:
        out.append(total + (0.0 if terminated else power * value(next_obs, double)))
        break
      k += 1
  return out


def linear_state(config: DQNConfig):
  info = spaces.space_info(EnvSpec(BOX, TWO, 1), "flat")
  memory = memory_of(config, info)
  template = TransitionItem(jnp.zeros(2), {"action": jnp.int32(0)}, jnp.float32(0),
                            jnp.bool_(False), jnp.bool_(False), jnp.zeros(2))
  column = lambda i, dtype: jnp.asarray([[step[i]] for step in STEPS], dtype)
  rows = TransitionItem(column(0, jnp.float32), {"action": jnp.zeros((6, 1), jnp.int32)},
                        column(2, jnp.float32), column(3, jnp.bool_), column(4, jnp.bool_),
                        column(1, jnp.float32))
  mstate = memory.add_rows(memory.init(template), rows)
  zero = jnp.int32(0)
  state = q_learning.DQNState(jnp.asarray(W_ONLINE), jnp.asarray(W_TARGET), (), mstate,
                             jax.random.key(0), zero, zero, zero, zero, info)
  return memory, state


@pytest.mark.parametrize("n, double", [(1, False), (1, True), (3, False), (3, True)])
def test_targets_match_hand_computed_ones(n, double):
  config = DQNConfig(n_step=n, double_dqn=double, discount=0.9, memory_capacity=32,
                     batch_size=6)
  memory, state = linear_state(config)
  index = jnp.arange(6, dtype=jnp.int32)
  sample = Sample(memory.gather(state.memory, index), index, jnp.ones(6), jnp.ones(6, bool))
  got = jax.jit(lambda st: q_learning.targets(config, LINEAR, memory, st, st.params,
                                             sample))(state)["action"]
  np.testing.assert_allclose(got, hand_targets(n, double), rtol=1e-6)


def test_nstep_returns_on_a_hand_example():
  rewards = jnp.asarray([[1.0, 2.0, 4.0], [1.0, 2.0, 4.0]])
  terminated = jnp.asarray([[False, True, False], [False, False, False]])
  alive = jnp.asarray([[True, True, False], [True, True, True]])
  returns, last, bootstrap = losses.nstep_returns(rewards, terminated, alive, 0.5)
  np.testing.assert_allclose(returns, [2.0, 3.0])
  np.testing.assert_array_equal(last, [1, 2])
  np.testing.assert_allclose(bootstrap, [0.0, 0.125])


# ------------------------------------------------------------------------------ updates


B = 2
THREE = gym.spaces.Discrete(3, start=-1)
SMALL = dict(hidden_layers=(8,), memory_capacity=64, batch_size=4, update_frequency=1,
             learning_rate=1e-2, target_update_frequency=4)
STORES = 4


def random_transition(key):
  k1, k2, k3, k4 = jax.random.split(key, 4)
  return Transition(jax.random.normal(k1, (B, 2)), jax.random.randint(k2, (B,), -1, 2),
                    jax.random.normal(k3, (B,)), jnp.zeros(B, bool), jnp.zeros(B, bool),
                    jax.random.normal(k4, (B, 2)), {})


@functools.lru_cache(maxsize=None)
def program(config: DQNConfig):
  """One compiled program for (BOX, THREE, B envs): init, act, then STORES random stores,
  each followed by an update. Returns the model and ``run(key) -> (initial state, action,
  extras, transitions, states, metrics)``, the last three stacked over the stores."""
  agent = make_dqn(config)
  spec = EnvSpec(BOX, THREE, B)

  def run(key):
    init_key, act_key, data_key = jax.random.split(key, 3)
    state = agent.init(init_key, spec)
    action, extras = agent.act(state, jnp.ones((B, 2)), act_key, False)

    def step(s, k):
      transition = random_transition(k)
      s, metrics = agent.update(agent.store(s, transition))
      return s, (transition, s, metrics)

    _, stacked = jax.lax.scan(step, state, jax.random.split(data_key, STORES))
    return (state, action, extras) + stacked

  return agent, jax.jit(run)


def run_updates(config: DQNConfig):
  """The states before and after each store + update, and the metrics of each update."""
  _, run = program(config)
  state, _, _, _, states, metrics = run(jax.random.key(1))
  after = [jax.tree.map(lambda x, i=i: x[i], states) for i in range(STORES)]
  return [state] + after, [jax.tree.map(lambda x, i=i: x[i], metrics) for i in range(STORES)]


def check_target_updates(states, metrics, tau):
  for before, after, m in zip(states[:-1], states[1:], metrics):
    due = float(m["learning"]) == 1 and int(after.num_steps) // 4 > int(before.last_sync)
    assert float(m["target_synced"]) == float(due)
    for new, old, online in zip(leaves(after.target_params), leaves(before.target_params),
                                leaves(after.params)):
      expected = tau * online + (1 - tau) * old if due else old
      np.testing.assert_allclose(new, expected, rtol=1e-6, atol=1e-7)


def test_no_learning_before_first_update_then_soft_target_updates():
  """num_steps 2, 4, 6, 8: learning from 6 on; target updates (tau 0.5) at 6 and 8."""
  states, metrics = run_updates(DQNConfig(**SMALL, first_update=6, update_target_weight=0.5))
  for state, m in zip(states[1:], metrics):
    moved = not all(np.array_equal(a, b) for a, b in zip(leaves(state.params),
                                                         leaves(states[0].params)))
    assert moved == (int(state.num_steps) >= 6) == (float(m["learning"]) == 1.0)
    assert (float(m["loss"]) > 0) == moved
  assert int(states[-1].num_updates) == 2
  assert [float(m["target_synced"]) for m in metrics] == [0.0, 0.0, 1.0, 1.0]
  check_target_updates(states, metrics, 0.5)


HARD = DQNConfig(**SMALL, first_update=0)


def test_hard_target_sync_every_target_update_frequency_steps():
  states, metrics = run_updates(HARD)
  # learning needs a batch of 4 stored: from the second store on
  assert [float(m["learning"]) for m in metrics] == [0.0, 1.0, 1.0, 1.0]
  assert [float(m["target_synced"]) for m in metrics] == [0.0, 1.0, 0.0, 1.0]
  check_target_updates(states, metrics, 1.0)
  for target, online in zip(leaves(states[-1].target_params), leaves(states[-1].params)):
    np.testing.assert_array_equal(target, online)


# ------------------------------------------------------------------------------ layouts


def test_flat_layout_shapes():
  agent, run = program(HARD)
  state, action, extras, transitions, states, metrics = run(jax.random.key(1))
  assert action.shape == (B,) and action.dtype == jnp.int32 and extras == {}
  assert set(np.asarray(action).tolist()) <= {-1, 0, 1}  # Discrete(3, start=-1)
  assert state.memory.items.obs.shape == (32, B, 2)  # 64 transitions in rows of 2 envs
  assert state.memory.items.action["action"].shape == (32, B)
  stored = states.memory.items.action["action"][-1]  # indices: the env's action + 1
  np.testing.assert_array_equal(stored[:STORES], np.asarray(transitions.action) + 1)
  assert all(np.shape(v) == (STORES,) for v in metrics.values())
  assert agent.period == 1 and (np.asarray(states.pending) == 0).all()
  # the networks are cached per (config, spaces): a new trace must not reuse the old one's
  jax.eval_shape(lambda key: agent.init(key, EnvSpec(BOX, THREE, B)), jax.random.key(0))


MASKED_OBS = gym.spaces.Dict({"position": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
                              "action_mask": gym.spaces.MultiBinary(4)})
TREE_ACTIONS = gym.spaces.Dict({"move": gym.spaces.Discrete(4),
                                "fire": gym.spaces.MultiBinary(2)})
TREE_OBS = gym.spaces.Dict({"position": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
                            "move_mask": gym.spaces.MultiBinary(4)})
NETWORK = json.dumps([{"type": "dense", "size": 16}, {"type": "dueling", "size": 4}])


def act_store_update(agent, spec: EnvSpec, obs, explorations: int):
  """One compiled program: init, ``explorations`` exploring acts (vmapped over keys), a
  greedy act, two stores of it and an update. Returns (state, explored, greedy, metrics)."""

  def run(key, obs):
    state = agent.init(key, spec)
    keys = jax.random.split(key, explorations)
    explored = jax.vmap(lambda k: agent.act(state, obs, k, False)[0])(keys)
    greedy = agent.act(state, obs, key, True)[0]
    n = jax.tree.leaves(obs)[0].shape[0]
    transition = Transition(obs, greedy, jnp.ones(n), jnp.zeros(n, bool), jnp.zeros(n, bool),
                            obs, {})
    _, metrics = agent.update(agent.store(agent.store(state, transition), transition))
    return state, explored, greedy, metrics

  return jax.jit(run)(jax.random.key(0), obs)


def test_masked_actions_are_never_chosen():
  """Epsilon 1 explores among the allowed actions only; greedy is the best allowed one."""
  config = DQNConfig(network=NETWORK, memory_capacity=64, batch_size=4, update_frequency=1,
                     first_update=0, exploration='{"type": "constant", "value": 1.0}')
  rng = np.random.default_rng(0)
  mask = rng.random((16, 4)) < 0.5
  mask[np.arange(16), rng.integers(0, 4, 16)] = True
  obs = {"position": jnp.asarray(rng.uniform(-1, 1, (16, 3)), jnp.float32),
         "action_mask": jnp.asarray(mask)}
  state, explored, greedy, metrics = act_store_update(
      make_dqn(config), EnvSpec(MASKED_OBS, gym.spaces.Discrete(4), 16), obs, 60)
  explored = np.asarray(explored)
  assert mask[np.arange(16), explored].all()
  assert len(np.unique(explored)) == 4  # exploration does try every allowed action
  q = q_learning.networks(config, state.info).q_values(state.params, obs)["action"]
  best = np.argmax(np.where(mask, np.asarray(q), -np.inf), axis=1)
  np.testing.assert_array_equal(greedy, best)
  assert float(metrics["learning"]) == 1.0 and np.isfinite(float(metrics["loss"]))


def test_tree_layout_with_several_actions():
  """No network spec: a Dict state falls back to the 'auto' network; a dueling head centres
  the advantages of each action element."""
  config = DQNConfig(memory_capacity=32, batch_size=4, update_frequency=1, first_update=0,
                     n_step=2, dueling=True)
  obs = {"position": jnp.zeros((2, 3)), "move_mask": jnp.asarray([[0, 1, 0, 0]] * 2, bool)}
  state, explored, action, metrics = act_store_update(
      make_dqn(config), EnvSpec(TREE_OBS, TREE_ACTIONS, 2), obs, 8)
  assert explored["move"].shape == (8, 2) and explored["fire"].shape == (8, 2, 2)
  assert action["move"].shape == (2,) and action["fire"].shape == (2, 2)
  assert action["fire"].dtype == jnp.bool_
  assert (np.asarray(explored["move"]) == 1).all()  # the only allowed move
  assert state.info.layout == "tree" and "advantage" in state.params
  assert float(metrics["learning"]) == 1.0 and np.isfinite(float(metrics["loss"]))
  with pytest.raises(ValueError, match=r"dueling with size 4, but the actions need 8 "
                     r"Q-values \(fire: 4, move: 4\)"):
    jax.eval_shape(lambda k: make_dqn(config.replace(network=NETWORK)).init(
        k, EnvSpec(TREE_OBS, TREE_ACTIONS, 2)), jax.random.key(0))


def test_import_observations_fills_the_memory():
  state = program(HARD)[1](jax.random.key(0))[0]  # 2 envs: columns of 3 steps
  observations = [{"state": [float(i), 0.0], "action": i % 2, "reward": 1.0,
                   "terminal": i == 5, "internal": []} for i in range(6)]
  state = import_observations(state, observations)
  items = state.memory.items
  assert int(state.memory.filled) == 3 and int(state.num_steps) == 0
  np.testing.assert_array_equal(items.obs[:3, :, 0], [[0, 3], [1, 4], [2, 5]])
  np.testing.assert_array_equal(items.action["action"][:3, 0], [1, 2, 1])  # start -1
  np.testing.assert_array_equal(items.next_obs[:3, 0, 0], [1, 2, 3])
  assert bool(items.terminated[2, 1]) and not bool(items.terminated[2, 0])
  observations[2]["action"] = 7
  with pytest.raises(ValueError, match="actions at index 2 is 7"):
    import_observations(state, observations)
  observations[2]["action"] = 0
  observations[4]["state"] = [1.0, 2.0, 3.0]
  with pytest.raises(ValueError, match=r"states at index 4 has shape\(s\) \[\(3,\)\]"):
    import_observations(state, observations)
  observations[4]["state"] = [4.0, 0.0]
  with pytest.raises(ValueError, match="importing 5 transitions into a memory of width 2"):
    import_observations(state, observations[:5] + [dict(observations[5], terminal=False)])
  with pytest.raises(ValueError, match="carries no config"):
    import_observations(state._replace(static=Static(None)), observations)


def test_import_observations_from_arrays_with_truncation():
  """The dict-of-arrays form: a truncated step (terminal 2) keeps its given next state and
  is not terminated; its n-step window stops there."""
  state = program(HARD)[1](jax.random.key(0))[0]
  arrays = {"states": np.arange(8, dtype=np.float32).reshape(4, 2),
            "actions": np.array([-1, 0, 1, 0]), "rewards": np.array([1.0, 2.0, 3.0, 4.0]),
            "terminals": np.array([0, 2, 0, 1]),
            "next_states": np.arange(2, 10, dtype=np.float32).reshape(4, 2) + 100}
  state = import_observations(state, arrays)
  items = state.memory.items
  np.testing.assert_array_equal(items.action["action"][:2].T, [[0, 1], [2, 1]])
  np.testing.assert_array_equal(items.truncated[:2].T, [[False, True], [False, False]])
  np.testing.assert_array_equal(items.terminated[:2].T, [[False, False], [False, True]])
  np.testing.assert_array_equal(items.next_obs[1, 0], [104.0, 105.0])
  with pytest.raises(ValueError, match="'terminal' at index 1 is 3"):
    import_observations(state, dict(arrays, terminals=np.array([0, 3, 0, 1])))


def test_object_api_update_count_and_import_observations():
  """Agent.create('dqn'): update runs every 4 steps but learns only from step 20 on
  (first_update), and agent.updates / observe's return count the learning ones. Then
  import_observations fills the memory (mismatched states/actions name field and index);
  agents without a replay memory refuse."""
  from batchrl import Agent
  from batchrl.agent import AgentUsageError

  specs = dict(states=dict(type="float", shape=(2,)), actions=dict(type="int", num_values=3))
  agent = Agent.create(agent="dqn", **specs, seed=0, memory_capacity=64, batch_size=4,
                       update_frequency=4, first_update=20,
                       network=[dict(type="dense", size=8)])
  reported = []
  for t in range(40):
    agent.act([0.1 * t, 0.0])
    reported.append(agent.observe(reward=1.0, terminal=t % 10 == 9))
  # transitions reach the model one act later: the update after step 4k runs in act 4k + 1
  assert [t for t, r in enumerate(reported) if r] == [20, 24, 28, 32, 36]
  assert agent.updates == 5 == int(agent._state.model.num_updates)

  observations = [dict(state=[float(i), -1.0], action=i % 3, reward=0.5, terminal=i == 9,
                       internal=[]) for i in range(10)]
  with pytest.raises(ValueError, match="actions at index 2 is 5"):
    agent.import_observations(observations[:2] + [dict(observations[2], action=5)]
                              + observations[3:])
  with pytest.raises(ValueError, match="states at index 1"):
    agent.import_observations([observations[0], dict(observations[1], state=[1.0])])
  stored = int(agent._state.model.memory.filled)
  agent.import_observations(observations)
  memory = agent._state.model.memory
  assert int(memory.filled) == stored + 10 and agent.timesteps == 40
  rows = slice(stored, stored + 10)
  np.testing.assert_array_equal(memory.items.obs[rows, 0, 0], np.arange(10))
  np.testing.assert_array_equal(memory.items.action["action"][rows, 0], np.arange(10) % 3)
  agent.act([0.0, 0.0])  # acting and observing go on from there
  agent.observe(reward=1.0, terminal=False)
  baseline = Agent.create(agent="random", **specs, seed=0)
  with pytest.raises(AgentUsageError, match="import_observations is for the 'dqn', 'ddqn', "
                     "'dqn_nstep', 'naf', 'dqfd'.* agents; this agent is 'random'"):
    baseline.import_observations(observations)


# ------------------------------------------------------------------------------ fused


TINY = DQNConfig(hidden_layers=(16,), memory="prioritized_replay", memory_capacity=64,
                 batch_size=8, first_update=32, update_frequency=2, repeat_update=2,
                 target_update_frequency=16, update_target_weight=0.5, n_step=2,
                 double_dqn=True, clip_loss=1.0, beta_steps=500)


@pytest.fixture(scope="module")
def tiny_run():
  return fused_kit("CartPole-v1", 4, make_dqn(TINY), eval_steps=500)


@pytest.mark.gymnax
def test_checkpoint_round_trip_resumes_exactly(tiny_run, tmp_path):
  run_chunk = tiny_run.run_chunk
  sim = tiny_run.init(0)
  # a restored state has the same signature (shapes, dtypes, weak types), so it goes
  # through the programs already compiled
  checkpoint.save(tmp_path / "start", 0, sim)
  signature = lambda tree: [(x.shape, x.dtype, x.weak_type)
                            for x in jax.tree.leaves(jax.eval_shape(lambda t: t, tree))]
  restored, _ = checkpoint.restore(tmp_path / "start", sim)
  assert signature(restored) == signature(sim)
  for _ in range(2):  # 96 steps: the 64-item memory is full and has wrapped
    sim, _ = run_chunk(sim, 6)  # one compiled chunk length for the whole test
  assert int(sim.agent_state.memory.filled) == 16 and int(sim.agent_state.num_updates) > 0
  checkpoint.save(tmp_path, 96, sim)
  restored, _ = checkpoint.restore(tmp_path, sim)
  infos = assert_resumes_exactly(run_chunk, sim, restored, 6)
  assert set(infos) >= {"loss", "td_error", "q_mean", "epsilon", "beta", "priority_mean",
                          "priority_max", "importance_weight"}


def test_object_api_keys():
  context = BuildContext(4, [{"type": "dense", "size": 8}], TWO)
  config = dqn_config({"memory": {"type": "prioritized_replay", "capacity": 500,
                                  "prioritization_weight": 0.7},
                       "update_frequency": 16, "target_sync_frequency": 100,
                       "target_update_weight": 0.1, "huber_loss": 1.0,
                       "optimizer": {"type": "adam", "learning_rate": 3e-4},
                       "actions_exploration": {"type": "epsilon_decay", "half_lives": 5},
                       "device": None}, context)
  assert (config.memory, config.memory_capacity, config.prioritization_weight) == (
      "prioritized_replay", 500, 0.7)
  assert config.update_frequency == 4  # 16 timesteps = 4 rows of 4 streams
  assert (config.target_update_frequency, config.update_target_weight) == (100, 0.1)
  assert (config.clip_loss, config.learning_rate) == (1.0, 3e-4)
  assert json.loads(config.exploration)["type"] == "epsilon_decay"
  assert json.loads(config.network) == [{"type": "dense", "size": 8}]
  types = {t.name: t for t in FAMILY.api_types}
  assert types["ddqn"].build({}, context).name == "ddqn"
  with pytest.raises(ConfigError, match="agent 'ddqn' sets double_dqn=True"):
    types["ddqn"].build({"double_dqn": False}, context)
  assert dqn_config({}, context, "dqn_nstep", defaults={"n_step": 3}).n_step == 3


@pytest.mark.parametrize("name", ["dqn.json", "ddqn.json"])
def test_example_agent_specs_build(name):
  spec = example_agent_spec(name)
  agent_type = {t.name: t for t in FAMILY.api_types}[spec["type"]]
  model = agent_type.build(spec, BuildContext(1, "auto", TWO))
  assert model.name == spec["type"] and model.period == 4


def cartpole_progress(config: DQNConfig, seeds: int, evals: int, iterations: int,
                      seed: int = 0, until=None):
  """Fused CartPole-v1 (8 envs), ``seeds`` runs vmapped: greedy returns before training and
  after each of up to ``evals`` chunks of ``iterations`` iterations, ``[evals + 1, seeds]``
  (fewer rows when ``until(scores)`` stopped it)."""
  kit = fused_kit("CartPole-v1", 8, make_dqn(config), eval_steps=500, num_seeds=seeds)
  scores, infos = learning_curve(kit, kit.init(seed), evals, iterations, until)
  assert infos["loss"].shape == (seeds, iterations)
  return scores


def named(name: str):
  """A named config of the DQN family."""
  return dqn_configs.NAMED[name][0]()


def test_named_configs_build():
  for name in dqn_configs.NAMED:
    exp = named(name)
    assert exp.agent == "dqn" and isinstance(exp.config, DQNConfig)
    if not exp.run.atari:  # dqn_atari: 10M steps, sized for a GPU machine
      assert exp.run.steps <= (50_000 if exp.run.backend == "gymnasium" else 100_000)


def test_minatar_config_uses_the_json_conv_network():
  """dqn_minatar_breakout's network is examples/configs/minatar_conv_network.json; on
  10x10x4 MinAtar observations it is a 3x3 conv to 8x8x16, then 128 units, then 3 Q-values."""
  path = os.path.join(os.path.dirname(__file__), "..", "examples", "configs",
                      "minatar_conv_network.json")
  with open(path) as f:
    assert json.load(f) == dqn_recipes.MINATAR_NETWORK
  exp = named("dqn_minatar_breakout")
  assert exp.run.env == "Breakout-MinAtar" and json.loads(exp.config.network) == (
      dqn_recipes.MINATAR_NETWORK)
  obs = gym.spaces.Box(0.0, 1.0, (10, 10, 4), np.float32)
  shapes = jax.eval_shape(lambda k: make_dqn(exp.config).init(
      k, EnvSpec(obs, gym.spaces.Discrete(3), 8)), jax.random.key(0))
  kernels = [x.shape for x in jax.tree.leaves(shapes.params) if len(x.shape) >= 2]
  assert sorted(kernels) == [(3, 3, 4, 16), (128, 3), (8 * 8 * 16, 128)], kernels


@pytest.mark.gymnax
def test_learns_cartpole_fast(learning_seed):
  """The dqn_cartpole_fused settings with a 64x64 network and half the gradient steps, 2
  seeds vmapped, 10k steps (a few seconds after compiling): greedy returns go from about
  10 (untrained) to well above."""
  config = named("dqn_cartpole_fused").config.replace(hidden_layers=(64, 64),
                                                      repeat_update=64)
  scores = cartpole_progress(config, seeds=2, evals=1, iterations=40,  # 40 x 256 steps
                             seed=learning_seed)
  before, after = scores
  assert (after > 50).all() and (after > 3 * before).all(), scores


@pytest.mark.gymnax
@pytest.mark.slow
@pytest.mark.parametrize("name", ["dqn_cartpole_fused"])
def test_named_fused_configs_reach_475_within_100k_steps(name):
  """3 seeds, evaluation every 4k steps, as the config. DQN on CartPole has a wide spread
  over seeds and swings from one evaluation to the next (measured: 8 of 8 seeds reach 475
  within 100k), so 2 of 3 must. ``ddqn_cartpole`` (measured 4 of 4 seeds within 45k) is
  left out: about 400 s here; the host ``dqn_cartpole`` test below learns with its
  double-Q targets."""
  two_reached = lambda scores: (scores.max(axis=0) >= 475).sum() >= 2
  scores = cartpole_progress(named(name).config, seeds=3, evals=24,
                             iterations=16, until=two_reached)  # 16 x 256 = 4096 steps
  assert two_reached(scores), scores


@pytest.mark.slow
def test_named_host_config_reaches_475_within_50k_steps(tmp_path, learning_seed):
  """dqn_cartpole: host CartPole-v1 envs through batchrl train; best evaluation >= 475
  (measured: seeds 0, 1 and 2 pass; the config's docstring gives 7 of 8 fused seeds within
  49k)."""
  from batchrl.experiment import train
  run_dir = tmp_path / "run"
  exp = configs.apply_overrides(named("dqn_cartpole"), [f"run.seed={learning_seed}"])
  train(exp, run_dir, progress=False, use_tensorboard=False)
  with open(run_dir / "metrics.jsonl") as f:
    rows = [json.loads(line) for line in f]
  evals = [row["mean_score"] for row in rows if row["phase"] == "eval"]
  assert max(row["step"] for row in rows) <= 50_000
  assert max(evals) >= 475, evals
