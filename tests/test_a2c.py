"""A2C / AC semantics: n-step returns across episode ends and truncations, the joint
actor-critic gradient against a hand derivation, TensorForce's keys (and the errors that
name the key), a save/load round trip, and learning fused CartPole."""
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import Agent
from batchrl.agents.a2c import A2CConfig, cartpole
from batchrl.agents.a2c import model as a2c_model
from batchrl.agents.a2c.keys import a2c_config
from batchrl.agents.a2c.losses import n_step_returns
from batchrl.agents.a2c.model import make_a2c
from batchrl.agents.core import Transition
from batchrl.agents.family import BuildContext
from batchrl.agents.policy_gradient import model as pg_model
from batchrl.agents.policy_gradient.networks import make_networks
from batchrl.configclass import ConfigError
from batchrl.envs.jax_env import make_vec
from batchrl.ops.returns import discounted_returns
from batchrl.specs import EnvSpec
from batchrl.train import fused
from conftest import leaves_by_path

G = 0.9  # discount of the hand-computed cases

# ------------------------------------------------------------------ n-step returns
# One env, 6 steps: an episode terminated at t=1, one truncated at t=3 (bootstraps from
# its final observation, value 10), then a running episode cut by the rollout's end.
R = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
TERM = np.array([0, 1, 0, 0, 0, 0], bool)
TRUNC = np.array([0, 0, 0, 1, 0, 0], bool)
V_NEXT = np.array([7.0, 8.0, 9.0, 10.0, 11.0, 12.0])  # V(next_obs[t])


def _returns(n):
  columns = [x[:, None] for x in (R, TERM, TRUNC, V_NEXT)]
  return np.asarray(n_step_returns(*columns[:3], jnp.asarray(columns[3]), G, n))[:, 0]


def test_n_step_returns_stop_at_true_ends_and_bootstrap_at_truncations():
  expected = {
      1: [1 + G * 7, 2, 3 + G * 9, 4 + G * 10, 5 + G * 11, 6 + G * 12],
      2: [1 + G * 2, 2, 3 + G * 4 + G * G * 10, 4 + G * 10, 5 + G * 6 + G * G * 12,
          6 + G * 12],
      3: [1 + G * 2, 2, 3 + G * 4 + G * G * 10, 4 + G * 10, 5 + G * 6 + G * G * 12,
          6 + G * 12],
  }
  for n, values in expected.items():
    np.testing.assert_allclose(_returns(n), values, rtol=1e-6, err_msg=f"n={n}")


def test_n_step_returns_as_long_as_the_rollout_are_the_discounted_returns():
  key = jax.random.key(3)
  rewards, next_values = jax.random.normal(key, (2, 7, 3))
  ends = jax.random.bernoulli(jax.random.key(4), 0.3, (2, 7, 3))
  for n in (7, 50):
    np.testing.assert_allclose(
        n_step_returns(rewards, ends[0], ends[1], next_values, 0.97, n),
        discounted_returns(rewards, ends[0], ends[1], next_values, 0.97), rtol=1e-5)


def test_estimate_terminals_bootstraps_at_true_ends_too():
  returns = a2c_model.returns_fn(A2CConfig(n_step=1, estimate_terminals=True))
  got = returns(*(jnp.asarray(x)[:, None] for x in (R, TERM, TRUNC, V_NEXT)), G)[:, 0]
  np.testing.assert_allclose(got, R + G * V_NEXT, rtol=1e-6)


# -------------------------------------------------------------- the joint gradient


@pytest.mark.parametrize("advantage", [True, False], ids=["a2c", "ac"])
def test_joint_gradient_equals_the_hand_derived_one(advantage):
  """A 2-armed bandit with a constant state x = 1: logits = w + b, a value head V = u + c
  on the same (empty) torso; one-step returns over 2 steps of 2 envs."""
  ent, crit = 0.1, 0.5
  config = A2CConfig(policy_layers=(), baseline_mode="network", rollout_length=2,
                     n_step=1, discount=G, entropy_coef=ent, critic_coef=crit,
                     advantage=advantage)
  agent = make_a2c(config)
  state = agent.init(jax.random.key(0), EnvSpec(gym.spaces.Box(-1, 1, (1,)),
                                                gym.spaces.Discrete(2), 2))
  obs = jnp.ones((2, 1))
  actions = np.array([[0, 1], [1, 1]])  # [t, env]
  rewards = np.array([[1.0, 0.0], [2.0, -1.0]])
  terminated = np.array([[False, True], [True, False]])
  for t in range(2):
    _, extras = agent.act(state, obs, jax.random.key(t), False)
    extras = dict(extras, raw_action=jnp.asarray(actions[t], jnp.int32))
    state = agent.store(state, Transition(obs, extras["raw_action"], rewards[t],
                                          jnp.asarray(terminated[t]), jnp.zeros(2, bool),
                                          obs, extras))
  nets = make_networks(config, state.info)
  batch = pg_model.prepare(config, nets, state, returns=a2c_model.returns_fn(config))
  grads, _ = a2c_model.joint_gradient(config, nets, {"policy": state.params["policy"]},
                                      batch)

  dist, value = nets.policy(state.params["policy"], (), obs[:1])[1:]
  pi = np.array([float(jnp.exp(dist.log_prob(jnp.array([a]))[0])) for a in range(2)])
  v = float(value[0])
  returns = rewards + G * (1 - terminated) * v
  weights = returns - v if advantage else returns
  np.testing.assert_allclose(batch.targets, returns, rtol=1e-5)
  entropy = -np.sum(pi * np.log(pi))
  dlogits = -np.mean([(np.eye(2)[actions[t, e]] - pi) * weights[t, e]
                      for t in range(2) for e in range(2)], axis=0)
  dlogits -= ent * -pi * (np.log(pi) + entropy)  # d(-ent * H)/dlogits
  dvalue = -crit * np.mean(returns - v)  # d(crit * 0.5 * mean((G - V)^2))/dV
  got = leaves_by_path(grads["policy"])
  heads = {k: x for k, x in got.items() if "value_head" not in k}
  bias = [x for k, x in heads.items() if k.endswith("['bias']")]
  kernel = [x for k, x in heads.items() if k.endswith("['kernel']")]
  assert len(bias) == len(kernel) == 1
  np.testing.assert_allclose(bias[0], dlogits, rtol=1e-4, atol=1e-7)
  np.testing.assert_allclose(kernel[0], dlogits[None], rtol=1e-4, atol=1e-7)  # x = 1
  np.testing.assert_allclose(got["['value_head']['bias']"], [dvalue], rtol=1e-5)
  np.testing.assert_allclose(got["['value_head']['kernel']"], [[dvalue]], rtol=1e-5)


# ------------------------------------------------------------- TensorForce's keys

CONTEXT = BuildContext(num_streams=4, network="auto", action_space=gym.spaces.Discrete(2))


def test_tensorforce_keys_map_to_the_config():
  c = a2c_config(dict(batch_size=64, horizon=4, discount=0.95, estimate_terminal=True,
                      critic_network={"type": "mlp", "sizes": [32]}, critic_optimizer=0.25,
                      entropy_regularization=0.01, optimizer="rmsprop",
                      learning_rate=3e-4), CONTEXT)
  assert (c.rollout_length, c.n_step, c.discount, c.estimate_terminals) == (16, 5, 0.95, True)
  assert (c.baseline_mode, c.baseline_network, c.baseline_layers) == ("states", "mlp", (32,))
  assert (c.critic_update, c.critic_coef, c.entropy_coef) == ("joint", 0.25, 0.01)
  assert (c.optimizer, c.learning_rate, c.advantage) == ("rmsprop", 3e-4, True)
  ac = a2c_config(dict(batch_size=8, critic_optimizer={
      "type": "multi_step", "optimizer": {"type": "adam", "learning_rate": 1e-2},
      "num_steps": 3}, optimizer={"type": "adam", "learning_rate": 5e-4}), CONTEXT, "ac")
  assert (ac.advantage, ac.n_step, ac.critic_update) == (False, 1, "separate")
  assert (ac.baseline_learning_rate, ac.baseline_steps, ac.learning_rate) == (1e-2, 3, 5e-4)
  gae = a2c_config(dict(batch_size=8, gae_lambda=0.95, n_step=None), CONTEXT)
  assert (gae.gae_lambda, gae.n_step) == (0.95, None)


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=8, horizn=2), "did you mean 'horizon'"),
    (dict(batch_size=8, critic_netwrk="auto"), "did you mean 'critic_network'"),
    (dict(batch_size=8, horizon=-1), "horizon must be an int >= 0"),
    (dict(batch_size=8, horizon=2, n_step=2), "horizon 2 means n_step 3"),
    (dict(batch_size=6), "batch_size"),
    (dict(batch_size=8, update_frequency=4), "update_frequency"),
    (dict(batch_size=8, state_action_value=True), "state_action_value"),
    (dict(batch_size=8, critic_network=None), "critic_network"),
    (dict(batch_size=8, optimizer="sgd"), "optimizer must be one of"),
    (dict(batch_size=8, critic_optimizer={"type": "adam"}, critic_update="joint"),
     "critic_update"),
    (dict(batch_size=8, baseline_mode=None), "A2CConfig.baseline_mode"),
    (dict(batch_size=8, discount=2), "A2CConfig.discount"),
    (dict(batch_size=8, learning_rate=-1), "A2CConfig.learning_rate"),
])
def test_bad_keys_are_config_errors_naming_the_key(kwargs, message):
  with pytest.raises(ConfigError, match=message):
    a2c_config(kwargs, CONTEXT)


@pytest.mark.parametrize("changes, message", [
    (dict(n_step=0), "A2CConfig.n_step"),
    (dict(gae_lambda=0.9, n_step=3), "A2CConfig.n_step applies to n-step returns"),
    (dict(gae_lambda=0.9, estimate_terminals=True), "A2CConfig.estimate_terminals"),
    (dict(critic_update="separate"), "A2CConfig.critic_update='separate' needs"),
    (dict(rmsprop_decay=1.0), "A2CConfig.rmsprop_decay"),
    (dict(critic_coef=-1.0), "A2CConfig.critic_coef"),
])
def test_config_errors_name_the_key(changes, message):
  with pytest.raises(ConfigError, match=message):
    A2CConfig(**changes)


# ------------------------------------------------------------------- save and load


def test_a_separate_critic_with_gae_saves_and_loads_to_the_same_actions(tmp_path):
  keys = dict(batch_size=16, gae_lambda=0.95, n_step=None, critic_network="mlp",
              critic_optimizer={"type": "adam", "learning_rate": 1e-3})
  agent = Agent.create("a2c", environment="CartPole-v1", network=[{"type": "dense",
                                                                  "size": 8}], seed=0, **keys)
  env = gym.make("CartPole-v1")
  obs, _ = env.reset(seed=0)
  updates = 0
  for _ in range(40):
    obs, reward, terminated, truncated, _ = env.step(agent.act(obs))
    updates += agent.observe(float(reward), terminal=terminated)
    if terminated or truncated:
      obs, _ = env.reset()
  assert updates == 2
  agent.save(tmp_path / "a2c")
  loaded = Agent.load(tmp_path / "a2c")
  probes = np.random.default_rng(0).uniform(-0.5, 0.5, (16, 4)).astype(np.float32)
  np.testing.assert_array_equal(
      np.asarray(loaded.act(probes, independent=True, deterministic=True)),
      np.asarray(agent.act(probes, independent=True, deterministic=True)))
  env.close()


# --------------------------------------------------------------------- learning


@pytest.mark.gymnax
@pytest.mark.slow
def test_fused_cartpole_reaches_475_within_200k_steps(learning_seed):
  """Best deterministic evaluation every 8k steps (measured: seed 0 500 at 32k, 6 s for the
  test; seeds 1 and 2 also pass)."""
  env = make_vec("CartPole-v1", 8)
  agent = make_a2c(cartpole())
  run_chunk = fused.make_run_chunk(env, agent)
  evaluate = jax.jit(fused.make_evaluate(env, agent, 500))
  sim, best = fused.init_sim(env, agent, jax.random.key(learning_seed)), -np.inf
  for _ in range(25):  # 25 * 200 updates * 40 steps = 200k steps
    sim, infos = run_chunk(sim, 200)
    best = max(best, float(evaluate(sim)["mean_score"]))
    if best >= 475:
      break
  assert np.all(np.isfinite(np.asarray(infos["baseline_loss"])))
  assert best >= 475
