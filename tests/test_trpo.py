"""TRPO: conjugate gradient, Fisher-vector products against an explicit Fisher, the line
search, config and key errors, both space layouts and (small budget, then marked slow)
learning with the fused driver. Compiled programs are shared per module. What every agent
must do (save / load, key errors, creating from an env) is tests/agents/test_contract.py."""
import json
import time

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl.agents.family import BuildContext
from batchrl.agents.policy_gradient import model as pg_common
from batchrl.agents.policy_gradient.networks import make_networks
from batchrl.agents.trpo import TRPOConfig, cartpole_fused, optim, pendulum_fused
from batchrl.agents.trpo import keys as spec
from batchrl.agents.trpo import model as trpo_agent
from batchrl.agents.trpo.family import FAMILY
from batchrl.agents.trpo.model import make_trpo
from batchrl.configclass import ConfigError
from batchrl.envs.jax_env import make_vec
from batchrl.networks.mlp import reset_carry
from batchrl.simulation import env_spec, simulate
from batchrl.simulation import init as init_simulation
from batchrl.specs import EnvSpec
from conftest import best_score, fill_and_update, fused_kit, train_chunks

NUM_ENVS = 4
TINY = dict(policy_layers=(8,), baseline_layers=(8,), rollout_length=16, baseline_steps=2)


# ------------------------------------------------------------------ conjugate gradient


def _spd(n: int, seed: int = 0) -> np.ndarray:
  rng = np.random.default_rng(seed)
  m = rng.normal(size=(n, n))
  return m @ m.T + n * np.eye(n)


def test_conjugate_gradient_solves_an_spd_system():
  a, b = _spd(6), np.arange(1.0, 7.0)
  x, residual = optim.conjugate_gradient(lambda v: jnp.asarray(a) @ v, jnp.asarray(b), 6)
  np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-4, atol=1e-5)
  assert float(residual) < 1e-3 * np.linalg.norm(b)


def test_conjugate_gradient_reports_its_residual_and_stops_early():
  a, b = _spd(8, seed=1), np.ones(8)
  x, residual = optim.conjugate_gradient(lambda v: jnp.asarray(a) @ v, jnp.asarray(b), 2)
  true_residual = np.linalg.norm(b - a @ np.asarray(x))
  assert true_residual > 1e-3  # two iterations do not solve an 8-d system
  assert float(residual) == pytest.approx(true_residual, rel=1e-3)
  x, residual = optim.conjugate_gradient(lambda v: v, jnp.ones(3), 50)  # identity: one step
  np.testing.assert_allclose(np.asarray(x), np.ones(3), rtol=1e-6)
  assert float(residual) == 0.0


# ------------------------------------------------------------ Fisher-vector products


def _categorical_setup():
  """A tiny categorical policy (2 inputs, 3 actions, 4 hidden) and 5 states."""
  config = TRPOConfig(policy_layers=(4,), baseline_mode="none", rollout_length=5,
                      init_output_factor=1.0)
  info = pg_common.space_info(EnvSpec(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(3),
                                      1), "flat")
  nets = make_networks(config, info)
  params = nets.init(jax.random.key(0))["policy"]
  obs = jax.random.normal(jax.random.key(1), (5, 1, 2))
  batch = pg_common.Batch(obs, jnp.zeros((5, 1), jnp.int32), jnp.zeros((5, 1)),
                          jnp.zeros((5, 1)), jnp.zeros((5, 1)), jnp.zeros((5, 1), bool), ())
  return config, nets, params, batch


def test_fisher_vector_product_equals_the_explicit_fisher():
  config, nets, params, batch = _categorical_setup()
  _, kl_fn, flat, unravel = trpo_agent.surrogate_and_kl(config, nets, params, batch)

  def log_probs(theta):  # [5, 3] log pi(a | s) for every state and action
    dist = nets.policy(unravel(theta), (), batch.obs[:, 0])[1]
    return jax.nn.log_softmax(dist.logits)

  # F = mean_s sum_a pi(a|s) grad log pi(a|s) grad log pi(a|s)^T, formed explicitly from
  # the scores (jacobian [5, 3, P]), not from the KL
  v = jax.random.normal(jax.random.key(2), flat.shape)

  @jax.jit
  def products(v, damping):
    scores = jax.jacobian(log_probs)(flat)
    fisher = jnp.einsum("sa,sap,saq->pq", jnp.exp(log_probs(flat)), scores, scores) / 5
    return optim.fisher_vector_product(kl_fn, flat, damping)(v), fisher @ v + damping * v

  for damping in (0.0, 0.1):
    product, explicit = products(v, damping)
    np.testing.assert_allclose(np.asarray(product), np.asarray(explicit), rtol=1e-4,
                               atol=1e-6)


# --------------------------------------------------------------------- line search


def _quadratic_problem(kl_scale: float):
  """Linear objective g.theta; KL = kl_scale * |theta|^2 / 2 around theta = 0."""
  g = jnp.array([1.0, 2.0])
  return (lambda theta: jnp.vdot(g, theta),
          lambda theta: 0.5 * kl_scale * jnp.vdot(theta, theta), g)


def test_line_search_rejects_steps_that_break_the_kl_bound():
  objective, kl_fn, g = _quadratic_problem(kl_scale=1e6)
  params = jnp.zeros(2)
  step = g  # improves the objective, but every shrunk step has KL > 0.01
  result = optim.line_search(objective, kl_fn, params, step, jnp.vdot(g, step), max_kl=0.01,
                             max_steps=10, accept_ratio=0.1, shrink=0.5)
  assert not bool(result.accepted) and int(result.steps) == 10
  np.testing.assert_array_equal(np.asarray(result.params), np.asarray(params))
  assert float(result.improvement) == 0.0 and float(result.kl) == 0.0


def test_line_search_backtracks_to_the_first_step_within_the_bound():
  objective, kl_fn, g = _quadratic_problem(kl_scale=1.0)
  # KL(f * g) = f^2 * 5 / 2 <= 0.1 needs f <= 0.2: 0.5^3 = 0.125 is the first
  result = optim.line_search(objective, kl_fn, jnp.zeros(2), g, jnp.vdot(g, g), max_kl=0.1,
                             max_steps=10, accept_ratio=0.1, shrink=0.5)
  assert bool(result.accepted) and int(result.steps) == 4
  np.testing.assert_allclose(np.asarray(result.params), 0.125 * np.asarray(g))
  assert float(result.kl) == pytest.approx(0.125 ** 2 * 2.5)


def test_line_search_rejects_steps_that_do_not_improve():
  objective, kl_fn, g = _quadratic_problem(kl_scale=1.0)
  params = jnp.array([0.3, -0.2])
  result = optim.line_search(objective, kl_fn, params, -g, jnp.float32(1.0), max_kl=10.0,
                             max_steps=5, accept_ratio=0.1, shrink=0.5)
  assert not bool(result.accepted)
  np.testing.assert_array_equal(np.asarray(result.params), np.asarray(params))


# -------------------------------------------------------------------- config and keys


@pytest.mark.parametrize("changes, message", [
    (dict(max_kl_divergence=0.0), "max_kl_divergence must be > 0"),
    (dict(max_kl_divergence=-0.01), "max_kl_divergence must be > 0"),
    (dict(cg_damping=0.0), "cg_damping must be > 0"),
    (dict(cg_iterations=0), "cg_iterations must be >= 1"),
    (dict(line_search_shrink=1.0), "line_search_shrink must be in"),
    (dict(baseline_mode="network"), "baseline_mode='network' is not supported"),
    (dict(value_target="lambda_return"), "needs gae_lambda"),
    (dict(baseline_network="resnet"), "baseline_network must be one of"),
])
def test_config_errors_name_the_key(changes, message):
  with pytest.raises(ConfigError, match=message):
    TRPOConfig(**changes)


CONTEXT = BuildContext(NUM_ENVS, [{"type": "dense", "size": 16}], gym.spaces.Discrete(3))


def test_tensorforce_keys_map_to_the_config():
  config = spec.trpo_config(dict(
      batch_size=512, max_kl_divergence=0.02, cg_iterations=15, cg_damping=1e-3,
      line_search_steps=5, gae_rewards=True, gae_lambda=0.9, normalize_rewards=False,
      baseline={"type": "mlp", "sizes": [32]}, learning_rate=3e-3, keep_last=True,
      baseline_optimizer={"type": "multi_step", "num_steps": 7,
                          "optimizer": {"type": "adam", "learning_rate": 3e-3}}), CONTEXT)
  assert config.rollout_length == 128 and config.max_kl_divergence == 0.02
  assert (config.cg_iterations, config.cg_damping, config.line_search_steps) == (15, 1e-3, 5)
  assert config.gae_lambda == 0.9 and not config.normalize_rewards
  assert (config.baseline_mode, config.baseline_layers) == ("states", (32,))
  assert (config.baseline_learning_rate, config.baseline_steps) == (3e-3, 7)
  assert json.loads(config.network) == [{"type": "dense", "size": 16}]
  later = spec.trpo_config(dict(optimizer={"type": "natural_gradient", "learning_rate": 0.05},
                                baseline_mode=None, gae_rewards=False), CONTEXT)
  assert later.max_kl_divergence == 0.05 and later.baseline_mode == "none"
  assert later.gae_lambda is None and later.value_target == "return"


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_kl_divergence=0), "max_kl_divergence must be > 0"),
    (dict(cg_damping=-1.0), "cg_damping must be > 0"),
    (dict(batch_size=30), "batch_size .* multiple of parallel_interactions"),
    (dict(baseline_mode="network"), "baseline_mode='network' is not supported"),
    (dict(baseline="rnn"), "baseline must be one of"),
    (dict(gae_rewards=False, gae_lambda=0.9), "gae_lambda is given but gae_rewards"),
])
def test_bad_object_api_keys_are_config_errors(kwargs, message):
  with pytest.raises(ConfigError, match=message):
    spec.trpo_config(kwargs, CONTEXT)


@pytest.mark.gymnax
@pytest.mark.parametrize("baseline", ["cnn", json.dumps([{"type": "conv2d", "size": 4}])])
def test_a_baseline_that_does_not_fit_the_states_names_the_key(baseline):
  agent = make_trpo(TRPOConfig(**TINY, baseline_network=baseline))
  with pytest.raises(ConfigError, match="baseline_network .* does not fit the states"):
    agent.init(jax.random.key(0), env_spec(make_vec("CartPole-v1", NUM_ENVS)))


# ------------------------------------------------------------------------- layouts


METRICS = ("kl", "entropy", "surrogate_improvement", "line_search_steps", "cg_residual",
           "baseline_loss", "step_accepted", "expected_improvement")


def test_tree_layout_with_a_mask_through_the_spec_build():
  obs_space = gym.spaces.Dict({"position": gym.spaces.Box(-1, 1, (3,)),
                               "action_mask": gym.spaces.MultiBinary(3)})
  agent = FAMILY.api_types[0].build(dict(batch_size=8 * NUM_ENVS, baseline="linear"), CONTEXT)
  state = agent.init(jax.random.key(0), EnvSpec(obs_space, gym.spaces.Discrete(3), NUM_ENVS))
  assert state.info.layout == "tree" and state.rollout.obs["position"].shape == (8, 4, 3)
  mask = jnp.array([[True, False, True]] * NUM_ENVS)

  def obs_fn(t):
    position = jnp.sin(jnp.arange(NUM_ENVS * 3, dtype=jnp.float32).reshape(NUM_ENVS, 3) + t)
    return {"position": position, "action_mask": mask}

  state, new_state, metrics, actions = fill_and_update(
      agent, state, obs_fn, 8, jax.random.key(0), episode_length=5)
  actions = np.asarray(actions)
  assert actions.shape == (8, NUM_ENVS) and not np.any(actions == 1)  # masked, never taken
  for name in METRICS:
    assert np.isfinite(float(metrics[name])), name
  assert float(metrics["kl"]) <= 0.01 + 1e-6  # TensorForce-default trust region holds
  assert int(new_state.step) == 0 and int(new_state.num_updates) == 1
  assert not np.allclose(jax.tree.leaves(state.params["baseline"])[0],
                         jax.tree.leaves(new_state.params["baseline"])[0])


@pytest.mark.gymnax
def test_flat_layout_gaussian_shapes_and_trust_region():
  env = make_vec("Pendulum-v1", NUM_ENVS)
  agent = make_trpo(TRPOConfig(**TINY, rescale_actions=True, bounded_mean="tanh",
                               normalize_observations=True))
  state = agent.init(jax.random.key(0), env_spec(env))
  assert state.info.layout == "flat" and state.rollout.raw_action.shape == (16, NUM_ENVS, 1)
  obs_fn = lambda t: jnp.cos(jnp.arange(NUM_ENVS * 3.0).reshape(NUM_ENVS, 3) * (t + 1))
  state, new_state, metrics, actions = fill_and_update(
      agent, state, obs_fn, 16, jax.random.key(0), episode_length=5)
  assert actions.shape == (16, NUM_ENVS, 1) and np.all(np.abs(np.asarray(actions)) <= 2.0)
  assert bool(metrics["step_accepted"]) and 0 < float(metrics["kl"]) <= 0.01 + 1e-6
  assert 1 <= float(metrics["line_search_steps"]) <= 10
  assert float(metrics["surrogate_improvement"]) > 0
  summary = jax.jit(agent.summarize)(new_state)
  assert summary["histograms"]["action"].shape == (16, NUM_ENVS, 1)


@pytest.mark.gymnax
def test_recurrent_update_reruns_exactly_the_acting_policy():
  """A JSON LSTM policy on Pendulum cut every 6 steps: the update's unroll from the rollout's
  start carry (zeroed at episode starts) gives the acting policy's carries and log-probs."""
  env = make_vec("Pendulum-v1", NUM_ENVS, max_steps_in_episode=6)
  config = TRPOConfig(**TINY, network=json.dumps([{"type": "lstm", "size": 4}]))
  agent = make_trpo(config)
  sim = init_simulation(env, agent, jax.random.key(2))

  @jax.jit
  def run(sim):
    start = sim.agent_state.carry
    sim, rollout = simulate(env, agent, sim, 16, mode="store")
    state = sim.agent_state
    nets = make_networks(config, state.info)
    batch = pg_common.prepare(config, nets, state)
    unrolled = nets.unroll(state.params["policy"], batch.carry, batch.obs, batch.reset)[0]

    def acting(carry, inputs):  # what act + track did, step by step
      obs, action, done = inputs
      carry, dist, _ = nets.policy(state.params["policy"], carry, obs)
      return reset_carry(carry, done), dist.log_prob(action)

    end, log_probs = jax.lax.scan(acting, start, (batch.obs, batch.raw_action, rollout.done))
    return rollout.done, end, state.carry, log_probs, unrolled.log_prob(batch.raw_action)

  done, end, carry, acted, unrolled = run(sim)
  assert bool(np.any(np.asarray(done)[:-1])), "the test needs episode ends in the rollout"
  for a, b in zip(jax.tree.leaves(end), jax.tree.leaves(carry)):
    np.testing.assert_allclose(a, b, atol=1e-6)
  np.testing.assert_allclose(unrolled, acted, atol=1e-5)


# --------------------------------------------------------------- fused and learning


CHUNK = 4  # iterations per compiled chunk (1024 steps each), shared by the tests below


@pytest.fixture(scope="module")
def cartpole():
  """The fused CartPole kit (8 envs) and a fresh sim (seed 0)."""
  kit = fused_kit("CartPole-v1", 8, make_trpo(cartpole_fused()), eval_steps=500)
  return kit, kit.init(0)


@pytest.mark.gymnax
def test_cartpole_improves_clearly_in_a_small_budget(cartpole):
  kit, fresh = cartpole
  start = time.time()
  sim, infos = train_chunks(kit, fresh, 3, CHUNK)  # 12 * 1024 steps
  before = float(kit.evaluate(fresh)["mean_score"])
  after = float(kit.evaluate(sim)["mean_score"])
  print(f"TRPO CartPole 12k steps: {before:.0f} -> {after:.0f} ({time.time() - start:.1f}s)")
  assert after >= 300 and after > before + 100
  assert np.all(np.asarray(infos["kl"]) <= 0.01 + 1e-6)
  assert np.all(np.isfinite(np.asarray(infos["cg_residual"])))


@pytest.mark.gymnax
@pytest.mark.slow
def test_cartpole_reaches_475_within_100k_steps(cartpole):
  """Best deterministic evaluation, every 4096 steps (measured: 500 by 20k, 4 of 4 seeds)."""
  kit = cartpole[0]
  assert best_score(kit, kit.init(1), rounds=24, length=CHUNK, target=475) >= 475  # 96k steps


@pytest.mark.gymnax
@pytest.mark.slow
def test_pendulum_reaches_minus_200_within_200k_steps():
  """Best deterministic evaluation, every 20k steps (measured: 4 of 4 seeds by 100k)."""
  kit = fused_kit("Pendulum-v1", 8, make_trpo(pendulum_fused()), eval_steps=200)
  assert best_score(kit, kit.init(0), rounds=9, length=10,
                    target=-200) >= -200  # 9 * 10 * 2048 steps
