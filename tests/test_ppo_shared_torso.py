"""PPO with one torso under the policy and value heads (``PPOConfig.share_torso``, what
``ppo_atari`` uses): one set of torso parameters trained by the joint loss, the host update
equal to the scan, export and checkpoints as with separate networks; default off keeps the
separate networks' parameters and metrics as they were before the option existed."""
from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import Agent
from batchrl.agents.core import Transition
from batchrl.agents.ppo import PPOConfig, cartpole_fused
from batchrl.agents.ppo import model as ppo_model
from batchrl.agents.ppo.model import make_ppo
from batchrl.configclass import ConfigError
from batchrl.configs.ppo import ppo_atari
from batchrl.envs.jax_env import make_vec
from batchrl.specs import EnvSpec
from batchrl.train import fused
from tests.test_ppo_host_update import _config, _filled_state, assert_same_update

TANH_64 = [{"type": "dense", "size": 64, "activation": "tanh"},
           {"type": "dense", "size": 64, "activation": "tanh"}]


def _shared(**values) -> PPOConfig:
  return _config(share_torso=True, **values)


def _flat_filled_state(config: PPOConfig, seed: int = 0):
  """A PPO state (flat layout: Box(3) states, 3 actions, 2 envs) with a full random rollout."""
  agent = make_ppo(config)
  spec = EnvSpec(gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.Discrete(3), 2)
  key = jax.random.key(seed)
  state = agent.init(key, spec)
  obs = jax.random.normal(jax.random.key(seed + 1), (2, 3))
  for t in range(config.rollout_length):
    key, act_key, obs_key, reward_key = jax.random.split(key, 4)
    action, extras = agent.act(state, obs, act_key)
    next_obs = jax.random.normal(obs_key, (2, 3))
    transition = Transition(obs, action, jax.random.normal(reward_key, (2,)),
                            jnp.array([t == 3, False]), jnp.zeros((2,), bool), next_obs, extras)
    state = agent.store(state, transition)
    obs = next_obs
  return agent, state


# ------------------------------------------------------------------------ structure


def test_a_shared_torso_is_one_set_of_parameters_under_policy():
  _, state = _filled_state(_shared())
  params = state.params
  assert set(params) == {"policy"}
  assert set(params["policy"]) == {"torso", "heads", "value_head"}
  kernels = [path for path, _ in jax.tree_util.tree_leaves_with_path(params)
             if "kernel" in jax.tree_util.keystr(path)]
  conv = [k for k in kernels if np.ndim(_at(params, k)) == 4]
  assert len(conv) == 1  # TINY_CNN has one conv layer: one copy of it
  assert params["policy"]["value_head"]["kernel"].shape == (8, 1)
  _, separate = _filled_state(_config())
  assert set(separate.params) == {"policy", "value"}
  size = lambda tree: sum(x.size for x in jax.tree.leaves(tree))
  assert size(params) < size(separate.params)


def _at(tree, path):
  for entry in path:
    tree = tree[entry.key]
  return tree


def test_the_flat_layout_shares_the_policy_layers_mlp():
  config = PPOConfig(policy_layers=(8,), value_layers=(5,), rollout_length=8,
                     update_epochs=2, batch_size=4, share_torso=True)
  _, state = _flat_filled_state(config)
  policy = state.params["policy"]
  assert set(state.params) == {"policy"} and set(policy) == {"torso", "heads", "value_head"}
  assert policy["value_head"]["kernel"].shape == (8, 1)  # on the 8-unit torso; 5 unused
  new_state, metrics = make_ppo(config).update(state)
  assert all(np.isfinite(float(v)) for v in metrics.values())


# ------------------------------------------------------------------------- gradients


def _torso_grads(config: PPOConfig, state):
  nets = ppo_model._networks(config, state.info)
  _, sequences, _, _ = ppo_model._update_data(config, nets, state)
  grads = jax.grad(lambda p: ppo_model.sequence_loss(config, nets, p, state.penalty,
                                                     sequences)[0])(state.params)
  return grads["policy"]["torso"], nets, sequences


def test_the_torso_gradient_sums_the_policy_and_value_losses():
  config = _shared(entropy_coef=0.0)
  _, state = _filled_state(config)
  policy_only, nets, sequences = _torso_grads(dataclasses.replace(config, value_coef=0.0),
                                              state)
  joint, _, _ = _torso_grads(dataclasses.replace(config, value_coef=0.5), state)

  def value_loss(params):  # 0.5 * mean((return - V)^2), clipped as the config says
    time_major = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), sequences._replace(carry=()))
    values = nets.value(params, time_major.obs)
    return ppo_model.losses.value_loss(values, time_major.returns, time_major.old_values,
                                       config.clip_range)

  value_only = jax.grad(value_loss)(state.params)["policy"]["torso"]
  for p, j, v in zip(*map(jax.tree.leaves, (policy_only, joint, value_only))):
    assert np.abs(p).max() > 0 and np.abs(v).max() > 0  # both losses reach the torso
    np.testing.assert_allclose(j, p + 0.5 * v, rtol=1e-4, atol=1e-7)


def test_an_update_moves_the_torso_and_both_heads():
  agent, state = _filled_state(_shared())
  new_state, metrics = agent.update(state)
  for name in ("torso", "heads", "value_head"):
    before, after = state.params["policy"][name], new_state.params["policy"][name]
    assert any(not np.allclose(a, b) for a, b in zip(jax.tree.leaves(before),
                                                       jax.tree.leaves(after))), name
  assert float(metrics["grad_norm"]) > 0


@pytest.mark.parametrize("objective", ["clip", "kl_penalty"])
def test_the_host_update_equals_the_scan_with_a_shared_torso(objective):
  results = {}
  for loop in ("scan", "host"):
    agent, state = _filled_state(_shared(update_loop=loop, policy_objective=objective))
    results[loop] = jax.jit(agent.update)(state)
  assert_same_update(results["scan"], results["host"])


# ------------------------------------------------------------------------ defaults


def test_default_off_keeps_the_separate_networks_results():
  """Parameters and metrics after two updates, recorded before share_torso existed (same
  program, so equal up to the machine's float rounding)."""
  agent, state = _filled_state(_config(update_loop="scan"))
  state, _ = agent.update(state)
  state, metrics = jax.jit(agent.update)(state)
  assert set(state.params) == {"policy", "value"}
  total = sum(float(jnp.sum(jnp.abs(x))) for x in jax.tree.leaves(state.params))
  np.testing.assert_allclose(total, 139.1852029931033, rtol=1e-5)
  np.testing.assert_allclose(metrics["value_loss"], 1.7237403392791748, rtol=1e-4)
  np.testing.assert_allclose(metrics["entropy"], 1.083031177520752, rtol=1e-5)
  np.testing.assert_allclose(metrics["grad_norm"], 5.816458225250244, rtol=1e-4)
  config = PPOConfig(policy_layers=(8,), value_layers=(8,), rollout_length=8,
                     update_epochs=2, batch_size=4)
  agent, state = _flat_filled_state(config)
  state, _ = agent.update(state)
  state, metrics = jax.jit(agent.update)(state)
  total = sum(float(jnp.sum(jnp.abs(x))) for x in jax.tree.leaves(state.params))
  np.testing.assert_allclose(total, 30.33534556790255, rtol=1e-5)
  np.testing.assert_allclose(metrics["value_loss"], 3.134307861328125, rtol=1e-4)
  np.testing.assert_allclose(metrics["policy_loss"], 0.3128071427345276, rtol=1e-4)


def test_ppo_atari_shares_one_nature_cnn():
  config = ppo_atari().config
  assert config.share_torso and config.network is not None
  spec = EnvSpec(gym.spaces.Box(0.0, 1.0, (84, 84, 4), np.float32), gym.spaces.Discrete(4), 8)
  shapes = jax.eval_shape(lambda key: make_ppo(config).init(key, spec).params,
                          jax.random.key(0))
  assert set(shapes) == {"policy"}
  convs = [x for x in jax.tree.leaves(shapes) if len(x.shape) == 4]
  assert len(convs) == 3  # the Nature CNN's three conv kernels, once


# -------------------------------------------------------------------------- errors


@pytest.mark.parametrize("values, message", [
    (dict(recurrent="gru"), "share_torso needs a feed-forward policy"),
    (dict(network=json.dumps([{"type": "dense", "size": 8}, {"type": "lstm", "size": 8}])),
     "share_torso needs a feed-forward network"),
    (dict(network=json.dumps({"branches": {"a": [{"type": "gru", "size": 4}]},
                              "combine": "concat"})),
     "share_torso needs a feed-forward network"),
])
def test_share_torso_with_a_recurrent_policy_is_refused(values, message):
  with pytest.raises(ConfigError, match=message):
    PPOConfig(share_torso=True, **values)


# ------------------------------------------------------- object API, export, checkpoint


def _object_agent(**keys):
  agent = Agent.create("ppo", states=dict(type="float", shape=(4,)),
                       actions=dict(type="int", num_values=3), seed=0, share_torso=True,
                       network=[dict(type="dense", size=16)], batch_size=8,
                       optimizer_batch_size=4, epochs=2, **keys)
  rng = np.random.default_rng(0)
  for t in range(12):
    agent.act(rng.normal(size=4).astype(np.float32))
    agent.observe(1.0, t % 4 == 3)
  return agent


def test_the_object_api_trains_exports_and_restores_a_shared_torso(tmp_path):
  agent = _object_agent()
  assert agent.updates == 1
  probes = np.random.default_rng(3).normal(size=(32, 4)).astype(np.float32)
  want = agent.act(probes, deterministic=True, independent=True)
  with open(agent.export(tmp_path / "p.jax", "jax"), "rb") as f:
    exported = jax.export.deserialize(f.read())
  np.testing.assert_array_equal(np.asarray(exported.call(probes)), want)
  agent.save(tmp_path / "agent")
  loaded = Agent.load(tmp_path / "agent")
  np.testing.assert_array_equal(loaded.act(probes, deterministic=True, independent=True), want)


# ------------------------------------------------------------------------ learning


@pytest.mark.slow
def test_cartpole_learns_with_a_shared_torso(learning_seed):
  """Fused gymnax CartPole-v1, 32 envs, the cartpole_fused values with one 64x64 tanh torso
  (network spec) under both heads: 40 updates (164k steps). Measured: seeds 0-2 evaluate
  500, 142, 500 (separate networks: 500, 500, 500), so the bar is 'clearly learned' (a
  random policy scores about 20) with a margin seed 1 clears, not solved."""
  iterations = 40
  config = dataclasses.replace(cartpole_fused(iterations), network=json.dumps(TANH_64),
                               share_torso=True)
  env = make_vec("CartPole-v1", 32)
  agent = make_ppo(config)
  sim, _ = fused.train(env, agent, jax.random.key(learning_seed), iterations)
  assert set(sim.agent_state.params) == {"policy"}
  score = float(jax.jit(fused.make_evaluate(env, agent, 500))(sim)["mean_score"])
  assert score >= 100, score
