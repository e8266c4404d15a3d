"""The object API: ``batchrl.Agent.create`` / ``act`` / ``observe`` / ``save`` / ``load``."""
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import Agent, compilation_cache, measured
from batchrl.agent import AgentUsageError, StreamAheadError
from batchrl.agent.dispatch import prefer_compilation_cache
from batchrl.agents.core import Transition
from batchrl.agents.family import BuildContext
from batchrl.agents.ppo import model as ppo_agent
from batchrl.agents.ppo.keys import ppo_config
from batchrl.configclass import ConfigError
from conftest import leaves

CARTPOLE = dict(states=dict(type="float", shape=(4,)), actions=dict(type="int", num_values=2))
MLP = [dict(type="dense", size=16), dict(type="dense", size=16)]
SMALL = dict(batch_size=8, optimizer_batch_size=4, epochs=2)


def small_agent(**kwargs):
  spec = dict(CARTPOLE, network=MLP, seed=0, **SMALL)
  spec.update(kwargs)
  return Agent.create("ppo", **spec)


@pytest.fixture(scope="module")
def cartpole_agent():
  return small_agent()


def obs(i=0):
  return np.array([0.1, -0.2, 0.05 * i, 0.3], np.float32)


def test_single_state_gives_python_scalar_and_observe_reports_updates():
  agent = small_agent()
  updates = []
  for t in range(17):
    action = agent.act(obs(t))
    assert isinstance(action, int) and action in (0, 1)
    updates.append(agent.observe(1.0, terminal=(t % 5 == 4)))
  # 8 timesteps per update: the 8th transition is committed by the 9th act
  assert updates.index(True) == 8 and sum(updates) == 2
  assert agent.updates == 2 and agent.timesteps == 17 and agent.episodes == 3


def test_act_observe_order_errors(cartpole_agent):
  agent = small_agent()
  with pytest.raises(AgentUsageError, match="without an act"):
    agent.observe(1.0, False)
  agent.act(obs())
  with pytest.raises(AgentUsageError, match="act called twice for stream 0"):
    agent.act(obs())
  agent.observe(1.0, False)
  with pytest.raises(AgentUsageError, match="out of range.*parallel_interactions=1"):
    agent.act(obs(), parallel=[3])
  with pytest.raises(AgentUsageError, match="terminal must be a bool or 0/1/2"):
    agent.act(obs())
    agent.observe(1.0, terminal=5)


def test_bad_states_are_clear_errors(cartpole_agent):
  with pytest.raises(AgentUsageError, match=r"must have shape \(4,\)"):
    cartpole_agent.act(np.zeros(3))
  with pytest.raises(AgentUsageError, match="NaN or inf"):
    cartpole_agent.act(np.array([0, np.nan, 0, 0]))
  with pytest.raises(AgentUsageError, match="single unnamed state"):
    cartpole_agent.act({"x": np.zeros(4)})


def test_unknown_agent_and_keys_name_the_closest():
  with pytest.raises(ConfigError, match="(?i)did you mean 'ppo'"):
    Agent.create("ppp", **CARTPOLE)
  with pytest.raises(ConfigError, match="multiple of parallel_interactions"):
    Agent.create("ppo", batch_size=10, parallel_interactions=4, **CARTPOLE)
  with pytest.raises(ConfigError, match="mean the same thing"):
    Agent.create("ppo", epochs=3, optimization_steps=4, **CARTPOLE)


def test_tensorforce_keys_map_to_ppo_config():
  context = BuildContext(2, MLP, None)
  config = ppo_config(dict(batch_size=4096, gae_lambda=0.97, entropy_penalty=0.01,
                                    epochs=5, optimizer_batch_size=512, loss_clipping=0.2,
                                    step_optimizer=dict(type="adam", learning_rate=1e-2),
                                    discount=0.98), context)
  assert config.rollout_length == 2048 and config.batch_size == 512
  assert config.update_epochs == 5 and config.entropy_coef == 0.01
  assert config.clip_range == 0.2 and config.policy_objective == "clip"
  assert config.learning_rate == 1e-2 and config.discount == 0.98 and config.gae_lambda == 0.97
  later = ppo_config(dict(entropy_regularization=0.02, optimization_steps=7,
                                   likelihood_ratio_clipping=0.1), context)
  assert (later.entropy_coef, later.update_epochs, later.clip_range) == (0.02, 7, 0.1)


def test_create_from_json_file(tmp_path):
  path = tmp_path / "ppo.json"
  path.write_text(json.dumps({"type": "ppo_agent", "batch_size": 8,
                              "optimizer_batch_size": 8, "learning_rate": 1e-3}))
  agent = Agent.create(str(path), network=MLP, seed=0, **CARTPOLE)
  assert agent.spec["type"] == "ppo_agent" and agent.spec["config"]["batch_size"] == 8
  bad = tmp_path / "bad.json"
  bad.write_text('{"type": "ppo",}')
  with pytest.raises(ConfigError, match="bad.json.*not valid JSON.*line 1"):
    Agent.create(str(bad), **CARTPOLE)


def test_several_states_and_actions_with_masks_and_streams():
  states = dict(pos=dict(type="float", shape=(3,)), item=dict(type="int", num_values=5),
                flag=dict(type="bool", shape=(2,)), move_mask=dict(type="bool", shape=(4,)))
  actions = dict(move=dict(type="int", num_values=4), grip=dict(type="bool"),
                 force=dict(type="float", shape=(2,), min_value=-1.0, max_value=1.0))
  agent = Agent.create("ppo", states=states, actions=actions, seed=1, batch_size=16,
                       optimizer_batch_size=8, parallel_interactions=2,
                       preprocessing=dict(pos=[dict(type="clip", min_value=-1, max_value=1)]),
                       exploration=dict(move=0.5, force=dict(type="gaussian", sigma=0.2)))
  rng = np.random.default_rng(0)

  def batch(k):
    return dict(pos=rng.normal(size=(k, 3)).astype(np.float32), item=rng.integers(0, 5, k),
                flag=rng.random((k, 2)) < 0.5, move_mask=np.array([[1, 0, 1, 0]] * k, bool))

  moves = []
  for t in range(40):
    action = agent.act(batch(2))
    moves.extend(action["move"].tolist())
    assert action["grip"].dtype == bool and action["force"].shape == (2, 2)
    assert np.all(np.abs(action["force"]) <= 1.0)
    agent.observe(np.ones(2), np.array([t % 7 == 6, 0]))
  assert set(moves) == {0, 2}  # masked moves never taken, even exploring (epsilon 0.5)
  assert agent.updates >= 4
  single = agent.act(jax.tree.map(lambda x: x[0], batch(1)), parallel=1)
  assert isinstance(single["move"], int) and isinstance(single["grip"], bool)
  agent.observe(0.0, False, parallel=1)
  with pytest.raises(AgentUsageError, match="missing"):
    agent.act(dict(pos=np.zeros(3)), parallel=0)
  with pytest.raises(AgentUsageError, match="allows no action"):
    agent.act(dict(batch(1), move_mask=np.zeros((1, 4), bool)), parallel=[0])


def test_masked_actions_never_sampled_nor_mode():
  states = dict(x=dict(type="float", shape=(2,)), action_mask=dict(type="bool", shape=(3,)))
  agent = Agent.create("ppo", states=states, actions=dict(type="int", num_values=3), seed=3,
                       network=MLP, **SMALL)
  rng = np.random.default_rng(1)
  k = 10_000
  masks = rng.random((k, 3)) < 0.5
  masks[~masks.any(axis=1), 1] = True
  batch = dict(x=rng.normal(size=(k, 2)).astype(np.float32), action_mask=masks)
  for deterministic in (False, True):
    actions = agent.act(batch, independent=True, deterministic=deterministic)
    assert masks[np.arange(k), actions].all()


def test_streams_out_of_step_are_staged_and_limited():
  agent = small_agent(parallel_interactions=2, batch_size=8)
  for t in range(10):  # stream 1 runs ahead: its transitions wait for stream 0
    if t == 9:
      with pytest.raises(StreamAheadError, match="stream 1 is 8 steps ahead of stream 0"):
        agent.act(obs(t), parallel=1)
      break
    agent.act(obs(t), parallel=1)
    agent.observe(1.0, False, parallel=1)
  assert agent.updates == 0
  for t in range(9):  # stream 0 catches up; rows complete, 4 rows per update
    agent.act(obs(t), parallel=0)
    agent.observe(1.0, False, parallel=0)
  assert agent.updates == 2


def _host(tree):
  def leaf(x):
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
      x = jax.random.key_data(x)
    return np.asarray(x)
  return jax.tree.map(leaf, tree)


def test_independent_acting_changes_nothing(cartpole_agent):
  before = _host(cartpole_agent._state)
  steps = cartpole_agent.timesteps
  first = cartpole_agent.act(obs(), independent=True, deterministic=True)
  again = cartpole_agent.act(obs(), independent=True, deterministic=True)
  assert first == again and cartpole_agent.timesteps == steps
  after = _host(cartpole_agent._state)
  jax.tree.map(np.testing.assert_array_equal, before, after)
  assert cartpole_agent.initial_internals() == {}


def test_restore_takes_a_checkpoint_of_the_same_spec_only(tmp_path):
  """``save`` names the checkpoint by timesteps; ``restore`` loads it into an agent of the
  same spec and refuses another. (``Agent.load`` round trips of every agent are in
  tests/agents/test_contract.py.)"""
  agent = small_agent()
  for t in range(12):
    agent.act(obs(t))
    agent.observe(1.0, t % 4 == 3)
  path = agent.save(tmp_path / "agent")
  assert path.endswith("ckpt-000000000012")
  fresh = small_agent()
  fresh.restore(tmp_path / "agent")
  assert (fresh.timesteps, fresh.updates, fresh.episodes) == (12, 1, 3)
  probes = np.random.default_rng(2).normal(size=(32, 4)).astype(np.float32)
  np.testing.assert_array_equal(agent.act(probes, independent=True, deterministic=True),
                                fresh.act(probes, independent=True, deterministic=True))
  with pytest.raises(ConfigError, match="another spec"):
    small_agent(learning_rate=0.5).restore(tmp_path / "agent")


def test_load_errors_name_the_problem(tmp_path):
  with pytest.raises(FileNotFoundError, match="does not exist"):
    Agent.load(tmp_path / "nowhere")
  (tmp_path / "empty").mkdir()
  with pytest.raises(FileNotFoundError, match="agent.json is missing"):
    Agent.load(tmp_path / "empty")
  agent = small_agent()
  agent.save(tmp_path / "a")
  state_file = next((tmp_path / "a").glob("ckpt-*/state.msgpack"))
  state_file.write_bytes(b"garbage")
  with pytest.raises(Exception, match="state.msgpack"):
    with pytest.warns(Warning):
      Agent.load(tmp_path / "a")


def _ppo_parts(agent):
  config = ppo_config(dict(agent.spec["config"]), BuildContext(
      agent.parallel_interactions, agent.spec["network"], agent._rt.action_space))
  return config, ppo_agent._networks(config, agent._state.model.info)


def test_terminal_2_bootstraps_from_next_state():
  agent = small_agent(gae_lambda=0.0, discount=0.9)
  final = np.array([1.0, 2.0, -1.0, 0.5], np.float32)
  agent.act(obs(0))
  agent.observe(1.0, False)
  agent.act(obs(1))
  agent.observe(2.0, terminal=2, next_states=final)
  agent.act(obs(2))  # commits the cut step with its next state
  model = agent._state.model
  assert bool(model.buffer.truncated[1, 0]) and not bool(model.buffer.terminated[1, 0])
  np.testing.assert_allclose(model.buffer.next_obs[1, 0], final)
  config, nets = _ppo_parts(agent)
  data = ppo_agent.prepare(config, nets, model)
  value = nets.value(model.params, jnp.asarray(final)[None])[0]
  # lambda 0: the target of a cut step is r + discount * V(next state)
  np.testing.assert_allclose(data.returns[1, 0], 2.0 + 0.9 * value, rtol=1e-5)
  next_value = nets.value(model.params, jnp.asarray(obs(1))[None])[0]
  np.testing.assert_allclose(data.returns[0, 0], 1.0 + 0.9 * next_value, rtol=1e-5)


def test_object_api_update_equals_the_model_functions_on_the_same_experience():
  """What the fused driver runs (store a period of rows, then update) on the experience the
  object API collected gives the same parameters as the object API's own update."""
  a = small_agent()
  for t in range(8):
    a.act(obs(t))
    a.observe(0.5 * t, t == 3)
  # before the 9th act: 7 rows stored, the 8th transition pending
  state = jax.tree.map(jnp.copy, a._state)
  model = a._rt.parts.model
  row = Transition(state.obs, state.action, jnp.array([3.5]), jnp.array([False]),
                   jnp.array([False]), jnp.asarray(obs(8))[None], state.extras)
  expected, _ = model.update(model.store(state.model, row))
  a.act(obs(8))
  assert a.observe(0.0, False)  # a's 9th act ran the update
  jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7),
               a._state.model.params, expected.params)


@pytest.mark.slow
def test_quickstart_learns_cartpole():
  """The seed's quick start as shipped: a last-100 mean of 195 within its episode budget."""
  import importlib.util
  import pathlib
  path = pathlib.Path(__file__).parents[1] / "examples" / "quickstart.py"
  spec = importlib.util.spec_from_file_location("quickstart", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  assert module.main() >= 195.0


def test_json_spec_errors_name_the_file_without_a_chained_traceback(tmp_path):
  agent_file = tmp_path / "agent.json"
  agent_file.write_text(json.dumps({"type": "ppo", "batch_sise": 8}))
  with pytest.raises(ConfigError, match=r"agent spec file '.*agent\.json': unknown key "
                     "'batch_sise'") as error:
    Agent.create(str(agent_file), network=MLP, **CARTPOLE)
  assert error.value.__cause__ is None and error.value.__suppress_context__
  network_file = tmp_path / "net.json"
  network_file.write_text(json.dumps([{"type": "dense", "size": "x"}]))
  with pytest.raises(ConfigError, match=r"network spec file '.*net\.json': .*size") as error:
    Agent.create("ppo", network=str(network_file), **CARTPOLE, **SMALL)
  assert error.value.__cause__ is None and error.value.__suppress_context__
  with pytest.raises(ConfigError, match="^unknown key 'batch_sise'"):  # no file: as before
    Agent.create({"type": "ppo", "batch_sise": 8}, network=MLP, **CARTPOLE)


def test_a_reward_that_is_not_a_number_is_named():
  agent = small_agent()
  agent.act(obs())
  for reward in ("one", ["x"], {"r": 1}):
    with pytest.raises(AgentUsageError, match="reward must be a number"):
      agent.observe(reward)
  agent.observe(1.0)  # nothing was recorded: the step goes on
  parallel = small_agent(parallel_interactions=2)
  parallel.act(np.stack([obs(), obs(1)]))
  with pytest.raises(AgentUsageError, match=r"reward must be a number.*\['a', 'b'\]"):
    parallel.observe(["a", "b"])


# ------------------------------------------------------------- numpy rewards and terminals


def _drive(reward_as, terminal_as, steps=19):
  """Actions and the final state of an agent fed ``reward_as(r)``/``terminal_as(t)``."""
  agent = small_agent()
  actions = []
  for t in range(steps):
    actions.append(agent.act(obs(t)))
    agent.observe(reward_as(0.1 * t + 1e-9), terminal_as(t % 7 == 6))
  return actions, agent


@functools.lru_cache(maxsize=1)
def _references():
  """Python numbers (the scalar path) and batches of one (the general path)."""
  return _drive(float, bool), _drive(lambda r: np.array([r]), lambda t: np.array([t]))


@pytest.mark.parametrize("reward_as, terminal_as", [
    (np.float64, np.bool_), (np.float32, bool), (np.array, np.array),
    (lambda r: np.array(r, np.float64), int), (float, np.int64)])
def test_numpy_and_0d_rewards_and_terminals_store_what_python_numbers_store(reward_as,
                                                                            terminal_as):
  (expected_actions, expected), (batch_actions, batch) = _references()
  actions, agent = _drive(reward_as, terminal_as)
  assert actions == expected_actions == batch_actions
  assert agent.updates == expected.updates == 2 and agent.episodes == expected.episodes == 2
  np.testing.assert_array_equal(agent._streams.reward, expected._streams.reward)
  np.testing.assert_array_equal(agent._streams.terminal, expected._streams.terminal)
  for got, want, via_batch in zip(leaves(agent._state), leaves(expected._state),
                                  leaves(batch._state)):
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, via_batch)


def test_scalar_observe_takes_numpy_numbers_and_declines_the_rest():
  agent = small_agent()
  streams = agent._streams
  for reward, terminal in [(np.float64(0.5), np.bool_(False)), (np.array(0.25), np.array(2)),
                           (np.int64(3), np.int32(1)), (np.float32(-1.5), 0)]:
    agent.act(obs())
    assert streams.observe_one(reward, terminal) is False  # taken: no update ran
    assert streams.reward[0] == np.float32(reward)
  agent.act(obs())
  for reward, terminal in [(np.float64("nan"), False), (True, False), (np.array([1.0]), False),
                           (1.0, np.array([True])), (1.0, 5), ("1", False), (1e39, False)]:
    assert streams.observe_one(reward, terminal) is None  # the general path checks these
  assert streams.acted[0]  # nothing changed


def test_numpy_nan_reward_is_still_an_error():
  agent = small_agent()
  agent.act(obs())
  with pytest.raises(AgentUsageError, match="reward must be finite"):
    agent.observe(np.float64("nan"), np.bool_(False))


# ------------------------------------------------------------- batches vs streams


def test_a_batch_larger_than_the_streams_says_how_to_create_the_agent(cartpole_agent):
  with pytest.raises(AgentUsageError) as e:
    cartpole_agent.act(np.zeros((5, 4), np.float32))
  assert str(e.value) == (
      "this agent acts for one stream (parallel_interactions=1) but got a batch of 5 states "
      "(shape (5, 4)); create it with parallel_interactions=5 (or pass one state).")
  agent = small_agent()
  agent.act(obs())
  with pytest.raises(AgentUsageError) as e:
    agent.observe(np.ones(2), False)
  assert str(e.value) == (
      "this agent acts for one stream (parallel_interactions=1) but got a batch of 2 rewards "
      "(shape (2,)); create it with parallel_interactions=2 (or pass one reward).")
  with pytest.raises(AgentUsageError) as e:
    agent.observe(1.0, np.zeros(3, bool))
  assert str(e.value) == (
      "this agent acts for one stream (parallel_interactions=1) but got a batch of 3 "
      "terminals (shape (3,)); create it with parallel_interactions=3 (or pass one terminal).")
  assert agent.observe(1.0, False) is False  # nothing was recorded by the failed calls


def test_a_batch_larger_than_several_streams_names_both_counts():
  agent = small_agent(parallel_interactions=2)
  with pytest.raises(AgentUsageError) as e:
    agent.act(np.zeros((3, 4), np.float32))
  assert str(e.value) == (
      "this agent acts for 2 streams (parallel_interactions=2) but got a batch of 3 states "
      "(shape (3, 4)); create it with parallel_interactions=3 (or pass at most 2 states).")
  agent.act(np.zeros((2, 4), np.float32))
  with pytest.raises(AgentUsageError) as e:
    agent.observe(np.ones(3), np.zeros(3, bool))
  assert str(e.value) == (
      "this agent acts for 2 streams (parallel_interactions=2) but got a batch of 3 rewards "
      "(shape (3,)); create it with parallel_interactions=3 (or pass at most 2 rewards).")
  with pytest.raises(AgentUsageError) as e:
    agent.observe(np.ones(2), np.zeros(3, bool))
  assert str(e.value) == (
      "this agent acts for 2 streams (parallel_interactions=2) but got a batch of 3 "
      "terminals (shape (3,)); create it with parallel_interactions=3 (or pass at most 2 "
      "terminals).")
  with pytest.raises(AgentUsageError) as e:
    agent.observe(1.0, np.zeros(2, bool), parallel=0)
  assert str(e.value) == ("reward is one value but terminal has shape (2,); give one "
                          "terminal per reward.")


# ------------------------------------------------------------- creating: errors, summary

PENDULUM = dict(states=dict(type="float", shape=(3,)),
                actions=dict(type="float", shape=(1,), min_value=-2.0, max_value=2.0))


def test_a_spec_the_model_cannot_build_fails_at_create_not_at_first_act():
  with pytest.raises(ConfigError) as e:
    Agent.create("sac", states=dict(type="float", shape=(3,)),
                 actions=dict(type="int", num_values=2), target_entropy=5.0, seed=0)
  assert str(e.value).startswith("cannot build agent 'sac' for these states/actions: "
                                 "sac.target_entropy must be below log 2")


def test_summary_shows_the_networks_the_defaults_built():
  agent = Agent.create("sac", seed=3, **PENDULUM)
  lines = agent.summary().splitlines()
  assert lines[0] == ('sac agent: states float (3,), actions float (1,), 1 stream, '
                      'network="auto", seed 3')
  actor, critic, alpha = lines[1:]
  # the auto torso: dense(64) on the state, two dense(64); heads for mean and log std
  assert actor.startswith("  actor: 8,706 parameters; weights ")
  assert "torso/branch_state_0_dense 3x64" in actor and "mean 64x1" in actor
  # each of the two critics: its own torso, then critic_layers (256, 256) on [features, action]
  assert critic.startswith("  critic: 183,042 parameters; weights ")
  assert "critic_1/MLP_0/Dense_0 65x256" in critic and "critic_1/MLP_0/Dense_1 256x256" in critic
  assert alpha == "  log_alpha: 1 parameter"
  narrow = Agent.create("sac", seed=3, critic_layers=[64, 64], **PENDULUM)
  assert "critic_0/MLP_0/Dense_1 64x64" in narrow.summary()


def test_summary_names_several_states_and_streams():
  agent = small_agent(parallel_interactions=2, network="auto", states=dict(
      position=dict(type="float", shape=(2,)), flag=dict(type="bool")))
  head = agent.summary().splitlines()[0]
  assert head == ("ppo agent: states {position: float (2,), flag: bool}, actions int "
                  '(2 values), 2 streams, network="auto", seed 0')


def test_agents_keep_programs_in_the_compilation_cache_unless_a_directory_is_set(
    tmp_path, monkeypatch):
  saved = compilation_cache.settings()
  monkeypatch.delenv("BATCHRL_COMPILATION_CACHE", raising=False)
  try:
    jax.config.update("jax_compilation_cache_dir", None)
    monkeypatch.setenv("BATCHRL_CACHE_DIR", str(tmp_path / "first"))
    prefer_compilation_cache()
    assert compilation_cache.settings() == (str(tmp_path / "first"),
                                            measured.MIN_COMPILE_SECONDS)
    monkeypatch.setenv("BATCHRL_CACHE_DIR", str(tmp_path / "second"))
    prefer_compilation_cache()  # a directory is set (the user's, or an earlier agent's)
    assert compilation_cache.settings()[0] == str(tmp_path / "first")
    jax.config.update("jax_compilation_cache_dir", None)
    monkeypatch.setenv("BATCHRL_COMPILATION_CACHE", "0")
    prefer_compilation_cache()
    assert not compilation_cache.settings()[0]
  finally:
    jax.config.update("jax_compilation_cache_dir", saved[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", saved[1])
