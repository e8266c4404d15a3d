"""TQC (``batchrl.agents.tqc``) besides its update parity (``test_update_parity.py``) and
the agent contract: the truncation of the pooled target by hand, the quantile loss's
asymmetry, its config's checks as one line before any run directory, and the action spaces
it refuses."""
from __future__ import annotations

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import Agent
from batchrl.agents.family import BuildContext
from batchrl.agents.tqc import TQCConfig
from batchrl.agents.tqc.keys import tqc_config
from batchrl.agents.tqc.losses import quantile_fractions, quantile_huber_loss, truncated_quantiles
from batchrl.agents.tqc.model import make_tqc
from batchrl.cli import main
from batchrl.configclass import ConfigError
from batchrl.specs import EnvSpec


def test_truncation_pools_the_critics_sorts_and_drops_the_largest_per_critic():
  # 2 critics x 1 sample x 3 quantiles; drop 1 per critic: the 2 largest of the 6 go
  quantiles = jnp.asarray([[[5.0, 1.0, 3.0]], [[0.0, 4.0, 2.0]]])
  np.testing.assert_array_equal(truncated_quantiles(quantiles, 1), [[0.0, 1.0, 2.0, 3.0]])
  np.testing.assert_array_equal(truncated_quantiles(quantiles, 0),
                                [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]])


def test_the_quantile_loss_weighs_under_and_over_estimates_by_the_fraction():
  """One quantile at tau = 1/2 of one critic is the median: an error of +-0.5 (Huber 0.125)
  costs half of it either way; with 4 quantiles, the lowest (tau 1/8) pays 1/8 of the error
  when the target is above it and 7/8 when below."""
  np.testing.assert_allclose(quantile_fractions(4), [0.125, 0.375, 0.625, 0.875])
  one = jnp.zeros((1, 1, 1))
  for target in (0.5, -0.5):
    loss, error = quantile_huber_loss(one, jnp.full((1, 1), target), jnp.ones(1))
    np.testing.assert_allclose(loss, 0.5 * 0.125)
    np.testing.assert_allclose(error, [[target]])
  four = jnp.zeros((1, 1, 4))
  above, _ = quantile_huber_loss(four, jnp.full((1, 1), 2.0), jnp.ones(1))
  below, _ = quantile_huber_loss(four, jnp.full((1, 1), -2.0), jnp.ones(1))
  # Huber(2) = 1.5 (linear past 1); the fractions' weights: tau above, 1 - tau below
  np.testing.assert_allclose(above, 1.5 * np.mean([0.125, 0.375, 0.625, 0.875]), rtol=1e-6)
  np.testing.assert_allclose(below, 1.5 * np.mean([0.875, 0.625, 0.375, 0.125]), rtol=1e-6)


@pytest.mark.parametrize("changes, message", [
    (dict(num_quantiles=5, drop_quantiles=5), "tqc.drop_quantiles must be >= 0 and below "
     "tqc.num_quantiles (5)"),
    (dict(drop_quantiles=-1), "tqc.drop_quantiles must be >= 0"),
    (dict(num_critics=0), "tqc.num_critics must be >= 1"),
    (dict(initial_alpha=0.0), "tqc.initial_alpha must be > 0"),
])
def test_bad_values_are_errors_naming_the_field(changes, message):
  with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
    TQCConfig(**changes)


def test_too_many_quantiles_dropped_is_one_line_before_any_run_exists(tmp_path, capsys):
  logdir = tmp_path / "runs"
  assert main(["train", "--config", "tqc_pendulum_fused", "--logdir", str(logdir),
               "--set", "tqc.drop_quantiles=25", "--no-progress"]) == 2
  err = capsys.readouterr().err
  assert err.startswith("batchrl train: error: ") and err.count("\n") == 1, err
  assert "tqc.drop_quantiles must be >= 0 and below tqc.num_quantiles (25)" in err
  assert not logdir.exists()


def test_discrete_actions_are_an_error_naming_the_agents_for_them():
  with pytest.raises(ConfigError, match="tqc learns continuous .* Agents for discrete "
                                        "actions: .*sac"):
    Agent.create(agent="tqc", states=dict(type="float", shape=(4,)),
                 actions=dict(type="int", num_values=2), max_episode_timesteps=10)


def test_quantile_counts_are_keys_of_agent_create_and_shape_the_critics():
  env = gym.make("Pendulum-v1")
  context = BuildContext(1, [{"type": "dense", "size": 8}], env.action_space)
  config = tqc_config(dict(num_quantiles=7, drop_quantiles=3, num_critics=3,
                           critic_layers=[8]), context)
  assert (config.num_quantiles, config.drop_quantiles, config.kept_quantiles) == (7, 3, 12)
  state = make_tqc(config).init(jax.random.key(0), EnvSpec(env.observation_space,
                                                          env.action_space, 1))
  critics = state.params.critic
  assert sorted(k for k in critics if k.startswith("critic_")) == [
      "critic_0", "critic_1", "critic_2"]
  assert critics["critic_2"]["q"]["kernel"].shape[-1] == 7
