"""DroQ (Hiraoka et al. 2022) as a SAC configuration, as sbx has it: dropout and LayerNorm in
the shared critics (``critic_dropout``, ``critic_layer_norm``), the masks drawn per gradient
step from the agent's key, many gradient steps per environment step, and the actor and
temperature stepped on every ``policy_delay``-th one (``policy_delay``, which every
actor-critic agent now has). Also the named configs of DroQ and SimBa holding sbx's values."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import configs
from batchrl.agents.actor_critic import learning
from batchrl.agents.actor_critic.networks import make_networks
from batchrl.agents.crossq import CrossQConfig
from batchrl.agents.sac import SACConfig
from batchrl.agents.sac.model import make_sac
from batchrl.agents.td3 import TD3Config
from batchrl.agents.td3.model import make_td3
from batchrl.configclass import ConfigError
from batchrl.specs import EnvSpec
from conftest import leaves
from test_actor_critic import OBS, TINY, TORQUE, filled_state

DROQ = dict(TINY, critic_dropout=0.5, critic_layer_norm=True)


def relu_layer_norm_q(x, p, epsilon=1e-6):
  """An MLP critic of one hidden layer with DroQ's LayerNorm: ``q(relu(LN(Dense(x))))``."""
  h = x @ p["MLP_0"]["Dense_0"]["kernel"] + p["MLP_0"]["Dense_0"]["bias"]
  mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
  ln = p["MLP_0"]["LayerNorm_0"]
  h = np.maximum((h - mean) / np.sqrt(var + epsilon) * ln["scale"] + ln["bias"], 0.0)
  return (h @ p["q"]["kernel"] + p["q"]["bias"])[:, 0]


@pytest.fixture(scope="module")
def sac_state():
  """A tiny SAC's state after 8 stores of random transitions (past first_update), shared by
  the tests below with models of other options on the same networks (states are values: no
  test changes it; each model's update reads its own config)."""
  return filled_state(make_sac(SACConfig(**TINY)), steps=8)


@pytest.fixture(scope="module")
def droq_sac():
  """A tiny SAC with dropout 0.5 and LayerNorm in its critics: its state and networks."""
  config = SACConfig(**DROQ)
  state = make_sac(config).init(jax.random.key(0), EnvSpec(OBS, TORQUE, 2))
  return state, make_networks(config, state.info, 2, True, "sac")


def test_the_critics_drop_out_only_with_a_key_and_the_same_key_draws_the_same_masks(
    droq_sac):
  state, nets = droq_sac
  rng = np.random.default_rng(0)
  obs = jnp.asarray(rng.normal(size=(16, 3)), jnp.float32)
  action = jnp.asarray(rng.uniform(-1, 1, (16, 1)), jnp.float32)
  params = state.params.critic
  plain = nets.critic(params, obs, action)
  critic = params["critic_0"]
  np.testing.assert_allclose(  # without a key: the LayerNorm critic, nothing dropped
      plain[0], relu_layer_norm_q(np.concatenate([obs, action], 1), jax.tree.map(
          np.asarray, critic)), rtol=1e-4, atol=1e-5)
  dropped = nets.with_dropout(jax.random.key(1)).critic
  first = dropped(params, obs, action)
  np.testing.assert_array_equal(first, dropped(params, obs, action))
  assert not np.allclose(first, plain)
  assert not np.allclose(first, nets.with_dropout(jax.random.key(2)).critic(params, obs,
                                                                            action))
  assert nets.with_dropout(None) is nets


def test_dropout_keys_come_from_the_step_key_apart_from_its_other_draws():
  key = jax.random.key(5)
  assert learning.dropout_keys(SACConfig(**TINY), key) == (None, None, None)
  keys = learning.dropout_keys(SACConfig(**DROQ), key)
  data = [tuple(np.asarray(jax.random.key_data(k))) for k in keys]
  data += [tuple(np.asarray(jax.random.key_data(k))) for k in learning.step_keys(key)]
  assert len(set(data)) == 6  # target, critic, actor masks; batch, target, actor draws
  again = learning.dropout_keys(SACConfig(**DROQ), key)
  assert all(np.array_equal(jax.random.key_data(a), jax.random.key_data(b))
             for a, b in zip(keys, again))


@pytest.mark.parametrize("agent", ["sac", "td3"])
def test_dropout_is_active_in_training_and_a_state_trains_to_the_same_result_twice(
    agent, sac_state):
  """From one state (dropout has no parameters: a state serves with and without it), an
  update with dropout moves the critics elsewhere than one without, and the same update
  twice ends in the same bits."""
  make, config_class = {"sac": (make_sac, SACConfig), "td3": (make_td3, TD3Config)}[agent]
  state = sac_state if agent == "sac" else filled_state(make_td3(TD3Config(**TINY)), steps=8)
  results = {}
  for rate in (0.0, 0.5):
    model = make(config_class(**TINY, critic_dropout=rate))
    update = jax.jit(model.update)
    results[rate] = update(state)
    if rate:
      # (equal_nan: a held actor step's metrics are NaN, not computed)
      assert all(np.array_equal(a, b, equal_nan=True)
                 for a, b in zip(leaves(results[rate]), leaves(update(state))))
  assert float(results[0.5][1]["learning"]) == 1.0
  plain, dropped = (leaves(results[r][0].params.critic) for r in (0.0, 0.5))
  assert any(not np.allclose(a, b) for a, b in zip(plain, dropped))


def test_sac_steps_its_actor_and_temperature_every_policy_delay_gradient_steps(sac_state):
  model = make_sac(SACConfig(**TINY, policy_delay=3, alpha_learning_rate=0.01))
  state = sac_state
  update = jax.jit(model.update)
  learned, moved, held = [], [], None
  for _ in range(6):
    before = state
    state, metrics = update(state)
    held = metrics if not metrics["actor_learned"] else held
    learned.append(float(metrics["actor_learned"]))
    moved.append((not np.array_equal(leaves(before.params.actor)[0],
                                      leaves(state.params.actor)[0]),
                  float(before.params.log_alpha) != float(state.params.log_alpha)))
  assert learned == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]  # after policy_delay critic steps
  assert moved == [(bool(x), bool(x)) for x in learned]
  # a held step computes nothing of the actor: its loss is NaN (reports show the latest
  # computed, batchrl.train.metrics); a step that learned reports it
  assert np.isfinite(metrics["actor_loss"]) and np.isnan(held["actor_loss"])


@pytest.mark.parametrize("changes, message", [
    (dict(critic_dropout=1.0), "sac.critic_dropout must be in [0, 1)"),
    (dict(critic_dropout=-0.1), "sac.critic_dropout must be in [0, 1)"),
    (dict(policy_delay=0), "sac.policy_delay must be >= 1"),
])
def test_bad_droq_values_are_errors_naming_the_field(changes, message):
  with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(")", r"\)")):
    SACConfig(**{**TINY, **changes})


@pytest.mark.parametrize("changes, message", [
    (dict(critic_dropout=0.01), "crossq.critic_dropout is not supported"),
    (dict(critic_layer_norm=True), "crossq.critic_layer_norm is not supported"),
])
def test_crossq_refuses_droq_s_critics(changes, message):
  with pytest.raises(ConfigError, match=message):
    CrossQConfig(**changes)


def test_the_named_configs_hold_sbx_s_droq_and_simba_values():
  droq = configs.get("droq_mujoco").config
  assert (droq.critic_dropout, droq.critic_layer_norm, droq.repeat_update, droq.policy_delay,
          droq.first_update, droq.start_steps, droq.update_frequency) == (
              0.01, True, 20, 20, 10_000, 10_000, 1)
  assert (droq.actor_layers, droq.critic_layers, droq.architecture) == ((256, 256),
                                                                         (256, 256), "mlp")
  for name in ("sac_simba_mujoco", "tqc_simba_mujoco"):
    simba = configs.get(name).config
    assert (simba.architecture, simba.actor_layers, simba.critic_layers, simba.weight_decay,
            simba.normalize_observations, simba.first_update, simba.learning_rate) == (
                "simba", (128,), (256, 256), 1e-4, True, 10_000, 3e-4), name
  pendulum = configs.get("droq_pendulum").config
  assert pendulum.repeat_update // pendulum.policy_delay == configs.get(
      "droq_pendulum").run.num_envs  # one actor step per environment step, as DroQ's 20/20
