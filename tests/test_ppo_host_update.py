"""PPO's update run from the host by the drivers (``batchrl.train.host_update``, as
``PPOConfig.update_loop='host'`` asks and ``ppo_atari`` uses on the CPU) against the scan loop
of the model's own update: same pieces, same steps, same order, same parameters up to float
rounding."""
from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import measured, parts
from batchrl.agents.core import Transition
from batchrl.agents.ppo import PPOConfig, model
from batchrl.agents.ppo.model import make_ppo
from batchrl.configclass import ConfigError
from batchrl.envs.jax_env import make_vec
from batchrl.specs import EnvSpec
from batchrl.train import fused, host_update

TINY_CNN = [{"type": "conv2d", "size": 4, "window": 3, "stride": 2, "activation": "relu"},
            {"type": "flatten"}, {"type": "dense", "size": 8, "activation": "relu"}]


def _filled_state(config: PPOConfig, seed: int = 0):
  """A PPO state whose rollout is full of random 7x7x2 image transitions (2 envs), and its
  model as the drivers schedule it (``host_update.schedule``)."""
  agent = host_update.schedule(make_ppo(config))
  spec = EnvSpec(gym.spaces.Box(0.0, 1.0, (7, 7, 2), np.float32), gym.spaces.Discrete(3), 2)
  key = jax.random.key(seed)
  state = agent.init(key, spec)
  obs = jax.random.uniform(jax.random.key(seed + 1), (2, 7, 7, 2))
  for t in range(config.rollout_length):
    key, act_key, obs_key, reward_key = jax.random.split(key, 4)
    action, extras = agent.act(state, obs, act_key)
    next_obs = jax.random.uniform(obs_key, (2, 7, 7, 2))
    done = jnp.array([t == 3, False])
    transition = Transition(obs, action, jax.random.normal(reward_key, (2,)), done,
                            jnp.zeros((2,), bool), next_obs, extras)
    state = agent.store(state, transition)
    obs = next_obs
  return agent, state


def _config(**values) -> PPOConfig:
  values = {"network": json.dumps(TINY_CNN), "rollout_length": 8, "update_epochs": 2,
            "batch_size": 4, "policy_objective": "clip", "gae_lambda": 0.95,
            "max_grad_norm": 0.5, "normalize_observations": False, **values}
  return PPOConfig(**values)


def assert_same_update(want, got):
  """Two ``(state, metrics)`` results of ``update``: the same parameters and metrics up to
  float rounding."""
  (want_state, want_metrics), (got_state, got_metrics) = want, got
  for a, b in zip(jax.tree.leaves(want_state.params), jax.tree.leaves(got_state.params)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  assert set(want_metrics) == set(got_metrics)
  for name in want_metrics:
    np.testing.assert_allclose(want_metrics[name], got_metrics[name], rtol=1e-3, atol=1e-5,
                               err_msg=name)


@pytest.mark.parametrize("objective", ["clip", "kl_penalty"])
def test_host_update_loop_gives_the_scan_loops_parameters_and_metrics(objective):
  states = {}
  for loop in ("scan", "host"):
    agent, state = _filled_state(_config(update_loop=loop, policy_objective=objective))
    # twice, the second time under jit as a training chunk runs it
    state, _ = agent.update(state)
    states[loop] = jax.jit(agent.update)(state)
  assert_same_update(states["scan"], states["host"])
  scan_state, host_state = states["scan"][0], states["host"][0]
  assert int(host_state.num_updates) == 2 and int(host_state.step) == 0
  np.testing.assert_array_equal(jax.random.key_data(scan_state.key),
                                jax.random.key_data(host_state.key))


def test_host_update_loop_runs_per_seed_under_vmap():
  agent, state = _filled_state(_config(update_loop="host"))
  two = jax.tree.map(lambda x: jnp.stack([x, x]), state)
  new, _ = jax.vmap(agent.update)(two)
  one, _ = agent.update(state)
  for a, b in zip(jax.tree.leaves(new.params), jax.tree.leaves(one.params)):
    np.testing.assert_allclose(a[0], b, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(a[1], b, rtol=1e-5, atol=1e-7)


def test_update_loop_auto_is_host_on_the_cpu_and_a_typo_is_refused():
  on_host = lambda config: host_update.on_host(make_ppo(config))
  assert on_host(_config(update_loop="auto")) == (jax.default_backend() == "cpu")
  assert on_host(_config(update_loop="host"))
  assert not on_host(_config())
  scan = make_ppo(_config())
  assert host_update.schedule(scan) is scan
  with pytest.raises(ConfigError, match="update_loop"):
    _config(update_loop="hosted")


@pytest.mark.parametrize("cores,frames,count", [(1, 1000, 1), (2, 1000, 2), (2, 1, 4),
                                               (1, 2, 2)])
def test_minibatch_gradients_in_equal_shares_side_by_side_give_the_scan_loops_result(
    monkeypatch, cores, frames, count):
  """On the CPU the host loop differentiates each minibatch (4 one-step sequences here) as
  equal shares of at most ``GRADIENT_SHARE_FRAMES`` frames over the cores, and averages
  them: any split gives the scan loop's parameters and metrics."""
  monkeypatch.setattr(parts, "usable_cpus", lambda: cores)
  monkeypatch.setattr(measured, "GRADIENT_SHARE_FRAMES", frames)
  pieces = make_ppo(_config(update_loop="host")).update_pieces
  assert host_update.gradient_shares(pieces, MINIBATCH_SEQUENCES).count == count
  results = {}
  for loop in ("scan", "host"):
    agent, state = _filled_state(_config(update_loop=loop))
    results[loop] = agent.update(state)
  assert_same_update(results["scan"], results["host"])


def test_the_kl_penalty_objective_keeps_whole_minibatches(monkeypatch):
  """Its cutoff is not linear in the batch: a mean of shares would change the gradient."""
  monkeypatch.setattr(measured, "GRADIENT_SHARE_FRAMES", 1)
  pieces = make_ppo(_config(update_loop="host", policy_objective="kl_penalty")).update_pieces
  assert host_update.gradient_shares(pieces, MINIBATCH_SEQUENCES).count == 1


def test_a_large_model_takes_its_optimizer_step_per_leaf_with_the_same_result(monkeypatch):
  """``flat_step`` above ``FLAT_STEP_MAX_PARAMS``: per leaf, the same parameters."""
  config = _config()
  agent, state = _filled_state(config)
  flat, _ = agent.update(state)
  monkeypatch.setattr(measured, "FLAT_STEP_MAX_PARAMS", 0)
  leaves, _ = make_ppo(config).update(state)
  for a, b in zip(jax.tree.leaves(flat.params), jax.tree.leaves(leaves.params)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
  for a, b in zip(jax.tree.leaves(flat.opt_state), jax.tree.leaves(leaves.opt_state)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


# a minibatch of ``_config``'s rollout: 2 envs x 8 steps in one-step sequences, 4 minibatches
MINIBATCH_SEQUENCES = 4


@pytest.mark.parametrize("frames", [4, 6, 1000])
def test_values_in_chunks_over_threads_equal_the_values_of_one_call(monkeypatch, frames):
  """The host loop's values before an update come in calls of about ``frames`` frames (8
  steps x 2 envs here: 4 and 6 give 4 calls of 2 steps over 2 threads, 1000 one call)."""
  monkeypatch.setattr(measured, "VALUE_CHUNK_FRAMES", frames)
  config = _config(update_loop="host", normalize_observations=True)
  agent, state = _filled_state(config)
  nets = model._networks(config, state.info)
  want = model._values_of_both(nets, state.params,
                               model.normalize_obs(config, state, state.buffer.obs),
                               model.normalize_obs(config, state, state.buffer.next_obs))
  got = host_update.values_in_chunks(agent.update_pieces, state)
  for g, w in zip(got, want):
    assert g.shape == w.shape == (8, 2)
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.gymnax
@pytest.mark.parametrize("seeds", [None, 2])
def test_an_update_run_from_the_host_runs_the_chunk_the_nested_loop_runs(seeds):
  """An update the drivers run from the host (``host_update.on_host``, PPO's host loop): the
  driver runs each rollout and each update as top-level programs; the same states and infos
  as the same update nested in the chunk's scan, and chunks still chain."""
  env = make_vec("CartPole-v1", 2)
  agent = make_ppo(PPOConfig(rollout_length=8, update_epochs=2, batch_size=4,
                             policy_objective="clip", update_loop="host"))
  assert host_update.on_host(agent)
  # the host update, without the pieces that tell the driver to run it on top
  nested = dataclasses.replace(host_update.schedule(agent), update_pieces=None)
  start = fused.init_sim(env, agent, jax.random.key(3), num_seeds=seeds)
  top_sim, top_infos = fused.make_run_chunk(env, agent, num_seeds=seeds)(start, 3)
  sim, infos = fused.make_run_chunk(env, nested, num_seeds=seeds)(start, 3)
  for a, b in zip(jax.tree.leaves(top_sim.agent_state.params),
                  jax.tree.leaves(sim.agent_state.params)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert set(top_infos) == set(infos)
  for name in infos:
    assert top_infos[name].shape == infos[name].shape == ((3,) if seeds is None else (2, 3))
    np.testing.assert_allclose(top_infos[name], infos[name], rtol=1e-4, atol=1e-5,
                               err_msg=name)
  run = fused.make_run_chunk(env, agent, num_seeds=seeds)
  chained = run(run(start, 1)[0], 2)[0]
  for a, b in zip(jax.tree.leaves(chained.agent_state.params),
                  jax.tree.leaves(top_sim.agent_state.params)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
