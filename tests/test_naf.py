"""NAF: the quadratic advantage (<= 0, 0 at mu, equal to -1/2 d^T P d with P positive
definite), action normalization and clipping, Ornstein-Uhlenbeck noise kept per env and reset
at episode ends, TD targets (bootstrap on truncation only), the first_update gate and soft
target updates, both layouts, errors (a discrete space names DQN), object-API keys, a
checkpoint round trip, and learning Pendulum (a small budget; the named config's 30k-step
target is marked slow). Compiled programs are built once per module."""
import json

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import checkpoint
from batchrl.agents.core import Transition
from batchrl.agents.family import BuildContext
from batchrl.agents.naf import NAFConfig, pendulum_naf
from batchrl.agents.naf import model as naf_agent
from batchrl.agents.naf.family import FAMILY
from batchrl.agents.naf.keys import naf_config
from batchrl.agents.naf.model import greedy_actions, import_observations, make_naf
from batchrl.agents.naf.networks import MIN_DIAGONAL, advantage, lower_triangular, precision
from batchrl.configclass import ConfigError
from batchrl.configs import naf as naf_configs
from batchrl.memories import TransitionItem
from batchrl.networks.actions import action_map
from batchrl.specs import EnvSpec
from conftest import assert_resumes_exactly, example_agent_spec, fused_kit, learning_curve, leaves

OBS = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
TORQUE = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


# --------------------------------------------------------------------- the quadratic form


def test_advantage_is_nonpositive_zero_at_mu_and_matches_numpy():
  size, n = 3, 64
  keys = jax.random.split(jax.random.key(0), 3)
  entries = 2.0 * jax.random.normal(keys[0], (n, size * (size + 1) // 2))
  mu = jax.random.uniform(keys[1], (n, size), minval=-1, maxval=1)
  action = jax.random.uniform(keys[2], (n, size), minval=-3, maxval=3)

  @jax.jit
  def compute(entries, mu, action):
    lower = lower_triangular(entries, size)
    return (lower, precision(lower), advantage(mu, lower, action),
            advantage(mu, lower, mu))

  lower, p, adv, at_mu = compute(entries, mu, action)
  adv = np.asarray(adv)
  assert (adv <= 0).all() and (adv < 0).any()
  np.testing.assert_array_equal(np.asarray(at_mu), 0.0)
  p = np.asarray(p, np.float64)
  d = np.asarray(action - mu, np.float64)
  np.testing.assert_allclose(adv, -0.5 * np.einsum("ni,nij,nj->n", d, p, d), rtol=1e-4)
  # L is lower triangular with the entries filled row by row
  l0 = np.asarray(lower[0])
  assert np.allclose(np.triu(l0, 1), 0.0)
  np.testing.assert_allclose(l0[1, 0], entries[0, 1], rtol=1e-6)
  np.testing.assert_allclose(l0[2, 1], entries[0, 4], rtol=1e-6)


def test_precision_is_positive_definite_even_for_extreme_entries():
  entries = jnp.array([[-80.0, 5.0, -80.0], [0.0, -3.0, 0.0], [40.0, 30.0, 40.0]])
  lower, p = jax.jit(lambda e: (lower_triangular(e, 2), precision(lower_triangular(e, 2))))(
      entries)
  diagonal = np.diagonal(np.asarray(lower), axis1=1, axis2=2)
  assert (diagonal >= MIN_DIAGONAL).all()
  eigenvalues = np.linalg.eigvalsh(np.asarray(p, np.float64))
  assert (eigenvalues > 0).all(), eigenvalues


# ---------------------------------------------------------------------------- actions


def test_action_map_normalizes_clips_and_keeps_unbounded_elements():
  space = gym.spaces.Dict({"b": gym.spaces.Box(-np.inf, np.inf, (1,), np.float32),
                           "a": gym.spaces.Box(np.array([0.0, -1.0], np.float32),
                                               np.array([4.0, 1.0], np.float32))})
  amap = action_map(space)
  assert amap.names == ("a", "b") and amap.size == 3
  np.testing.assert_array_equal(amap.bounded, [True, True, False])
  env = amap.to_env(jnp.array([[-1.0, 1.0, 7.0], [3.0, 0.0, -9.0]]))
  np.testing.assert_allclose(env["a"], [[0.0, 1.0], [4.0, 0.0]])  # second row clipped
  np.testing.assert_allclose(env["b"], [[7.0], [-9.0]])
  back = amap.from_env({"a": jnp.array([[2.0, 0.5]]), "b": jnp.array([[3.0]])})
  np.testing.assert_allclose(back, [[0.0, 0.5, 3.0]])


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3),
                                   gym.spaces.Dict({"x": TORQUE,
                                                    "y": gym.spaces.Discrete(2)})])
def test_discrete_actions_say_which_agent_fits(space):
  with pytest.raises(TypeError, match="Use 'dqn'"):
    make_naf(NAFConfig()).init(jax.random.key(0), EnvSpec(OBS, space, 1))
  with pytest.raises(ConfigError, match="'dqn'"):
    naf_config({}, BuildContext(1, "auto", space))


@pytest.mark.parametrize("changes, message", [
    (dict(memory="prioritised_replay"), "did you mean 'prioritized_replay'"),
    (dict(memory_capacity=16, batch_size=32), r"memory_capacity \(16\) is smaller"),
    (dict(update_target_weight=0.0), r"tau\) must be in \(0, 1\]"),
    (dict(exploration='{"type": "gausian"}'), "did you mean 'gaussian'"),
    (dict(network="[{"), "not valid JSON"),
    (dict(first_update=-1), "first_update must be >= 0"),
])
def test_config_errors(changes, message):
  with pytest.raises(ConfigError, match=message):
    NAFConfig(**changes)


# ------------------------------------------------------------------ act, store, targets

OU = NAFConfig(hidden_layers=(8,), memory_capacity=32, batch_size=4, first_update=0)


@pytest.fixture(scope="module")
def ou_agent():
  agent = make_naf(OU)
  spec = EnvSpec(OBS, TORQUE, 3)
  state = jax.jit(lambda key: agent.init(key, spec))(jax.random.key(0))
  return agent, state, jax.jit(agent.act, static_argnums=3), jax.jit(agent.store)


def test_act_explores_within_bounds_and_deterministic_is_mu(ou_agent):
  agent, state, act, _ = ou_agent
  obs = jnp.asarray(np.random.default_rng(0).uniform(-10, 10, (3, 3)), jnp.float32)
  state = state._replace(noise=jnp.full((3, 1), 5.0))  # far outside: must be clipped
  action, extras = act(state, obs, jax.random.key(1), False)
  np.testing.assert_array_equal(np.asarray(action), 2.0)
  assert extras["noise"].shape == (3, 1)
  mu = naf_agent.networks(OU, state.info).outputs(state.params, obs)[1]
  np.testing.assert_allclose(act(state, obs, jax.random.key(1), True)[0], 2.0 * mu,
                             rtol=1e-6)
  np.testing.assert_allclose(greedy_actions(OU, state, obs), 2.0 * mu, rtol=1e-6)


def test_ou_noise_is_kept_per_env_and_reset_at_episode_ends(ou_agent):
  agent, state, act, store = ou_agent
  obs = jnp.zeros((3, 3), jnp.float32)
  action, extras = act(state, obs, jax.random.key(2), False)
  noise = np.asarray(extras["noise"])
  # theta 0.15 pulls towards mu = 0 from a zero start: the first step is pure sigma * N(0, 1)
  assert np.all(noise != 0)
  done = jnp.array([False, True, False])
  transition = Transition(obs, action, jnp.ones(3), done, jnp.zeros(3, bool), obs, extras)
  state = store(state, transition)
  np.testing.assert_allclose(state.noise, noise * np.array([[1.0], [0.0], [1.0]]))
  stored = state.memory.items
  np.testing.assert_allclose(stored.action[0], np.clip(np.asarray(action) / 2.0, -1, 1))
  assert int(state.num_steps) == 3 and int(state.pending) == 1


def test_targets_bootstrap_on_truncation_not_on_termination(ou_agent):
  _, state, _, _ = ou_agent
  nets = naf_agent.networks(OU, state.info)
  next_obs = jnp.asarray(np.random.default_rng(1).normal(size=(3, 3)), jnp.float32)
  items = TransitionItem(jnp.zeros((3, 3)), jnp.zeros((3, 1)), jnp.array([1.0, 2.0, 3.0]),
                         jnp.array([False, True, False]), jnp.array([False, False, True]),
                         next_obs)
  target = naf_agent.targets(OU, nets, state.params, items)
  value = np.asarray(nets.value(state.params, next_obs))
  np.testing.assert_allclose(target, [1 + 0.99 * value[0], 2.0, 3 + 0.99 * value[2]],
                             rtol=1e-6)


def test_import_observations_stores_normalized_actions(ou_agent):
  """Env-unit torques are stored normalized (clipped as store clips); 3 envs take
  consecutive chunks; a non-finite action or a wrong state names field and index."""
  _, state, _, _ = ou_agent
  torques = np.array([[-2.0], [-1.0], [0.0], [1.0], [2.0], [3.0]], np.float32)
  observations = [dict(state=[float(i), 0.0, 0.0], action=torques[i], reward=-float(i),
                       terminal=2 if i == 5 else 0, internal=[]) for i in range(6)]
  imported = import_observations(state, observations)
  items = imported.memory.items
  assert int(imported.memory.filled) == 2 and int(imported.num_steps) == 0
  np.testing.assert_allclose(items.action[:2, :, 0].T, [[-1.0, -0.5], [0.0, 0.5],
                                                        [1.0, 1.0]])
  np.testing.assert_array_equal(items.obs[:2, :, 0].T, [[0, 1], [2, 3], [4, 5]])
  np.testing.assert_array_equal(items.truncated[:2].T, [[0, 0], [0, 0], [0, 1]])
  observations[3]["action"] = [np.nan]
  with pytest.raises(ValueError, match=r"actions at index 3 is \[nan\]"):
    import_observations(state, observations)
  observations[3]["action"] = [1.0]
  observations[1]["state"] = [1.0, 0.0]
  with pytest.raises(ValueError, match=r"states at index 1 has shape"):
    import_observations(state, observations)


def test_object_api_import_observations():
  from batchrl import Agent
  agent = Agent.create(agent="naf", states=dict(type="float", shape=(3,)),
                       actions=dict(type="float", shape=(1,), min_value=-2.0, max_value=2.0),
                       seed=0, memory_capacity=32, batch_size=4,
                       network=[dict(type="dense", size=8)])
  agent.import_observations({"states": np.zeros((4, 3), np.float32),
                             "actions": np.array([[-2.0], [0.0], [1.0], [2.0]]),
                             "rewards": np.zeros(4), "terminals": np.array([0, 0, 0, 1])})
  memory = agent._state.model.memory
  np.testing.assert_allclose(memory.items.action[:4, 0, 0], [-1.0, 0.0, 0.5, 1.0])
  with pytest.raises(ValueError, match=r"actions have shape \(2,\) per observation"):
    agent.import_observations({"states": np.zeros((2, 3)), "actions": np.zeros((2, 2)),
                               "rewards": np.zeros(2), "terminals": np.array([0, 1])})


def test_tree_layout_with_named_states_and_actions():
  obs_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (3,), np.float32),
                               "vel": gym.spaces.Box(-1, 1, (2,), np.float32)})
  act_space = gym.spaces.Dict({"steer": gym.spaces.Box(-1, 1, (2,), np.float32),
                               "gas": gym.spaces.Box(0, 5, (1,), np.float32)})
  network = {"branches": {"pos": [{"type": "dense", "size": 8}],
                          "vel": [{"type": "dense", "size": 4}]}, "combine": "concat"}
  config = NAFConfig(network=json.dumps(network), memory_capacity=8, batch_size=4,
                     first_update=0, update_frequency=2,
                     exploration='{"type": "gaussian", "sigma": 3.0}')
  agent = make_naf(config)
  spec = EnvSpec(obs_space, act_space, 2)
  obs = {"pos": jnp.ones((2, 3)), "vel": jnp.zeros((2, 2))}

  @jax.jit
  def run(key):
    state = agent.init(key, spec)
    action, extras = agent.act(state, obs, key, False)
    transition = Transition(obs, action, jnp.ones(2), jnp.zeros(2, bool), jnp.zeros(2, bool),
                            obs, extras)
    state = agent.store(agent.store(state, transition), transition)
    return state, action, extras, agent.update(state)[1]

  state, action, extras, metrics = run(jax.random.key(0))
  assert state.info.layout == "tree" and state.noise == () and extras == {}
  assert action["steer"].shape == (2, 2) and action["gas"].shape == (2, 1)
  assert (np.abs(action["steer"]) <= 1).all()
  assert ((action["gas"] >= 0) & (action["gas"] <= 5)).all()
  np.testing.assert_allclose(state.memory.items.action[0, 0],
                             np.concatenate([np.asarray(action["gas"][0]) / 2.5 - 1,
                                             action["steer"][0]]), rtol=1e-6)
  assert float(metrics["learning"]) == 1.0 and np.isfinite(float(metrics["loss"]))


# ------------------------------------------------------------------------------ fused

TINY = NAFConfig(hidden_layers=(16,), memory="prioritized_replay", memory_capacity=64,
                 batch_size=8, first_update=16, update_frequency=2, repeat_update=2,
                 target_update_frequency=24, update_target_weight=0.5, clip_loss=1.0,
                 beta_steps=500)


@pytest.fixture(scope="module")
def tiny_run():
  return fused_kit("Pendulum-v1", 2, make_naf(TINY), eval_steps=200)


@pytest.mark.gymnax
def test_first_update_gate_and_soft_target_update(tiny_run, tmp_path):
  run_chunk = tiny_run.run_chunk
  sim = tiny_run.init(0)
  checkpoint.save(tmp_path / "start", 0, sim)  # strongly typed leaves: one compiled chunk
  sim, _ = checkpoint.restore(tmp_path / "start", sim)
  start = sim.agent_state
  sim, infos = run_chunk(sim, 6)  # updates after 4, 8, .., 24 steps (2 envs x 2 stores)
  np.testing.assert_array_equal(infos["learning"], [0, 0, 0, 1, 1, 1])  # from step 16
  np.testing.assert_array_equal(infos["loss"][:3], 0.0)
  np.testing.assert_array_equal(infos["target_synced"], [0, 0, 0, 0, 0, 1])  # at step 24
  state = sim.agent_state
  assert int(state.num_updates) == 3 and int(state.last_sync) == 1
  # the one target update came last: target = 0.5 online + 0.5 initial parameters
  for t, p, old in zip(leaves(state.target_params), leaves(state.params),
                       leaves(start.params)):
    np.testing.assert_allclose(t, 0.5 * p + 0.5 * old, rtol=1e-6, atol=1e-7)
  assert any(not np.array_equal(p, old) for p, old in zip(leaves(state.params),
                                                          leaves(start.params)))


@pytest.mark.gymnax
def test_checkpoint_round_trip_resumes_exactly(tiny_run, tmp_path):
  agent, run_chunk = tiny_run.agent, tiny_run.run_chunk
  sim = tiny_run.init(1)
  checkpoint.save(tmp_path / "start", 0, sim)
  sim, _ = checkpoint.restore(tmp_path / "start", sim)
  for _ in range(3):  # 72 steps: the 64-item memory is full and has wrapped
    sim, _ = run_chunk(sim, 6)
  checkpoint.save(tmp_path, 72, sim)
  restored, _ = checkpoint.restore(tmp_path, sim)
  obs = sim.obs
  np.testing.assert_array_equal(agent.act(sim.agent_state, obs, jax.random.key(3), False)[0],
                                agent.act(restored.agent_state, obs, jax.random.key(3),
                                          False)[0])
  infos = assert_resumes_exactly(run_chunk, sim, restored, 6)
  assert set(infos) >= {"loss", "td_error", "q_mean", "v_mean", "advantage_mean",
                          "noise_scale", "memory_size", "importance_weight"}


# ---------------------------------------------------------------------------- object API


def test_object_api_keys():
  context = BuildContext(4, [{"type": "dense", "size": 8}], TORQUE)
  config = naf_config({"memory": {"type": "prioritized_replay", "capacity": 500},
                       "update_frequency": 16, "target_sync_frequency": 100,
                       "target_update_weight": 0.1, "huber_loss": 1.0,
                       "optimizer": {"type": "adam", "learning_rate": 3e-4},
                       "actions_exploration": {"type": "gaussian", "sigma": 0.2},
                       "device": None}, context)
  assert (config.memory, config.memory_capacity) == ("prioritized_replay", 500)
  assert config.update_frequency == 4  # 16 timesteps = 4 rows of 4 streams
  assert (config.target_update_frequency, config.update_target_weight) == (100, 0.1)
  assert (config.clip_loss, config.learning_rate) == (1.0, 3e-4)
  assert json.loads(config.exploration) == {"type": "gaussian", "sigma": 0.2}
  assert json.loads(config.network) == [{"type": "dense", "size": 8}]
  with pytest.raises(ConfigError, match="double_q_model does not apply"):
    naf_config({"double_q_model": True}, context)
  with pytest.raises(ConfigError, match="epsilon_anneal.*unknown key 'sigma'"):
    naf_config({"actions_exploration": {"type": "epsilon_anneal", "sigma": 1}}, context)


def test_example_agent_spec_builds():
  model = FAMILY.api_types[0].build(example_agent_spec("naf.json"),
                                    BuildContext(1, "auto", TORQUE))
  assert model.name == "naf" and model.period == 1


def test_named_config_builds():
  exp = naf_configs.naf_pendulum()
  assert exp.agent == "naf" and exp.run.steps == 30_000 and exp.config == pendulum_naf()


# ---------------------------------------------------------------------------- learning


def pendulum_progress(config: NAFConfig, seeds: int, evals: int, iterations: int,
                      seed: int = 0):
  """Fused Pendulum-v1 (4 envs), ``seeds`` runs vmapped: greedy returns before training and
  after each of ``evals`` chunks of ``iterations`` iterations, ``[evals + 1, seeds]``."""
  kit = fused_kit("Pendulum-v1", 4, make_naf(config), eval_steps=200, num_seeds=seeds)
  return learning_curve(kit, kit.init(seed), evals, iterations)[0]


@pytest.mark.gymnax
@pytest.mark.slow
def test_named_config_learns_pendulum_and_reaches_minus_250_within_20k_steps():
  """The naf_pendulum settings, 3 seeds, a greedy evaluation every 5k steps: each seed starts
  below -1100 (untrained, about -1500), is above -900 at 10k and reaches -250 by 20k.
  Measured (2026-12-07, seeds 0-2 vmapped) every 5k steps to 30k: -1602/-1509/-1514
  untrained, -1308/-1412/-1327, -503/-646/-167, -157/-122/-203, -182/-124/-128,
  -189/-271/-126, -168/-191/-131: the best by 20k is -157/-122/-128, 93 above the bar at
  least (the test stopped at 30k before, a third longer for the same assertions)."""
  scores = pendulum_progress(pendulum_naf(), seeds=3, evals=4, iterations=1250)
  assert (scores[0] < -1100).all() and (scores[2] > -900).all(), scores
  assert (scores.max(axis=0) >= -250).all(), scores
