"""SAC on one Discrete action (Christodoulou 2019; ``batchrl.agents.sac.losses``): the soft
target and the actor loss as exact expectations over the categorical policy (by hand), the
temperature toward the target entropy, masks, bad input, checkpoints, the object API; and
one short fused CartPole run (marked slow)."""
import math
from types import SimpleNamespace

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import Agent, checkpoint
from batchrl.agents.actor_critic.losses import bellman_target, temperature_objective
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.actor_critic.networks import DiscreteActions, make_networks
from batchrl.agents.actor_critic.temperature import DISCRETE_TARGET_ENTROPY_SCALE
from batchrl.agents.actor_critic.temperature import target_entropy as sac_target_entropy
from batchrl.agents.sac import SACConfig
from batchrl.agents.sac.losses import sac_actor_loss, sac_next_value
from batchrl.agents.sac.model import make_sac
from batchrl.agents.sac.recipes import cartpole_sac
from batchrl.agents.spaces import space_info
from batchrl.configclass import ConfigError
from batchrl.envs.jax_env import make_vec
from batchrl.specs import EnvSpec
from batchrl.train import fused
from conftest import leaves

OBS = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
THREE = gym.spaces.Discrete(3)
TINY = dict(actor_layers=(8,), critic_layers=(8,), batch_size=8, memory_capacity=64,
            first_update=16, update_frequency=1, repeat_update=1)
MASKED_OBS = gym.spaces.Dict({"position": OBS, "action_mask": gym.spaces.MultiBinary(3)})


def softmax(x):
  e = np.exp(x - np.max(x, axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------- the losses by hand

LOGITS = np.array([[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]], np.float32)  # [K=2, n=3]
Q = np.array([[[1.0, 2.0, 3.0], [0.0, -1.0, 4.0]],  # critic 1 [K, n]
              [[1.5, 1.0, 3.5], [1.0, -2.0, 2.0]]], np.float32)  # critic 2


def fixed_nets(logits=LOGITS, q=Q):
  """Networks whose actor is its parameters (the logits) and whose critics are ``q``."""
  return SimpleNamespace(discrete=True, actor=lambda params, obs: params,
                         q_values=lambda params, obs: jnp.asarray(q))


def test_the_discrete_target_sums_the_soft_value_over_the_policy():
  """``r + gamma (1 - terminated) sum_a pi(a|s') (min_j Q'_j(s', a) - alpha log pi(a|s'))``,
  with pi the online actor's softmax and Q' the target critics, against numpy."""
  alpha, gamma = 0.3, 0.9
  value = sac_next_value(fixed_nets(), jnp.asarray(LOGITS), None, None, jax.random.key(0),
                         alpha)
  pi = softmax(LOGITS)
  expected = np.sum(pi * (np.minimum(Q[0], Q[1]) - alpha * np.log(pi)), axis=1)
  np.testing.assert_allclose(value, expected, rtol=1e-6)
  # by hand for the first state: pi = softmax(0, 1, -1), min Q = (1, 1, 3)
  p = np.exp([0.0, 1.0, -1.0]) / np.exp([0.0, 1.0, -1.0]).sum()
  assert abs(float(value[0]) - sum(p * (np.array([1, 1, 3]) - alpha * np.log(p)))) < 1e-5
  target = bellman_target(jnp.array([1.0, 2.0]), jnp.array([False, True]), gamma, value)
  np.testing.assert_allclose(target, [1.0 + gamma * expected[0], 2.0], rtol=1e-6)


def test_the_discrete_actor_loss_is_the_expectation_and_its_gradient_by_hand():
  """``mean_s sum_a pi (alpha log pi - min_j Q_j)``; its gradient in the logits is
  ``pi_k (g_k - sum_a pi_a g_a) / K`` with ``g = alpha log pi - min Q`` (the entropy term's
  own derivative ``alpha sum_a pi_a d log pi_a`` vanishes); aux: ``sum_a pi log pi``."""
  alpha = 0.5
  nets = fixed_nets()
  loss_fn = lambda logits: sac_actor_loss(nets, logits, None, None, None, alpha)
  (loss, (metrics, neg_entropy)), grad = jax.value_and_grad(loss_fn, has_aux=True)(
      jnp.asarray(LOGITS))
  pi = softmax(LOGITS)
  g = alpha * np.log(pi) - np.minimum(Q[0], Q[1])
  np.testing.assert_allclose(loss, np.mean(np.sum(pi * g, axis=1)), rtol=1e-6)
  np.testing.assert_allclose(neg_entropy, np.sum(pi * np.log(pi), axis=1), rtol=1e-6)
  np.testing.assert_allclose(metrics["log_prob"], np.mean(np.sum(pi * np.log(pi), axis=1)),
                             rtol=1e-6)
  expected = pi * (g - np.sum(pi * g, axis=1, keepdims=True)) / len(LOGITS)
  np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)


def test_a_masked_action_adds_nothing_to_the_value_nor_the_entropy():
  """A masked action's logit is the lowest float: probability 0, an exact 0 in the soft value
  and the entropy even with a large alpha and a huge Q there; no NaN in value or gradient."""
  lowest = np.finfo(np.float32).min
  masked = LOGITS.copy()
  masked[:, 2] = lowest
  q = Q.copy()
  q[:, :, 2] = 1e9
  value = sac_next_value(fixed_nets(q=q), jnp.asarray(masked), None, None, None, 5.0)
  pi = softmax(LOGITS[:, :2])
  expected = np.sum(pi * (np.minimum(Q[0], Q[1])[:, :2] - 5.0 * np.log(pi)), axis=1)
  np.testing.assert_allclose(value, expected, rtol=1e-5)
  grad = jax.grad(lambda p: sac_actor_loss(fixed_nets(q=q), p, None, None, None, 5.0)[0])(
      jnp.asarray(masked))
  assert np.isfinite(np.asarray(grad)).all() and np.all(np.asarray(grad)[:, 2] == 0)


# ----------------------------------------------------------------------- tiny models


def store_random(model, state, rng, obs_fn=None):
  """One store of a random ``[2]`` transition (the model's own sampled actions)."""
  obs_fn = obs_fn or (lambda: rng.uniform(-1, 1, (2, 3)).astype(np.float32))
  obs = obs_fn()
  action, extras = model.act(state, obs, jax.random.key(int(rng.integers(1 << 30))))
  transition = fused.Transition(obs, action, jnp.asarray(rng.normal(size=2), jnp.float32),
                                jnp.asarray(rng.random(2) < 0.1), jnp.zeros(2, bool), obs_fn(),
                                extras)
  return model.store(state, transition)


def filled_state(model, seed=0, steps=24, spec=EnvSpec(OBS, THREE, 2), obs_fn=None):
  state = model.init(jax.random.key(seed), spec)
  rng = np.random.default_rng(seed)
  for _ in range(steps):
    state = store_random(model, state, rng, obs_fn)
  return state


def test_the_model_stores_indices_and_learns_on_a_discrete_action():
  space = gym.spaces.Discrete(3, start=-1)
  model = make_sac(SACConfig(**TINY))
  state = filled_state(model, spec=EnvSpec(OBS, space, 2))
  actions = np.asarray(state.memory.items.action)
  assert actions.dtype == np.int32 and set(np.unique(actions[:12])) <= {0, 1, 2}
  action, _ = model.act(state, np.zeros((2, 3), np.float32), jax.random.key(1))
  assert action.shape == (2,) and all(space.contains(int(a)) for a in np.asarray(action))
  after, metrics = jax.jit(model.update)(state)
  assert metrics["learning"] == 1.0
  assert all(np.isfinite(float(v)) for v in metrics.values())
  assert 0 < float(metrics["entropy"]) <= math.log(3)
  assert any(not np.array_equal(a, b) for a, b in zip(leaves(after.params.actor),
                                                      leaves(state.params.actor)))


def test_the_temperature_moves_toward_the_discrete_target_entropy():
  """The objective on ``sum_a pi log pi``: alpha grows while the entropy is below the target
  and shrinks while above; in the model, a target far below the near-uniform start lowers
  alpha at every update."""
  neg_entropy = jnp.array([-0.2, -0.4])  # entropy 0.3
  assert jax.grad(temperature_objective)(jnp.float32(0.0), neg_entropy, 0.6) < 0  # grow
  assert jax.grad(temperature_objective)(jnp.float32(0.0), neg_entropy, 0.1) > 0  # shrink
  model = make_sac(SACConfig(**TINY, target_entropy=0.05, alpha_learning_rate=0.01))
  state = filled_state(model)
  update = jax.jit(model.update)
  alphas = [float(jnp.exp(state.params.log_alpha))]
  for _ in range(3):
    state, metrics = update(state)
    assert float(metrics["entropy"]) > 0.05
    alphas.append(float(jnp.exp(state.params.log_alpha)))
  assert np.all(np.diff(alphas) < 0), alphas


def test_the_discrete_target_entropy_defaults_to_a_fraction_of_log_n():
  info = space_info(EnvSpec(OBS, THREE, 1), "flat")
  nets = make_networks(SACConfig(**TINY), info, 2, True, "sac", discrete=True)
  assert nets.discrete and nets.actions == DiscreteActions(3)
  assert sac_target_entropy(SACConfig(**TINY), nets) == pytest.approx(
      DISCRETE_TARGET_ENTROPY_SCALE * math.log(3))
  assert sac_target_entropy(SACConfig(**TINY, target_entropy=0.5), nets) == 0.5
  with pytest.raises(ConfigError, match=r"sac.target_entropy must be below log 3 = 1.099"):
    make_sac(SACConfig(**TINY, target_entropy=1.1)).init(jax.random.key(0),
                                                          EnvSpec(OBS, THREE, 1))


def test_masked_actions_are_never_sampled_nor_chosen():
  model = make_sac(SACConfig(**TINY, network='[{"type": "dense", "size": 8}]'))
  rng = np.random.default_rng(0)

  def obs_fn(k=2):
    mask = rng.random((k, 3)) < 0.5
    mask[np.arange(k), rng.integers(0, 3, k)] = True
    return {"position": rng.uniform(-1, 1, (k, 3)).astype(np.float32), "action_mask": mask}

  state = filled_state(model, spec=EnvSpec(MASKED_OBS, THREE, 2), obs_fn=obs_fn)
  obs = obs_fn(64)
  keys = jax.random.split(jax.random.key(3), 50)
  sampled = np.asarray(jax.vmap(lambda k: model.act(state, obs, k)[0])(keys))
  assert obs["action_mask"][np.arange(64), sampled].all()
  assert len(np.unique(sampled)) == 3
  greedy = np.asarray(model.act(state, obs, keys[0], True)[0])
  assert obs["action_mask"][np.arange(64), greedy].all()
  _, metrics = jax.jit(model.update)(state)
  assert metrics["learning"] == 1.0
  assert all(np.isfinite(float(v)) for v in metrics.values())


def test_start_steps_draw_uniformly_among_the_allowed_actions():
  model = make_sac(SACConfig(**dict(TINY, memory_capacity=4000), start_steps=10**6,
                             network='[{"type": "dense", "size": 8}]'))
  rng = np.random.default_rng(0)
  mask = np.ones((2000, 3), bool)
  mask[::2, 1] = False  # even rows: actions 0 and 2 allowed; odd rows: all three
  obs = {"position": rng.uniform(-1, 1, (2000, 3)).astype(np.float32), "action_mask": mask}
  state = model.init(jax.random.key(0), EnvSpec(MASKED_OBS, THREE, 2000))
  drawn = np.asarray(model.act(state, obs, jax.random.key(4))[0])
  assert mask[np.arange(2000), drawn].all()
  assert np.allclose(np.bincount(drawn[::2], minlength=3) / 1000, [0.5, 0, 0.5], atol=0.06)
  assert np.allclose(np.bincount(drawn[1::2], minlength=3) / 1000, [1 / 3] * 3, atol=0.06)


def test_import_observations_stores_action_indices():
  space = gym.spaces.Discrete(3, start=1)
  state = make_sac(SACConfig(**TINY)).init(jax.random.key(0), EnvSpec(OBS, space, 2))
  observations = [dict(state=[float(i), 0.0, 0.0], action=[1, 3, 2, 1, 2][i],
                       reward=-float(i), terminal=0, internal=[]) for i in range(5)]
  items = import_observations(state, observations).memory.items
  np.testing.assert_array_equal(items.action[:2], [[0, 1], [2, 0]])


def test_checkpoint_round_trip_gives_the_same_actions(tmp_path):
  model = make_sac(SACConfig(**TINY))
  state, _ = jax.jit(model.update)(filled_state(model))
  checkpoint.save(tmp_path, 1, state)
  restored, _ = checkpoint.restore(tmp_path, state)
  for x, y in zip(leaves(state), leaves(restored)):
    np.testing.assert_array_equal(x, y)
  obs = np.random.default_rng(1).uniform(-1, 1, (2, 3)).astype(np.float32)
  act = jax.jit(model.act, static_argnums=3)
  for deterministic in (True, False):
    np.testing.assert_array_equal(act(state, obs, jax.random.key(4), deterministic)[0],
                                  act(restored, obs, jax.random.key(4), deterministic)[0])


# ------------------------------------------------------------------- the object API


def test_agent_create_on_cartpole_acts_learns_saves_and_loads(tmp_path):
  agent = Agent.create("sac", environment="CartPole-v1", seed=0, first_update=32,
                       batch_size=16, memory_capacity=500, critic_layers=[16],
                       network=[{"type": "dense", "size": 16}])
  env = gym.make("CartPole-v1")
  obs, _ = env.reset(seed=0)
  for _ in range(48):
    action = agent.act(obs)
    assert env.action_space.contains(int(action))
    obs, reward, terminated, truncated, _ = env.step(int(action))
    agent.observe(float(reward), terminal=bool(terminated or truncated))
    if terminated or truncated:
      obs, _ = env.reset()
  assert agent.updates >= 1
  agent.save(tmp_path / "sac")
  loaded = Agent.load(tmp_path / "sac")
  probes = np.random.default_rng(0).uniform(-0.5, 0.5, (8, 4)).astype(np.float32)
  np.testing.assert_array_equal(loaded.act(probes, independent=True, deterministic=True),
                                agent.act(probes, independent=True, deterministic=True))


@pytest.mark.parametrize("actions", [dict(type="int", shape=(2,), num_values=3),
                                     dict(type="bool")])
def test_other_discrete_actions_are_refused_naming_the_agents_that_fit(actions):
  with pytest.raises(ConfigError, match=r"one int action.*dqn, ddqn, dqn_nstep, dqfd, ppo, "
                                        r"vpg, trpo\.$"):
    Agent.create("sac", states=dict(type="float", shape=(3,)), actions=actions)


@pytest.mark.parametrize("value", ["x", [0.5]])
def test_a_target_entropy_that_is_not_a_number_is_refused_naming_the_key(value):
  with pytest.raises(ConfigError, match="target_entropy"):
    Agent.create("sac", environment="CartPole-v1", target_entropy=value)


# --------------------------------------------------------------------------- learning


@pytest.mark.gymnax
@pytest.mark.slow
def test_discrete_sac_learns_fused_cartpole_within_10k_steps(learning_seed):
  """``sac_cartpole_fused``'s agent (2x64 MLPs, Adam 1e-3, batch 128, one gradient step per
  env step, the default target entropy) on 4 gymnax envs, a greedy evaluation every 2k
  steps; the untrained greedy policy scores about 10. Measured here: seed 0 160, 267, 438,
  452, 334; seed 2 168, 242, 256, 277, 249 (seed 1 passes); another machine's seed 0 233,
  216, 314, 354, 205 (about 45 s on 2 busy CPU cores). The same seed gives other floats on
  another CPU, so the bar is "learning" with a margin every one of those clears, not
  "solved"."""
  model = make_sac(cartpole_sac(update_frequency=1, repeat_update=4))
  env = make_vec("CartPole-v1", 4)
  evaluate = jax.jit(fused.make_evaluate(env, model, 500))
  run_chunk = fused.make_run_chunk(env, model)
  sim = fused.init_sim(env, model, jax.random.key(learning_seed))
  scores = []
  for _ in range(5):  # 5 x 2k steps
    sim, _ = run_chunk(sim, 500)
    scores.append(float(evaluate(sim)["mean_score"]))
  assert max(scores) >= 200, scores
