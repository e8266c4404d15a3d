"""CrossQ (``batchrl.agents.crossq``) besides the agent contract and its Pendulum learning
test (``test_actor_critic.py``): Batch Renormalization's two passes and its correction after
the warmup, the joint pass that normalizes ``(s, a)`` and ``(s', a')`` together, a state
without target networks, the actor's statistics moving only on its delayed steps, and the
config's checks."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import Agent
from batchrl.agents.actor_critic.networks import make_networks
from batchrl.agents.crossq import CrossQConfig
from batchrl.agents.crossq.losses import joint_critic_values
from batchrl.agents.crossq.model import make_crossq
from batchrl.configclass import ConfigError
from batchrl.networks.batch_renorm import BatchRenorm
from batchrl.networks.layer_specs import RenormSettings
from conftest import leaves
from test_actor_critic import TINY, filled_state, store_random

SETTINGS = RenormSettings(momentum=0.9, warmup_steps=2)


def renorm_pass(x, variables, train: bool):
  out, changed = BatchRenorm(SETTINGS).apply(variables, x, train, mutable=["batch_stats"])
  return out, {"params": variables["params"], "batch_stats": changed["batch_stats"]}


def test_batch_renorm_normalizes_by_the_batch_then_by_its_running_statistics():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(3.0, 2.0, (64, 4)), jnp.float32)
  variables = BatchRenorm(SETTINGS).init(jax.random.key(0), x, True)
  np.testing.assert_array_equal(variables["batch_stats"]["mean"], np.zeros(4))  # init: no move

  # warmup: batch normalization, the running statistics moved by 1 - momentum
  out, variables = renorm_pass(x, variables, True)
  np.testing.assert_allclose(np.mean(out, 0), 0.0, atol=1e-5)
  np.testing.assert_allclose(np.var(out, 0), np.var(x, 0) / (np.var(x, 0) + 1e-3), rtol=1e-4)
  stats = variables["batch_stats"]
  np.testing.assert_allclose(stats["mean"], 0.1 * np.mean(x, 0), rtol=1e-5)
  np.testing.assert_allclose(stats["var"], 0.9 + 0.1 * np.var(x, 0), rtol=1e-5)
  assert int(stats["steps"]) == 1

  # inference: the running statistics alone, nothing moves
  y = x[:3]
  inferred, after = renorm_pass(y, variables, False)
  np.testing.assert_allclose(inferred, (y - stats["mean"]) / np.sqrt(stats["var"] + 1e-3),
                             rtol=1e-5)
  assert all(np.array_equal(a, b) for a, b in zip(leaves(after), leaves(variables)))


def test_after_the_warmup_a_batch_near_the_running_statistics_is_normalized_by_them():
  """``(x - mu_B) / sigma_B * r + d = (x - mu) / sigma`` while ``r`` and ``d`` are inside
  their clips; outside, the correction is clipped (``d`` to ``d_max``)."""
  rng = np.random.default_rng(1)
  x = jnp.asarray(rng.normal(0.0, 1.0, (256, 3)), jnp.float32)
  variables = BatchRenorm(SETTINGS).init(jax.random.key(0), x, True)
  for _ in range(2):  # the warmup
    _, variables = renorm_pass(x, variables, True)
  near = x * 1.2 + 0.3
  stats = variables["batch_stats"]
  out, _ = renorm_pass(near, variables, True)
  np.testing.assert_allclose(out, (near - stats["mean"]) / np.sqrt(stats["var"] + 1e-3),
                             rtol=1e-4, atol=1e-4)
  far = x + 100.0  # d would be ~ 100 / sigma: clipped to 5
  out, _ = renorm_pass(far, variables, True)
  batch_normalized = (far - np.mean(far, 0)) / np.sqrt(np.var(far, 0) + 1e-3)
  r = np.clip(np.sqrt(np.var(far, 0) + 1e-3) / np.sqrt(stats["var"] + 1e-3), 1 / 3, 3)
  np.testing.assert_allclose(out, batch_normalized * r + 5.0, rtol=1e-4, atol=1e-4)


TINY_CROSSQ = dict(TINY, policy_delay=3)


@pytest.fixture(scope="module")
def crossq():
  """One tiny CrossQ model, a state with 24 stores of random transitions and its networks,
  shared by the tests below (states are values: none of them changes it)."""
  config = CrossQConfig(**TINY_CROSSQ)
  model = make_crossq(config)
  state = filled_state(model)
  nets = make_networks(config, state.info, config.num_critics, True, "crossq",
                       renorm=config.renorm)
  return model, state, nets


def test_the_critics_normalize_s_a_and_next_s_a_by_their_mixture_in_one_pass(crossq):
  _, state, nets = crossq
  rng = np.random.default_rng(2)
  obs = jnp.asarray(rng.normal(size=(8, 3)), jnp.float32)
  next_obs = obs + 5.0  # a batch of s' unlike the batch of s
  action, next_action = jnp.full((8, 1), 0.5), jnp.full((8, 1), -0.5)
  q, next_q, stats = joint_critic_values(nets, state.params.critic, obs, action, next_obs,
                                         next_action)
  assert q.shape == next_q.shape == (2, 8)
  rows = np.concatenate([np.concatenate([obs, action], 1),
                         np.concatenate([next_obs, next_action], 1)])
  for critic in ("critic_0", "critic_1"):  # the first layer saw the 16 joined rows
    first = stats[critic]["MLP_0"]["BatchRenorm_0"]
    np.testing.assert_allclose(first["mean"], 0.01 * rows.mean(0), rtol=1e-5, atol=1e-6)
    assert int(first["steps"]) == 1
  # the s rows of the joint pass differ from a pass over the s rows alone: they were
  # normalized by the mixture's statistics
  alone, _ = nets.critic_train(state.params.critic, obs, action)
  assert not np.allclose(q, alone, atol=1e-3)


def test_the_state_keeps_no_target_networks_and_optimizers_see_only_parameters(crossq):
  _, state, _ = crossq
  assert state.params.target_actor == () and state.params.target_critic == ()
  adam = state.opt_state.critic[0][0]  # chain(adam)'s state: the moments mirror the params
  assert jax.tree.structure(adam.mu) == jax.tree.structure(state.params.critic.params)


def test_the_actor_and_its_statistics_move_on_every_policy_delay_th_step_only(crossq):
  model, state, _ = crossq
  update = jax.jit(model.update)
  learned, rng = [], np.random.default_rng(1)
  for _ in range(6):
    state = store_random(model, state, rng)
    before = state.params
    state, metrics = update(state)
    learned.append(float(metrics["actor_learned"]))
    actor_moved = [not np.array_equal(a, b) for a, b in zip(leaves(state.params.actor),
                                                            leaves(before.actor))]
    assert all(actor_moved) == any(actor_moved) == bool(learned[-1])
    assert not np.array_equal(leaves(state.params.critic.stats)[0],
                              leaves(before.critic.stats)[0])  # the critics on every step
  assert learned == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]
  assert all(np.isfinite(float(v)) for v in metrics.values())


def test_it_acts_by_the_running_statistics_so_one_state_gives_one_action(crossq):
  """Acting is an inference pass: a state's greedy action does not depend on which other
  states share its batch."""
  model, state, _ = crossq
  state, _ = jax.jit(model.update)(store_random(model, state, np.random.default_rng(0)))
  obs = np.random.default_rng(3).uniform(-1, 1, (2, 3)).astype(np.float32)
  alone, _ = model.act(state, obs, jax.random.key(0), deterministic=True)
  other = obs.copy()
  other[1] = 0.9
  together, _ = model.act(state, other, jax.random.key(0), deterministic=True)
  np.testing.assert_allclose(alone[0], together[0], rtol=1e-6)


@pytest.mark.parametrize("changes, message", [
    (dict(update_target_weight=0.01), "crossq.update_target_weight is not read: CrossQ keeps "
     "no target networks"),
    (dict(target_update_frequency=2), "crossq.target_update_frequency is not read"),
    (dict(policy_delay=0), "crossq.policy_delay must be >= 1"),
    (dict(renorm_momentum=1.0), r"crossq.renorm_momentum must be in \[0, 1\)"),
    (dict(renorm_warmup_steps=-1), "crossq.renorm_warmup_steps must be >= 0"),
    (dict(adam_beta1=1.0), r"crossq.adam_beta1 must be in \[0, 1\)"),
    (dict(num_critics=0), "crossq.num_critics must be >= 1"),
])
def test_bad_values_are_errors_naming_the_field(changes, message):
  with pytest.raises(ConfigError, match=message):
    CrossQConfig(**changes)


def test_discrete_actions_are_an_error_naming_the_agents_for_them():
  with pytest.raises(ConfigError, match="crossq learns continuous .* Agents for discrete "
                                        "actions: .*sac"):
    Agent.create(agent="crossq", states=dict(type="float", shape=(4,)),
                 actions=dict(type="int", num_values=2), max_episode_timesteps=10)
