"""PQN (its Q(lambda) targets are tested in test_returns.py): the loss and one whole update against
references computed here (NumPy forward pass with LayerNorm); LayerNorm in the network; masks in
acting and targets; bad input refused before anything runs; save -> load -> the same actions (and
the same ONNX actions); exact resume of a fused run; learning CartPole (slow). Compiled programs are
built once per module."""
import json
import re

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from batchrl import Agent, checkpoint, configs
from batchrl.agents.core import Transition
from batchrl.agents.family import BuildContext
from batchrl.agents.pqn import PQNConfig
from batchrl.agents.pqn import model as pqn_model
from batchrl.agents.pqn.keys import pqn_config
from batchrl.agents.pqn.model import make_pqn
from batchrl.cli import main
from batchrl.configclass import ConfigError
from batchrl.specs import EnvSpec
from conftest import assert_resumes_exactly, fused_kit
from test_returns import forward_view

pytestmark = pytest.mark.gymnax

BOX = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
FOUR = gym.spaces.Discrete(4)
MASKED_OBS = gym.spaces.Dict({"position": BOX, "action_mask": gym.spaces.MultiBinary(4)})
TINY = PQNConfig(hidden_layers=(16,), rollout_length=8, num_minibatches=4, update_epochs=2,
                 learning_rate=1e-3, total_updates=20, epsilon_decay=0.5)


# ------------------------------------------------------------------- network and loss


def reference_q(params, x, xp=np):
  """The Q-network by hand: dense -> LayerNorm (flax's epsilon 1e-6) -> relu per hidden
  layer, then the linear Q layer (the builder's names: ``layers_<i>_<type>``)."""
  for name in sorted(params, key=lambda n: int(n.split("_")[1])):
    layer = params[name]
    if name.endswith("_layer_norm"):
      mean = x.mean(axis=-1, keepdims=True)
      var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
      x = xp.maximum((x - mean) / xp.sqrt(var + 1e-6) * xp.asarray(layer["scale"])
                     + xp.asarray(layer["bias"]), 0.0)
    else:  # dense or the final linear
      x = x @ xp.asarray(layer["kernel"]) + xp.asarray(layer["bias"])
  return x


def init_state(config, spec, seed=0):
  return make_pqn(config).init(jax.random.key(seed), spec)


def test_the_network_has_layer_norm_before_each_activation():
  config = PQNConfig(hidden_layers=(8, 6))
  state = init_state(config, EnvSpec(BOX, FOUR, 2))
  assert jax.tree.map(np.shape, state.params) == {
      "layers_0_dense": {"kernel": (3, 8), "bias": (8,)},
      "layers_1_layer_norm": {"scale": (8,), "bias": (8,)},
      "layers_3_dense": {"kernel": (8, 6), "bias": (6,)},
      "layers_4_layer_norm": {"scale": (6,), "bias": (6,)},
      "layers_6_linear": {"kernel": (6, 4), "bias": (4,)}}
  x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
  nets = pqn_model.networks(config, state.info)
  np.testing.assert_allclose(nets.q_values(state.params, jnp.asarray(x))["action"],
                             reference_q(state.params, x), rtol=1e-4, atol=1e-5)
  plain = init_state(config.replace(layer_norm=False), EnvSpec(BOX, FOUR, 2))
  assert set(plain.params) == {"layers_0_dense", "layers_2_dense", "layers_4_linear"}


def test_conv_networks_normalize_over_channels():
  """The MinAtar recipe: conv 16 -> LayerNorm -> relu, flatten, dense 128 -> LayerNorm ->
  relu, Q-values; a conv on a vector state names the config field."""
  exp = configs.get("pqn_minatar_breakout")
  obs = gym.spaces.Box(0.0, 1.0, (10, 10, 4), np.float32)
  shapes = jax.eval_shape(lambda k: make_pqn(exp.config).init(
      k, EnvSpec(obs, gym.spaces.Discrete(3), 4)), jax.random.key(0)).params
  assert jax.tree.map(lambda a: a.shape, shapes) == {
      "layers_0_conv2d": {"kernel": (3, 3, 4, 16), "bias": (16,)},
      "layers_1_layer_norm": {"scale": (16,), "bias": (16,)},
      "layers_4_dense": {"kernel": (8 * 8 * 16, 128), "bias": (128,)},
      "layers_5_layer_norm": {"scale": (128,), "bias": (128,)},
      "layers_7_linear": {"kernel": (128, 3), "bias": (3,)}}
  dense_then_conv = json.dumps([{"type": "dense", "size": 4},
                                {"type": "conv2d", "size": 2}])
  with pytest.raises(ConfigError, match=r"pqn.network cannot be built on states of shape "
                                        r"\(10, 10, 4\): .*\(conv2d\) needs an input of rank 3"):
    make_pqn(PQNConfig(network=dense_then_conv)).init(
        jax.random.key(0), EnvSpec(obs, gym.spaces.Discrete(3), 4))


def test_the_loss_on_a_fixed_batch_equals_a_numpy_reference():
  config = PQNConfig(hidden_layers=(8, 8))
  state = init_state(config, EnvSpec(BOX, FOUR, 2))
  nets = pqn_model.networks(config, state.info)
  rng = np.random.default_rng(3)
  x = rng.normal(size=(16, 3)).astype(np.float32)
  actions = rng.integers(0, 4, 16)
  targets = rng.normal(size=16).astype(np.float32)
  loss, metrics = pqn_model.loss_fn(nets, state.params, (
      jnp.asarray(x), {"action": jnp.asarray(actions, jnp.int32)},
      {"action": jnp.asarray(targets)}))
  q = reference_q(jax.tree.map(np.asarray, state.params), x)
  taken = q[np.arange(16), actions]
  np.testing.assert_allclose(float(loss), np.mean(0.5 * (taken - targets) ** 2), rtol=1e-5)
  np.testing.assert_allclose(float(metrics["q_mean"]), taken.mean(), rtol=1e-4, atol=1e-6)


def made_up_rollout(config, spec, seed=0):
  """A state with a whole rollout stored (random observations, actions, rewards and ends)."""
  agent = make_pqn(config)
  state = agent.init(jax.random.key(seed), spec)
  rng = np.random.default_rng(seed)
  envs = spec.num_envs
  for _ in range(config.rollout_length):
    ends = rng.random(envs)
    state = agent.store(state, Transition(
        jnp.asarray(rng.normal(size=(envs, 3)), jnp.float32),
        jnp.asarray(rng.integers(0, 4, envs), jnp.int32),
        jnp.asarray(rng.normal(size=envs), jnp.float32), jnp.asarray(ends < 0.2),
        jnp.asarray((ends >= 0.2) & (ends < 0.4)),
        jnp.asarray(rng.normal(size=(envs, 3)), jnp.float32), {}))
  assert bool(agent.ready(state))
  return agent, state


def test_an_update_is_one_clipped_radam_step_towards_targets_of_the_old_parameters():
  """One epoch of one minibatch: the new parameters are RAdam (after clipping at
  max_grad_norm) on the gradient of mean 0.5 (Q(s, a) - target)^2, the targets being
  lambda-returns of max_a Q(s', a) under the parameters before the update (by hand here)."""
  config = PQNConfig(hidden_layers=(8,), rollout_length=5, num_minibatches=1, update_epochs=1,
                     reward_scale=0.5, td_lambda=0.7, discount=0.9, max_grad_norm=0.1,
                     learning_rate=1e-2)
  agent, state = made_up_rollout(config, EnvSpec(BOX, FOUR, 3))
  new_state, metrics = jax.jit(agent.update)(state)
  buffer = jax.tree.map(np.asarray, state.buffer)
  params = jax.tree.map(np.asarray, state.params)
  next_values = reference_q(params, buffer.next_obs).max(axis=-1)
  targets = forward_view(0.5 * buffer.reward, buffer.terminated, buffer.truncated,
                         next_values, 0.9, 0.7).reshape(-1)
  obs, actions = buffer.obs.reshape(-1, 3), buffer.action["action"].reshape(-1)

  def loss(p):
    q = reference_q(p, jnp.asarray(obs), xp=jnp)
    return jnp.mean(0.5 * (q[jnp.arange(len(actions)), actions] - targets) ** 2)

  tx = optax.chain(optax.clip_by_global_norm(0.1), optax.radam(1e-2))
  grads = jax.grad(loss)(state.params)
  updates, _ = tx.update(grads, tx.init(state.params), state.params)
  want = optax.apply_updates(state.params, updates)
  for got, expected in zip(jax.tree.leaves(new_state.params), jax.tree.leaves(want)):
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(float(metrics["target_mean"]), targets.mean(), rtol=1e-4)
  assert int(new_state.step) == 0 and int(new_state.num_updates) == 1


def test_epsilon_anneals_over_its_fraction_of_the_run():
  config = PQNConfig(epsilon_start=1.0, epsilon_end=0.1, epsilon_decay=0.25,
                     total_updates=40)
  eps = [float(pqn_model.epsilon(config, u)) for u in (0, 5, 10, 30)]
  np.testing.assert_allclose(eps, [1.0, 0.55, 0.1, 0.1], rtol=1e-6)
  assert float(pqn_model.epsilon(config.replace(epsilon_decay=0.0), 0)) == pytest.approx(0.1)


# ----------------------------------------------------------------------------- masks


def test_masks_bind_exploration_the_greedy_choice_and_the_targets():
  """Epsilon 1 explores among the allowed actions only (all of them); greedy is the best
  allowed one; the targets bootstrap from the best allowed next action."""
  config = PQNConfig(hidden_layers=(16,), rollout_length=2, num_minibatches=1,
                     epsilon_start=1.0, epsilon_end=1.0, td_lambda=0.0)
  agent = make_pqn(config)
  rng = np.random.default_rng(0)
  mask = rng.random((16, 4)) < 0.5
  mask[np.arange(16), rng.integers(0, 4, 16)] = True
  obs = {"position": jnp.asarray(rng.uniform(-1, 1, (16, 3)), jnp.float32),
         "action_mask": jnp.asarray(mask)}
  state = agent.init(jax.random.key(0), EnvSpec(MASKED_OBS, FOUR, 16))
  explored = np.asarray(jax.vmap(lambda k: agent.act(state, obs, k, False)[0])(
      jax.random.split(jax.random.key(1), 60)))
  assert mask[np.arange(16), explored].all() and len(np.unique(explored)) == 4
  greedy = np.asarray(agent.act(state, obs, jax.random.key(2), True)[0])
  nets = pqn_model.networks(config, state.info)
  q = np.asarray(nets.q_values(state.params, nets.inputs(obs))["action"])
  best = np.where(mask, q, -np.inf)
  np.testing.assert_array_equal(greedy, best.argmax(axis=1))
  transition = Transition(obs, jnp.asarray(greedy), jnp.zeros(16), jnp.zeros(16, bool),
                          jnp.zeros(16, bool), obs, {})
  filled = agent.store(agent.store(state, transition), transition)
  targets = pqn_model.targets(config, nets, filled)["action"]
  np.testing.assert_allclose(targets[0], 0.99 * best.max(axis=1), rtol=1e-5)


# ------------------------------------------------------------------------ bad input


def test_bad_config_values_name_the_field():
  for field, value in (("td_lambda", 1.5), ("td_lambda", -0.1), ("epsilon_end", 2.0)):
    with pytest.raises(ConfigError, match=rf"pqn\.{field} must be in \[0, 1\], got {value}"):
      PQNConfig(**{field: value})
  with pytest.raises(ConfigError, match=r"pqn\.network\[0\]: PQN's networks take the layer "
                     "types dense, conv2d, flatten"):
    PQNConfig(network=json.dumps([{"type": "lstm", "size": 8}]))
  with pytest.raises(ConfigError, match="must be a list of layers"):
    PQNConfig(network='"auto"')
  with pytest.raises(ConfigError, match=r"pqn\.td_lambda must be in \[0, 1\], got 1\.5"):
    configs.apply_overrides(configs.get("pqn_cartpole_fused"), ["td_lambda=1.5"])


def test_continuous_actions_and_uneven_minibatches_fail_at_init():
  """Checked when the model is built for its envs: traced only, nothing runs."""
  init = lambda config, spec: jax.eval_shape(
      lambda k: make_pqn(config).init(k, spec), jax.random.key(0))
  with pytest.raises(ConfigError, match="continuous.*'ppo', 'sac', 'tqc', 'td3', 'ddpg' or 'naf'"):
    init(TINY, EnvSpec(BOX, gym.spaces.Box(-1.0, 1.0, (1,), np.float32), 4))
  with pytest.raises(ConfigError, match=r"num_minibatches \(5\) must divide the rollout of "
                     r"rollout_length \* num_envs = 8 \* 3 = 24"):
    init(TINY.replace(num_minibatches=5), EnvSpec(BOX, FOUR, 3))
  with pytest.raises(ConfigError, match="conv2d layers, which need one image state"):
    init(configs.get("pqn_minatar_breakout").config, EnvSpec(BOX, FOUR, 4))


@pytest.mark.parametrize("config, override, message", [
    ("pqn_cartpole_fused", "pqn.td_lambda=1.5", r"pqn\.td_lambda must be in \[0, 1\], got 1\.5"),
    ("pqn_cartpole_fused", "pqn.num_minibatches=7", r"pqn\.num_minibatches \(7\) must divide "
     r"the rollout of rollout_length \* num_envs = 64 \* 32 = 2048 transitions"),
    ("pqn_cartpole_fused", "env=Pendulum-v1", r"PQN learns discrete actions only .* For "
     "continuous actions use 'ppo'"),
    ("pqn_minatar_breakout", "pqn.num_minibatches=7", r"pqn\.num_minibatches \(7\) must "
     r"divide .* = 32 \* 64 = 2048 transitions"),
    ("pqn_minatar_breakout", "env=CartPole-v1", "pqn.network has conv2d layers, which need "
     "one image state"),
])
def test_batchrl_train_refuses_bad_input_in_one_line_before_the_run_starts(
    tmp_path, capsys, config, override, message):
  """Config values, and config against env (checked by tracing the agent's init for the
  run's envs), fail before ``Starting run``: no run directory, not even the logdir."""
  logdir = tmp_path / "runs"
  assert main(["train", "--config", config, "--logdir", str(logdir), "--no-progress",
               "--set", override]) == 2
  err = capsys.readouterr().err
  lines = [line for line in err.splitlines() if line.strip()]
  assert len(lines) == 1 and lines[0].startswith("batchrl train: error: "), err
  assert re.search(message, lines[0]), lines[0]
  assert "Starting run" not in err and not logdir.exists()


def test_the_object_api_refuses_bad_input_before_building():
  with pytest.raises(ConfigError, match="continuous.*'sac'"):
    Agent.create("pqn", environment="Pendulum-v1")
  with pytest.raises(ConfigError, match=r"num_minibatches \(4\) must divide.* = 30"):
    pqn_config({"batch_size": 30, "num_minibatches": 4}, BuildContext(1, "auto", FOUR))
  with pytest.raises(ConfigError, match=r"batch_size \(30 timesteps per update\) must be a "
                     r"positive multiple of parallel_interactions \(4\)"):
    pqn_config({"batch_size": 30}, BuildContext(4, "auto", FOUR))
  with pytest.raises(ConfigError, match="optimizer must be 'radam', 'adam'"):
    pqn_config({"optimizer": "sgd"}, BuildContext(1, "auto", FOUR))


def test_object_api_keys():
  config = pqn_config({"batch_size": 64, "epochs": 3, "lambda": 0.8,
                       "optimizer": {"type": "adam", "learning_rate": 3e-4}},
                      BuildContext(4, [{"type": "dense", "size": 8}], FOUR))
  assert (config.rollout_length, config.update_epochs, config.td_lambda) == (16, 3, 0.8)
  assert (config.optimizer, config.learning_rate) == ("adam", 3e-4)
  assert config.num_minibatches == 2  # minibatches of 32 transitions
  assert json.loads(config.network) == [{"type": "dense", "size": 8}]
  assert pqn_config({}, BuildContext(1, "auto", FOUR)).network is None


# ------------------------------------------------------------- object API round trip


def test_save_then_load_acts_the_same_and_exports_the_same_actions(tmp_path):
  from tests.agents.conftest import AGENTS, probe_states, run_steps
  case = AGENTS["pqn"]
  agent = Agent.create("pqn", environment=case.env, network=[{"type": "dense", "size": 16}],
                       seed=3, **case.keys)
  reported = run_steps(agent, case.env, 70)
  assert agent.updates == 2 == sum(reported)
  agent.save(tmp_path / "pqn")
  loaded = Agent.load(tmp_path / "pqn")
  probes = probe_states(case)
  want = np.asarray(agent.act(probes, independent=True, deterministic=True))
  np.testing.assert_array_equal(
      np.asarray(loaded.act(probes, independent=True, deterministic=True)), want)
  for t in range(3):
    np.testing.assert_array_equal(np.asarray(loaded.act(probes[t])),
                                  np.asarray(agent.act(probes[t])))
    assert loaded.observe(1.0, terminal=False) == agent.observe(1.0, terminal=False)
  ort = pytest.importorskip("onnxruntime")
  path = agent.export(tmp_path / "pqn.onnx")
  session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
  np.testing.assert_array_equal(session.run(None, {"states": probes})[0], want)


# ------------------------------------------------------------------------ fused runs


@pytest.fixture(scope="module")
def tiny_kit():
  return fused_kit("CartPole-v1", 4, make_pqn(TINY), 50)


def test_a_checkpoint_resumes_exactly(tiny_kit, tmp_path):
  """Train N iterations, save, restore: the next chunk from the saved and the restored
  sims is the same, leaf for leaf (2N in one go == N, stop, resume, N)."""
  sim = tiny_kit.init(0)
  for _ in range(2):
    sim, _ = tiny_kit.run_chunk(sim, 3)
  assert int(sim.agent_state.num_updates) == 6
  checkpoint.save(tmp_path, 6 * 8 * 4, sim)
  restored, _ = checkpoint.restore(tmp_path, sim)
  infos = assert_resumes_exactly(tiny_kit.run_chunk, sim, restored, 3)
  assert set(infos) >= {"loss", "q_mean", "target_mean", "td_error", "grad_norm", "epsilon",
                        "learning_rate"}
  assert np.isfinite(infos["loss"]).all() and float(infos["epsilon"][-1]) < 1.0


@pytest.mark.slow
def test_the_named_cartpole_config_reaches_475_on_three_seeds():
  """pqn_cartpole_fused's agent and budget (44 updates of 32 envs x 64 steps), 3 seeds
  vmapped, evaluated every 4 updates as the config: each seed's best evaluation >= 475.
  Measured: seeds of keys 0 (16 of 16) and 1 (8 of 8) first at 8-40 updates."""
  exp = configs.get("pqn_cartpole_fused")
  kit = fused_kit("CartPole-v1", exp.run.num_envs, make_pqn(exp.config), 500, num_seeds=3)
  sim = kit.init(1)
  chunk = exp.run.eval_every // (exp.run.num_envs * exp.config.rollout_length)
  best = np.full(3, -np.inf)
  for _ in range(exp.config.total_updates // chunk):
    sim, _ = kit.run_chunk(sim, chunk)
    best = np.maximum(best, np.asarray(kit.evaluate(sim)["mean_score"]))
  assert int(sim.agent_state.num_updates[0]) == exp.config.total_updates
  assert (best >= 475).all(), best
