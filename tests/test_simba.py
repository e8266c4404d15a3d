"""SimBa networks for the actor-critic agents (``architecture='simba'``, Lee et al. 2025, as
sbx 0.28), with the options that come with them: running observation normalization
(``normalize_observations``, SimBa's RSNorm) and AdamW (``weight_decay``). The residual block
and the whole actor and critics against NumPy from the same parameters, the JSON layer type,
the statistics after a few stores and where they are applied, a checkpoint round trip,
AdamW's decay, bad input, and a short fused Pendulum run (marked slow). The default options
leaving every agent bit-for-bit as before is ``test_offpolicy_update_hashes.py``'s."""
from __future__ import annotations

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import checkpoint
from batchrl.agents.actor_critic import learning, observations
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.actor_critic.networks import LOG_STD_MAX, LOG_STD_MIN, make_networks
from batchrl.agents.crossq import CrossQConfig
from batchrl.agents.sac import SACConfig
from batchrl.agents.sac.model import make_sac
from batchrl.agents.tqc import TQCConfig
from batchrl.agents.tqc.model import make_tqc
from batchrl.cli import main
from batchrl.configclass import ConfigError
from batchrl.networks.layer_specs import NetworkSpecError, check_layer
from batchrl.networks.layered import InputSpec, build_network
from batchrl.networks.simba import SimbaBlock
from batchrl.specs import EnvSpec
from conftest import leaves
from test_actor_critic import OBS, SMALL, TINY, TORQUE, filled_state, pendulum_best

SIMBA = dict(TINY, architecture="simba", actor_layers=(8,), critic_layers=(8, 8))


# ------------------------------------------------------------------ NumPy references


def layer_norm(x, p, epsilon=1e-6):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + epsilon) * p["scale"] + p["bias"]


def dense(x, p):
  return x @ np.asarray(p["kernel"], np.float64) + np.asarray(p["bias"], np.float64)


def block(x, p):
  """SimBa's residual block: ``x + Dense(relu(Dense_4w(LayerNorm(x))))``."""
  hidden = np.maximum(dense(layer_norm(x, p["LayerNorm_0"]), p["Dense_0"]), 0.0)
  return x + dense(hidden, p["Dense_1"])


def simba(x, p):
  """Dense to the first width, the blocks in order, a final LayerNorm."""
  x = dense(x, p["Dense_0"])
  for i in range(len([k for k in p if k.startswith("SimbaBlock_")])):
    x = block(x, p[f"SimbaBlock_{i}"])
  return layer_norm(x, p["LayerNorm_0"])


def to_float64(tree):
  return jax.tree.map(lambda x: np.asarray(x, np.float64), tree)


# ---------------------------------------------------------------------------- networks


def test_a_residual_block_is_x_plus_its_inverted_bottleneck_of_the_normalized_x():
  x = np.random.default_rng(0).normal(size=(5, 6)).astype(np.float32)
  params = SimbaBlock(6).init(jax.random.key(0), x)["params"]
  assert params["Dense_0"]["kernel"].shape == (6, 24)  # 4x wide, back to 6
  np.testing.assert_allclose(SimbaBlock(6).apply({"params": params}, x),
                             block(x.astype(np.float64), to_float64(params)), rtol=1e-5,
                             atol=1e-5)


@pytest.fixture(scope="module")
def simba_sac():
  """A tiny SAC with SimBa networks and observation normalization, a state after 8 stores
  of random transitions (past first_update) and its networks (states are values: no test
  changes it)."""
  config = SACConfig(**SIMBA, normalize_observations=True, weight_decay=1e-3)
  model = make_sac(config)
  state = filled_state(model, steps=8)
  return config, model, state, make_networks(config, state.info, 2, True, "sac")


def test_the_simba_actor_and_critics_are_numpy_s_forward_pass_of_their_parameters(simba_sac):
  """An actor of one block, two critics of two blocks each on ``[obs, action]``, SAC's
  heads (the mean, the log std squashed into its range, one Q per critic)."""
  _, _, state, nets = simba_sac
  rng = np.random.default_rng(1)
  obs = rng.normal(size=(4, 3)).astype(np.float32)
  action = rng.uniform(-1, 1, (4, 1)).astype(np.float32)
  actor, critic = to_float64(state.params.actor), to_float64(state.params.critic)
  assert sorted(actor) == ["Simba_0", "log_std", "mean"]
  assert sorted(k for k in actor["Simba_0"] if k.startswith("SimbaBlock")) == ["SimbaBlock_0"]

  features = simba(obs.astype(np.float64), actor["Simba_0"])
  squash = np.tanh(dense(features, actor["log_std"]))
  mean, log_std = nets.actor(state.params.actor, obs)
  np.testing.assert_allclose(mean, dense(features, actor["mean"]), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(
      log_std, LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (squash + 1.0), rtol=1e-4,
      atol=1e-5)

  joined = np.concatenate([obs, action], axis=1).astype(np.float64)
  expected = [dense(simba(joined, critic[f"critic_{i}"]["Simba_0"]), critic[f"critic_{i}"]["q"])
              [:, 0] for i in range(2)]
  assert len([k for k in critic["critic_0"]["Simba_0"] if k.startswith("SimbaBlock")]) == 2
  np.testing.assert_allclose(nets.critic(state.params.critic, obs, action), expected,
                             rtol=1e-4, atol=1e-5)


def test_the_json_simba_layer_is_the_same_encoder_and_checks_its_keys_without_jax():
  network = build_network([{"type": "simba", "size": 8, "blocks": 2}], InputSpec((3,), "float"))
  params = network.init(jax.random.key(0))
  x = np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32)
  np.testing.assert_allclose(network.apply(params, (), x)[1],
                             simba(x.astype(np.float64), to_float64(params["layers_0_simba"])),
                             rtol=1e-4, atol=1e-5)
  assert check_layer({"type": "simba", "size": 4}, "net[0]")[1] == dict(
      size=4, blocks=1, activation="relu")
  for layer, message in (({"type": "simba", "size": 4, "blok": 2}, "did you mean 'blocks'"),
                         ({"type": "simba", "size": 0}, "'size' must be an int >= 1"),
                         ({"type": "simba"}, "missing required key 'size'")):
    with pytest.raises(NetworkSpecError, match=message):
      check_layer(layer, "net[0]")
  with pytest.raises(NetworkSpecError, match=r"SimBa's residual blocks act on feature "
                                             r"vectors; put an encoder before it \(conv2d"):
    build_network([{"type": "simba", "size": 8}], InputSpec((8, 8, 3), "float"))


# ----------------------------------------------------------- observation normalization


def test_the_statistics_are_those_of_the_stored_observations_and_normalize_act_and_batches(
    simba_sac):
  config, model, state, nets = simba_sac
  stored = np.asarray(state.memory.items.obs[:8]).reshape(-1, 3)  # 8 stores of 2 envs
  stats = state.obs_stats
  assert float(stats.count) == 16
  np.testing.assert_allclose(stats.mean, stored.mean(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(stats.m2 / stats.count, stored.var(0), rtol=1e-4, atol=1e-6)

  # acting: the actor sees (obs - mean) / sqrt(var + 1e-8), clipped to +-10
  obs = np.array([[0.3, -0.2, 0.5], [30.0, 0.0, 0.0]], np.float32)
  expected = np.clip((obs - stored.mean(0)) / np.sqrt(stored.var(0) + 1e-8), -10, 10)
  mean = nets.actor(state.params.actor, jnp.asarray(expected, jnp.float32))[0]
  np.testing.assert_allclose(model.act(state, obs, jax.random.key(0), True)[0],
                             2.0 * np.tanh(mean), rtol=1e-4, atol=1e-5)

  # a sampled batch: obs and next_obs normalized, the memory keeps them as they came
  batch = learning.sample_batch(config, state, jax.random.key(3))
  raw = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), state.memory.items)
  for name in ("obs", "next_obs"):
    np.testing.assert_allclose(
        getattr(batch.items, name),
        observations.normalized(config, stats, getattr(raw, name)[batch.index]), rtol=1e-6)
  assert np.abs(batch.items.obs).max() <= 10.0


def test_imported_observations_join_the_statistics(simba_sac):
  """``import_observations`` adds the imported states to the running statistics, as
  ``store`` adds each stored one (5 observations: 4 transitions, 2 per env column)."""
  config, model, state, _ = simba_sac
  states = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, 0.5], [5.0, 2.0, 0.5], [7.0, 4.0, 0.5],
                     [9.0, 6.0, 0.5]], np.float32)
  imported = [dict(state=list(x), action=[0.5], reward=0.0, terminal=0, internal=[])
              for x in states]
  after = import_observations(state, imported)
  seen = np.concatenate([np.asarray(state.memory.items.obs[:8]).reshape(-1, 3), states[:4]])
  assert float(after.obs_stats.count) == 16 + 4
  np.testing.assert_allclose(after.obs_stats.mean, seen.mean(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(after.obs_stats.m2 / after.obs_stats.count, seen.var(0),
                             rtol=1e-4, atol=1e-6)


def test_without_normalization_the_state_keeps_no_statistics():
  state = make_sac(SACConfig(**TINY)).init(jax.random.key(0), EnvSpec(OBS, TORQUE, 2))
  assert state.obs_stats == ()


def test_a_checkpoint_restores_the_statistics_and_the_same_actions(simba_sac, tmp_path):
  _, model, state, _ = simba_sac
  state, _ = jax.jit(model.update)(state)
  checkpoint.save(tmp_path, 1, state)
  restored, _ = checkpoint.restore(tmp_path, state)
  for x, y in zip(leaves(state), leaves(restored)):
    np.testing.assert_array_equal(x, y)
  np.testing.assert_array_equal(restored.obs_stats.mean, state.obs_stats.mean)
  obs = np.random.default_rng(4).uniform(-1, 1, (2, 3)).astype(np.float32)
  act = jax.jit(model.act, static_argnums=3)
  np.testing.assert_array_equal(act(state, obs, jax.random.key(0), True)[0],
                                act(restored, obs, jax.random.key(9), True)[0])


# ----------------------------------------------------------------------------- AdamW


def test_weight_decay_is_adamw_decoupled_from_the_gradient_and_zero_is_adam():
  """One step from the same gradient: AdamW's update is Adam's minus rate * decay *
  parameter."""
  params = {"w": jnp.array([1.0, -2.0, 4.0])}
  grads = {"w": jnp.array([0.5, 0.5, -1.0])}
  updates = {}
  for decay in (0.0, 0.1):
    opt = learning.optimizers(SACConfig(**TINY, weight_decay=decay)).actor
    updates[decay] = opt.update(grads, opt.init(params), params)[0]["w"]
  np.testing.assert_allclose(updates[0.0], -3e-4 * np.sign(grads["w"]), rtol=1e-5)
  np.testing.assert_allclose(updates[0.1] - updates[0.0], -3e-4 * 0.1 * params["w"],
                             rtol=1e-4)


# ------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("changes, message", [
    (dict(critic_layers=(64, 32)), "sac.critic_layers lists SimBa residual blocks, which add "
     "their input to their output, so every block has the same width; got (64, 32)"),
    (dict(critic_layer_norm=True), "sac.critic_layer_norm adds LayerNorm to MLP critics; "
     "SimBa's blocks already normalize"),
    (dict(weight_decay=-1.0), "sac.weight_decay must be >= 0"),
    (dict(architecture="resnet"), "architecture"),
])
def test_bad_simba_settings_are_errors_naming_the_field(changes, message):
  with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
    SACConfig(**{**SIMBA, **changes})


def test_crossq_refuses_simba_naming_the_agents_that_take_it():
  with pytest.raises(ConfigError, match="crossq.architecture 'simba' is not supported.*sac or "
                                        "tqc with architecture='simba'"):
    CrossQConfig(architecture="simba", actor_layers=(64,), critic_layers=(64,))


def test_simba_on_images_without_an_encoder_says_to_give_one():
  images = EnvSpec(gym.spaces.Box(0.0, 1.0, (8, 8, 3), np.float32), TORQUE, 1)
  with pytest.raises(ConfigError, match=r"sac.architecture 'simba' takes vector observations, "
                                        r"but these are images of shape \(8, 8, 3\).*"
                                        r"convolutional encoder as sac.network"):
    make_sac(SACConfig(**SIMBA)).init(jax.random.key(0), images)


def test_unequal_block_widths_are_one_line_before_any_run_exists(tmp_path, capsys):
  logdir = tmp_path / "runs"
  assert main(["train", "--config", "sac_simba_pendulum", "--logdir", str(logdir),
               "--set", "sac.actor_layers=[32,16]", "--no-progress"]) == 2
  err = capsys.readouterr().err
  assert err.startswith("batchrl train: error: ") and err.count("\n") == 1, err
  assert "sac.actor_layers lists SimBa residual blocks" in err
  assert not logdir.exists()


# --------------------------------------------------------------------------- learning


@pytest.mark.gymnax
@pytest.mark.slow
def test_sac_with_simba_learns_pendulum_within_4k_steps(learning_seed):
  """SAC's small Pendulum settings with SimBa (an actor of one block of 32, critics of two),
  observation normalization and AdamW (decay 1e-4). Measured after each 1k steps: seed 0
  -1215, -947, -1378, -201; seed 1 -1437, -1146, -264, -155; seed 2 -1483, -1217, -361, -188
  (best -201, -155, -188; 17-19 s each on 2 shared cores)."""
  config = SACConfig(**{**SMALL, "actor_layers": (32,), "critic_layers": (32, 32)},
                     architecture="simba", normalize_observations=True, weight_decay=1e-4,
                     alpha_learning_rate=1e-3)
  best, scores = pendulum_best(make_sac(config), 4, 250, seed=learning_seed)
  assert best >= -400, scores


def test_tqc_takes_simba_critics_of_quantiles():
  config = TQCConfig(**SIMBA, num_quantiles=3, normalize_observations=True)
  state = make_tqc(config).init(jax.random.key(0), EnvSpec(OBS, TORQUE, 2))
  assert state.params.critic["critic_1"]["q"]["kernel"].shape == (8, 3)
  assert "SimbaBlock_1" in state.params.critic["critic_1"]["Simba_0"]
