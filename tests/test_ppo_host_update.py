"""PPO's host update loop (``PPOConfig.update_loop='host'``, what ``ppo_atari`` uses on the
CPU) against the scan loop: same steps, same order, same parameters up to float rounding."""
from __future__ import annotations

import json

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl.agents.core import Transition
from batchrl.agents.ppo import PPOConfig
from batchrl.agents.ppo.model import host_update_loop, make_ppo
from batchrl.configclass import ConfigError
from batchrl.specs import EnvSpec

TINY_CNN = [{"type": "conv2d", "size": 4, "window": 3, "stride": 2, "activation": "relu"},
            {"type": "flatten"}, {"type": "dense", "size": 8, "activation": "relu"}]


def _filled_state(config: PPOConfig, seed: int = 0):
  """A PPO state whose rollout is full of random 7x7x2 image transitions (2 envs)."""
  agent = make_ppo(config)
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


@pytest.mark.parametrize("objective", ["clip", "kl_penalty"])
def test_host_update_loop_gives_the_scan_loops_parameters_and_metrics(objective):
  states = {}
  for loop in ("scan", "host"):
    agent, state = _filled_state(_config(update_loop=loop, policy_objective=objective))
    # twice, the second time under jit as a training chunk runs it
    state, _ = agent.update(state)
    states[loop] = jax.jit(agent.update)(state)
  (scan_state, scan_metrics), (host_state, host_metrics) = states["scan"], states["host"]
  for a, b in zip(jax.tree.leaves(scan_state.params), jax.tree.leaves(host_state.params)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  assert set(scan_metrics) == set(host_metrics)
  for name in scan_metrics:
    np.testing.assert_allclose(scan_metrics[name], host_metrics[name], rtol=1e-3, atol=1e-5,
                               err_msg=name)
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
  assert host_update_loop(_config(update_loop="auto")) == (jax.default_backend() == "cpu")
  assert not host_update_loop(_config())
  with pytest.raises(ConfigError, match="update_loop"):
    _config(update_loop="hosted")
