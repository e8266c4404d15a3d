"""ActionHeads, ActionSpec, action_specs_from_space and sample_uniform."""
import math

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl.networks.distributions import (
  Bernoulli,
  Beta,
  Categorical,
  DiagGaussian,
  Independent,
  Joint,
  Reshaped,
)
from batchrl.networks.heads import ActionHeads, ActionSpec, action_specs_from_space, sample_uniform

ACTIONS = {
    "fire": ActionSpec("bool"),
    "pick": ActionSpec("int", (3,), num_values=4),
    "move": ActionSpec("float", (2,), low=-1.0, high=(1.0, 3.0)),
    "turn": ActionSpec("float", ()),
}
FEATURES = jax.random.normal(jax.random.key(0), (5, 7))


@pytest.fixture(scope="module")
def gaussian_heads():
  heads = ActionHeads(ACTIONS, init_std=0.3)
  params = heads.init(jax.random.key(1), FEATURES)
  return heads, params, jax.jit(heads.apply)


def test_distribution_structure_and_shapes(gaussian_heads):
  heads, params, apply = gaussian_heads
  dist = apply(params, FEATURES)
  assert isinstance(dist, Joint) and sorted(dist.components) == sorted(ACTIONS)
  parts = dist.components
  assert isinstance(parts["fire"], Bernoulli) and parts["fire"].logits.shape == (5,)
  assert isinstance(parts["pick"], Independent) and parts["pick"].ndims == 1
  assert parts["pick"].base.logits.shape == (5, 3, 4)
  assert isinstance(parts["move"], DiagGaussian) and parts["move"].mean.shape == (5, 2)
  assert isinstance(parts["turn"], Reshaped) and parts["turn"].base.mean.shape == (5, 1)
  sample = dist.sample(jax.random.key(2))
  shapes = {name: (x.shape, x.dtype) for name, x in sample.items()}
  assert shapes == {"fire": ((5,), jnp.bool_), "pick": ((5, 3), jnp.int32),
                    "move": ((5, 2), jnp.float32), "turn": ((5,), jnp.float32)}
  assert jax.tree.map(jnp.shape, dist.mode()) == {name: s for name, (s, _) in shapes.items()}
  log_prob = dist.log_prob(sample)
  assert log_prob.shape == (5,) and np.isfinite(log_prob).all()
  assert dist.entropy().shape == (5,) and dist.kl(dist).shape == (5,)
  np.testing.assert_allclose(log_prob, sum(parts[n].log_prob(sample[n]) for n in ACTIONS),
                             rtol=1e-6)


def test_parameters_are_scoped_by_action_name(gaussian_heads):
  _, params, _ = gaussian_heads
  assert sorted(params["params"]) == sorted(ACTIONS)
  assert params["params"]["pick"]["Dense_0"]["kernel"].shape == (7, 12)
  assert params["params"]["turn"]["raw_std"].shape == (1,)


def test_init_std_and_near_uniform_initial_policy(gaussian_heads):
  _, params, apply = gaussian_heads
  parts = apply(params, FEATURES).components
  np.testing.assert_allclose(parts["move"].std, 0.3, atol=1e-5)
  np.testing.assert_allclose(parts["turn"].base.std, 0.3, atol=1e-5)
  assert np.abs(parts["move"].mean).max() < 0.5  # near-mean initial policy
  probs = jax.nn.softmax(parts["pick"].base.logits)
  np.testing.assert_allclose(probs, 0.25, atol=0.07)
  np.testing.assert_allclose(parts["pick"].entropy(), 3 * math.log(4), rtol=1e-2)
  np.testing.assert_allclose(jax.nn.sigmoid(parts["fire"].logits), 0.5, atol=0.1)


def test_single_unnamed_action_gives_the_bare_distribution():
  heads = ActionHeads(ActionSpec("int", (), num_values=3))
  params = heads.init(jax.random.key(0), FEATURES)
  dist = heads.apply(params, FEATURES)
  assert isinstance(dist, Categorical) and dist.logits.shape == (5, 3)
  assert list(params["params"]) == ["action"]
  mask = np.array([False, True, False])
  masked = heads.apply(params, FEATURES, mask)
  np.testing.assert_array_equal(masked.mode(), 1)
  np.testing.assert_array_equal(masked.sample(jax.random.key(1)), 1)


def test_masks_for_named_int_actions(gaussian_heads):
  _, params, _ = gaussian_heads
  mask = np.zeros((5, 3, 4), bool)
  mask[..., 2] = True
  mask[:, 0, 0] = True
  heads, _, _ = gaussian_heads

  @jax.jit
  def act(params, key):
    dist = heads.apply(params, jnp.broadcast_to(FEATURES, (2000, 5, 7)), {"pick": mask})
    return dist.sample(key)["pick"], dist.entropy()

  picks, entropy = jax.tree.map(np.asarray, act(params, jax.random.key(3)))  # picks [2000, 5, 3]
  assert np.isin(picks[..., 0], [0, 2]).all() and (picks[..., 1:] == 2).all()
  assert set(np.unique(picks[..., 0])) == {0, 2}
  assert np.isfinite(entropy).all()


@pytest.mark.parametrize("masks, match", [
    ({"pik": np.ones((3, 4), bool)}, "unknown action 'pik'.*did you mean 'pick'"),
    ({"fire": np.ones((2,), bool)}, "int actions only.*'fire'"),
    ({"pick": np.ones((3, 5), bool)}, r"\[\.\.\., 3, 4\]; got \(3, 5\)"),
])
def test_bad_masks_are_refused(gaussian_heads, masks, match):
  heads, params, _ = gaussian_heads
  with pytest.raises(ValueError, match=match):
    heads.apply(params, FEATURES, masks)


def test_beta_heads_sample_within_bounds():
  actions = {"move": ACTIONS["move"], "grid": ActionSpec("float", (2, 2), low=0.0, high=2.0)}
  heads = ActionHeads(actions, float_distribution="beta")
  params = heads.init(jax.random.key(0), FEATURES)
  dist = jax.eval_shape(heads.apply, params, FEATURES)
  assert isinstance(dist.components["move"], Beta)
  assert isinstance(dist.components["grid"], Reshaped)

  @jax.jit
  def act(params, key):
    dist = heads.apply(params, FEATURES)
    sample = dist.sample(key)
    return sample, dist.mode(), dist.log_prob(sample)

  sample, mode, log_prob = jax.tree.map(np.asarray, act(params, jax.random.key(1)))
  assert sample["grid"].shape == (5, 2, 2) and sample["move"].shape == (5, 2)
  assert ((sample["move"] >= [-1.0, -1.0]) & (sample["move"] <= [1.0, 3.0])).all()
  assert ((sample["grid"] >= 0.0) & (sample["grid"] <= 2.0)).all()
  np.testing.assert_allclose(mode["move"], np.broadcast_to([0.0, 1.0], (5, 2)), atol=0.1)
  assert log_prob.shape == (5,) and np.isfinite(log_prob).all()


def test_beta_on_an_unbounded_action_raises():
  heads = ActionHeads({"turn": ActionSpec("float", ()), "fire": ActionSpec("bool")},
                      float_distribution="beta")
  with pytest.raises(ValueError, match="float_distribution='beta' needs finite low and high.*"
                                       "'turn'"):
    heads.init(jax.random.key(0), FEATURES)


def test_tanh_mean_and_option_typos():
  heads = ActionHeads(ActionSpec("float", (2,)), bounded_mean="tanh", init_output_factor=100.0)
  params = heads.init(jax.random.key(0), FEATURES * 100)
  mean = heads.apply(params, FEATURES * 100).mean
  assert np.abs(mean).max() <= 1.0 and np.abs(mean).max() > 0.9
  with pytest.raises(ValueError, match="float_distribution.*did you mean 'beta'"):
    ActionHeads(ACTIONS, float_distribution="betta").init(jax.random.key(0), FEATURES)
  with pytest.raises(ValueError, match="bounded_mean.*did you mean 'tanh'"):
    ActionHeads(ACTIONS, bounded_mean="tahn").init(jax.random.key(0), FEATURES)


def test_action_spec_validation():
  with pytest.raises(ValueError, match="kind.*did you mean 'float'"):
    ActionSpec("flaot")
  with pytest.raises(ValueError, match="num_values >= 1"):
    ActionSpec("int", (2,))
  with pytest.raises(ValueError, match="low < high"):
    ActionSpec("float", (2,), low=0.0, high=(1.0, 0.0))
  with pytest.raises(ValueError, match="does not broadcast"):
    ActionSpec("float", (2,), low=(0.0, 0.0, 0.0), high=1.0)
  spec = ActionSpec("float", 2, low=np.array([-1.0, -1.0]), high=np.array([1.0, 2.0]))
  assert spec.shape == (2,) and spec.low == -1.0 and spec.high == (1.0, 2.0)
  hash(spec)  # static: usable as a flax module attribute


def test_action_specs_from_space():
  space = gym.spaces.Dict({
      "a": gym.spaces.Discrete(3, start=1),
      "b": gym.spaces.Box(np.float32([-1.0, -np.inf]), np.float32([1.0, np.inf]), dtype=np.float32),
      "c": gym.spaces.MultiBinary(4),
      "d": gym.spaces.MultiDiscrete([5, 5]),
      "e": gym.spaces.Box(-np.inf, np.inf, (2, 3), np.float32),
  })
  specs = action_specs_from_space(space)
  assert specs["a"] == ActionSpec("int", (), 3, start=1)
  assert specs["b"].low == (-1.0, -math.inf) and not specs["b"].bounded
  assert specs["c"] == ActionSpec("bool", (4,))
  assert specs["d"] == ActionSpec("int", (2,), 5)
  assert specs["e"] == ActionSpec("float", (2, 3)) and specs["e"].low is None
  with pytest.raises(ValueError, match="nvec=\\[2, 3\\]"):
    action_specs_from_space(gym.spaces.MultiDiscrete([2, 3]))
  with pytest.raises(TypeError, match="Nested action space under 'x'"):
    action_specs_from_space(gym.spaces.Dict({"x": gym.spaces.Dict({"y": gym.spaces.Discrete(2)})}))
  with pytest.raises(TypeError, match="Unsupported action space"):
    action_specs_from_space(gym.spaces.Text(4))


def test_sample_uniform():
  specs = dict(ACTIONS, half=ActionSpec("float", (2,), low=(0.0, -np.inf), high=(np.inf, 5.0)))
  mask = np.array([[True, False, False, True], [False, True, False, False],
                   [True, True, True, True]])
  draw = jax.jit(lambda key, mask: sample_uniform(key, specs, (10000,), {"pick": mask}))
  sample = jax.tree.map(np.asarray, draw(jax.random.key(0), mask))
  assert sample["fire"].dtype == jnp.bool_ and sample["fire"].shape == (10000,)
  np.testing.assert_allclose(np.mean(sample["fire"]), 0.5, atol=0.02)
  picks = np.asarray(sample["pick"])
  assert picks.dtype == np.int32 and picks.shape == (10000, 3)
  assert np.take_along_axis(np.broadcast_to(mask, (10000, 3, 4)), picks[..., None], -1).all()
  np.testing.assert_allclose(np.bincount(picks[:, 2], minlength=4) / 10000, 0.25, atol=0.02)
  move = np.asarray(sample["move"])
  np.testing.assert_allclose([move.min(0), move.max(0)], [[-1, -1], [1, 3]], atol=0.01)
  turn = np.asarray(sample["turn"])
  assert turn.shape == (10000,) and turn.min() >= -1.0 and turn.max() <= 1.0
  half = np.asarray(sample["half"])
  np.testing.assert_allclose([half.min(0), half.max(0)], [[0, 3], [2, 5]], atol=0.01)
  single = sample_uniform(jax.random.key(1), ActionSpec("int", (), 3), (4, 2))
  assert single.shape == (4, 2) and ((single >= 0) & (single < 3)).all()
