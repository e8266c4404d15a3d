"""DiagGaussian and Categorical against closed forms written in numpy."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import digamma

from batchrl.networks.distributions import (
  Bernoulli,
  Beta,
  Categorical,
  DiagGaussian,
  Independent,
  Joint,
  Reshaped,
  mask_allows_nothing,
)

RNG = np.random.default_rng(0)


def gaussians():
  mean = RNG.normal(size=(4, 3)).astype(np.float32)
  std = RNG.uniform(0.2, 2.0, size=(4, 3)).astype(np.float32)
  return mean, std


def test_gaussian_log_prob_entropy_kl():
  mean, std = gaussians()
  mean2, std2 = gaussians()
  x = RNG.normal(size=(4, 3)).astype(np.float32)
  p, q = DiagGaussian(mean, std), DiagGaussian(mean2, std2)
  log_prob = np.sum(-0.5 * ((x - mean) / std) ** 2 - np.log(std * math.sqrt(2 * math.pi)), -1)
  entropy = np.sum(0.5 * np.log(2 * math.pi * math.e * std ** 2), -1)
  kl = np.sum(np.log(std2 / std) + (std ** 2 + (mean - mean2) ** 2) / (2 * std2 ** 2) - 0.5,
              -1)
  np.testing.assert_allclose(p.log_prob(x), log_prob, rtol=1e-5)
  np.testing.assert_allclose(p.entropy(), entropy, rtol=1e-5)
  np.testing.assert_allclose(p.kl(q), kl, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(p.kl(p), 0.0, atol=1e-6)
  np.testing.assert_array_equal(p.mode(), mean)


def test_gaussian_samples_have_the_right_moments():
  p = DiagGaussian(jnp.array([1.0, -2.0]), jnp.array([0.5, 2.0]))
  samples = jax.vmap(p.sample)(jax.random.split(jax.random.key(0), 20000))
  np.testing.assert_allclose(samples.mean(0), [1.0, -2.0], atol=0.05)
  np.testing.assert_allclose(samples.std(0), [0.5, 2.0], rtol=0.03)


def test_categorical_log_prob_entropy_kl():
  logits = RNG.normal(size=(5, 4)).astype(np.float32)
  logits2 = RNG.normal(size=(5, 4)).astype(np.float32)
  x = RNG.integers(0, 4, size=5)
  probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  probs2 = np.exp(logits2) / np.exp(logits2).sum(-1, keepdims=True)
  p, q = Categorical(logits), Categorical(logits2)
  np.testing.assert_allclose(p.log_prob(x), np.log(probs[np.arange(5), x]), rtol=1e-5)
  np.testing.assert_allclose(p.entropy(), -np.sum(probs * np.log(probs), -1), rtol=1e-5)
  np.testing.assert_allclose(p.kl(q), np.sum(probs * np.log(probs / probs2), -1), rtol=1e-4,
                             atol=1e-6)
  np.testing.assert_array_equal(p.mode(), logits.argmax(-1))
  assert p.mode().dtype == jnp.int32


def test_categorical_sample_frequencies():
  p = Categorical(jnp.log(jnp.array([0.2, 0.5, 0.3])))
  samples = jax.vmap(p.sample)(jax.random.split(jax.random.key(1), 20000))
  assert samples.dtype == jnp.int32
  np.testing.assert_allclose(np.bincount(samples, minlength=3) / 20000, [0.2, 0.5, 0.3],
                             atol=0.02)


@pytest.mark.parametrize("dist", [DiagGaussian(jnp.zeros((2, 3)), jnp.ones((2, 3))),
                                  Categorical(jnp.zeros((2, 3)))])
def test_distributions_are_pytrees(dist):
  stacked = jax.tree.map(lambda x: jnp.stack([x, x]), dist)
  entropies = jax.vmap(lambda d: d.entropy())(stacked)
  assert entropies.shape == (2, 2)


# --- masking, Bernoulli, Beta, Independent, Reshaped, Joint ---------------------------------

MASK = np.array([[True, False, True, False],
                 [False, False, False, True],
                 [True, True, True, True],
                 [False, True, True, False]])


def softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def test_masked_categorical_never_samples_a_masked_value():
  logits = RNG.normal(size=(4, 4)).astype(np.float32)
  logits[~MASK] = 10.0  # the masked classes have the largest logits
  dist = Categorical.masked(jnp.broadcast_to(logits, (10000, 4, 4)), MASK)
  samples = np.asarray(dist.sample(jax.random.key(2)))  # [10000, 4]: one vectorized draw
  allowed = np.take_along_axis(np.broadcast_to(MASK, (10000, 4, 4)), samples[..., None], -1)
  assert allowed.all()
  # Every allowed value is drawn at the renormalized probability.
  probs = softmax(np.where(MASK, logits, -np.inf))
  freqs = np.stack([np.bincount(samples[:, row], minlength=4) / 10000 for row in range(4)])
  np.testing.assert_allclose(freqs, probs, atol=0.02)
  mode = np.asarray(Categorical.masked(logits, MASK).mode())
  assert MASK[np.arange(4), mode].all()
  np.testing.assert_array_equal(mode, np.where(MASK, logits, -np.inf).argmax(-1))


def test_masked_classes_contribute_exactly_zero_to_entropy_and_kl():
  logits = RNG.normal(size=(4, 4)).astype(np.float32)
  logits2 = RNG.normal(size=(4, 4)).astype(np.float32)
  p, q = Categorical.masked(logits, MASK), Categorical.masked(logits2, MASK)
  probs = softmax(np.where(MASK, logits, -np.inf))
  probs2 = softmax(np.where(MASK, logits2, -np.inf))
  with np.errstate(divide="ignore", invalid="ignore"):
    entropy = -np.sum(np.where(MASK, probs * np.log(probs), 0.0), -1)
    kl = np.sum(np.where(MASK, probs * np.log(probs / probs2), 0.0), -1)
  np.testing.assert_allclose(p.entropy(), entropy, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(p.kl(q), kl, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(p.kl(p), 0.0, atol=1e-6)
  # Against an unmasked distribution too, and gradients: all finite.
  assert np.isfinite(p.kl(Categorical(logits2))).all()
  assert np.isfinite(Categorical(logits2).kl(p)).all()
  grads = jax.grad(lambda z: jnp.sum(Categorical.masked(z, MASK).entropy()
                                     + Categorical.masked(z, MASK).kl(q)))(jnp.asarray(logits))
  assert np.isfinite(grads).all()
  np.testing.assert_array_equal(np.asarray(grads)[~MASK], 0.0)


def test_mask_allows_nothing_only_for_all_false_rows():
  mask = np.array([[True, False], [False, False], [False, True]])
  np.testing.assert_array_equal(mask_allows_nothing(mask), [False, True, False])
  assert isinstance(mask_allows_nothing(mask), np.ndarray)
  np.testing.assert_array_equal(mask_allows_nothing(jnp.asarray(mask[None])),
                                [[False, True, False]])
  # An all-masked row stays finite (uniform), so the error is the caller's to raise.
  dist = Categorical.masked(jnp.zeros((3, 2)), mask)
  assert np.isfinite(dist.entropy()).all()
  assert Categorical.masked(jnp.zeros(2), None).logits.shape == (2,)


def test_bernoulli_log_prob_entropy_kl_mode_sample():
  logits = RNG.normal(size=(6,)).astype(np.float32) * 2
  logits2 = RNG.normal(size=(6,)).astype(np.float32)
  p1, p2 = 1 / (1 + np.exp(-logits)), 1 / (1 + np.exp(-logits2))
  x = np.array([True, False, True, True, False, False])
  p, q = Bernoulli(logits), Bernoulli(logits2)
  np.testing.assert_allclose(p.log_prob(x), np.log(np.where(x, p1, 1 - p1)), rtol=1e-5)
  np.testing.assert_allclose(p.log_prob(x.astype(np.int32)), p.log_prob(x))
  np.testing.assert_allclose(p.entropy(), -(p1 * np.log(p1) + (1 - p1) * np.log(1 - p1)),
                             rtol=1e-5)
  kl = p1 * np.log(p1 / p2) + (1 - p1) * np.log((1 - p1) / (1 - p2))
  np.testing.assert_allclose(p.kl(q), kl, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(p.kl(p), 0.0, atol=1e-6)
  np.testing.assert_array_equal(p.mode(), logits > 0)
  samples = Bernoulli(jnp.broadcast_to(logits, (10000, 6))).sample(jax.random.key(3))
  assert samples.dtype == jnp.bool_
  np.testing.assert_allclose(np.mean(samples, 0), p1, atol=0.02)


def beta_log_pdf(x, a, b, low, high):
  u = (x - low) / (high - low)
  log_b = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
  return (a - 1) * math.log(u) + (b - 1) * math.log(1 - u) - log_b - math.log(high - low)


def test_beta_log_prob_entropy_kl_against_closed_forms():
  a = RNG.uniform(0.5, 4.0, size=(3, 2))
  b = RNG.uniform(0.5, 4.0, size=(3, 2))
  a2, b2 = RNG.uniform(0.5, 4.0, size=(3, 2)), RNG.uniform(0.5, 4.0, size=(3, 2))
  low, high = np.array([-2.0, 0.0]), np.array([1.0, 0.5])
  x = low + RNG.uniform(0.05, 0.95, size=(3, 2)) * (high - low)
  p = Beta(*(jnp.asarray(v, jnp.float32) for v in (a, b, low, high)))
  q = Beta(*(jnp.asarray(v, jnp.float32) for v in (a2, b2, low, high)))
  log_prob = [sum(beta_log_pdf(x[i, j], a[i, j], b[i, j], low[j], high[j]) for j in range(2))
              for i in range(3)]
  np.testing.assert_allclose(p.log_prob(x.astype(np.float32)), log_prob, rtol=1e-4)

  def psi(v):
    return np.asarray(digamma(jnp.asarray(v, jnp.float32)), np.float64)

  log_b = np.vectorize(lambda a, b: math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
  entropy = (log_b(a, b) - (a - 1) * psi(a) - (b - 1) * psi(b) + (a + b - 2) * psi(a + b)
             + np.log(high - low))
  np.testing.assert_allclose(p.entropy(), entropy.sum(-1), rtol=1e-4, atol=1e-5)
  kl = (log_b(a2, b2) - log_b(a, b) + (a - a2) * psi(a) + (b - b2) * psi(b)
        + (a2 - a + b2 - b) * psi(a + b))
  np.testing.assert_allclose(p.kl(q), kl.sum(-1), rtol=1e-4, atol=1e-5)
  assert (np.asarray(p.kl(q)) >= 0).all()
  np.testing.assert_allclose(p.kl(p), 0.0, atol=1e-5)
  np.testing.assert_allclose(p.mode(), low + a / (a + b) * (high - low), rtol=1e-5)


def test_beta_samples_lie_in_bounds_with_the_scaled_mean():
  p = Beta(jnp.full((10000, 2), 2.0), jnp.array([[2.0, 5.0]] * 10000), jnp.array([-2.0, 0.0]),
           jnp.array([1.0, 0.5]))
  samples = np.asarray(p.sample(jax.random.key(4)))
  assert samples.shape == (10000, 2)
  assert (samples >= [-2.0, 0.0]).all() and (samples <= [1.0, 0.5]).all()
  np.testing.assert_allclose(samples.mean(0), [-0.5, 0.5 * 2 / 7], atol=0.02)
  # Samples at the bounds have a finite log_prob (u is clipped inside (0, 1)).
  edge = Beta(jnp.full(2, 0.5), jnp.full(2, 0.5), 0.0, 1.0)
  assert np.isfinite(edge.log_prob(jnp.array([0.0, 1.0])))


def test_independent_and_reshaped_sum_over_event_axes():
  logits = RNG.normal(size=(2, 3, 4)).astype(np.float32)
  cat, ind = Categorical(logits), Independent(Categorical(logits), 1)
  x = RNG.integers(0, 4, size=(2, 3))
  np.testing.assert_allclose(ind.log_prob(x), cat.log_prob(x).sum(-1), rtol=1e-6)
  np.testing.assert_allclose(ind.entropy(), cat.entropy().sum(-1), rtol=1e-6)
  other = Categorical(logits[::-1])
  np.testing.assert_allclose(ind.kl(Independent(other, 1)), cat.kl(other).sum(-1), rtol=1e-6)
  assert ind.sample(jax.random.key(0)).shape == (2, 3)
  mean, std = gaussians()  # [4, 3]
  flat = DiagGaussian(mean.reshape(4, 3), std.reshape(4, 3))
  grid = Reshaped(DiagGaussian(mean[:, :2].reshape(4, 2), std[:, :2]), (1, 2))
  assert grid.sample(jax.random.key(0)).shape == (4, 1, 2)
  assert grid.mode().shape == (4, 1, 2)
  np.testing.assert_allclose(grid.log_prob(mean[:, None, :2]),
                             DiagGaussian(mean[:, :2], std[:, :2]).log_prob(mean[:, :2]))
  scalar = Reshaped(DiagGaussian(mean[:, :1], std[:, :1]), ())
  assert scalar.sample(jax.random.key(0)).shape == (4,)
  np.testing.assert_allclose(scalar.log_prob(mean[:, 0]),
                             DiagGaussian(mean[:, :1], std[:, :1]).log_prob(mean[:, :1]))
  np.testing.assert_allclose(scalar.entropy(), flat.entropy() - DiagGaussian(
      mean[:, 1:], std[:, 1:]).entropy(), rtol=1e-5)


def test_joint_sums_components_and_samples_dicts():
  logits = RNG.normal(size=(5, 3)).astype(np.float32)
  mean, std = RNG.normal(size=(5, 2)).astype(np.float32), np.full((5, 2), 0.7, np.float32)
  parts = {"move": DiagGaussian(mean, std), "fire": Bernoulli(logits[:, 0]),
           "pick": Categorical(logits)}
  joint = Joint(parts)
  x = joint.sample(jax.random.key(5))
  assert sorted(x) == ["fire", "move", "pick"]
  assert x["fire"].dtype == jnp.bool_ and x["pick"].dtype == jnp.int32
  np.testing.assert_allclose(joint.log_prob(x), sum(d.log_prob(x[n]) for n, d in parts.items()),
                             rtol=1e-6)
  np.testing.assert_allclose(joint.entropy(), sum(d.entropy() for d in parts.values()), rtol=1e-6)
  other = Joint({"move": DiagGaussian(mean + 1, std), "fire": Bernoulli(logits[:, 1]),
                 "pick": Categorical(logits[::-1])})
  np.testing.assert_allclose(joint.kl(other), sum(parts[n].kl(other.components[n]) for n in parts),
                             rtol=1e-5)
  np.testing.assert_allclose(joint.kl(joint), 0.0, atol=1e-6)
  assert jax.tree.map(jnp.shape, joint.mode()) == {"fire": (5,), "move": (5, 2), "pick": (5,)}
  # Same key, same sample: the per-component keys are split in sorted-name order.
  keys = jax.random.split(jax.random.key(5), 3)
  np.testing.assert_array_equal(x["move"], parts["move"].sample(keys[1]))


@pytest.mark.parametrize("dist", [
    Bernoulli(jnp.zeros((2,))),
    Beta(jnp.ones((2, 3)), jnp.ones((2, 3)), jnp.zeros((2, 3)), jnp.ones((2, 3))),
    Independent(Categorical(jnp.zeros((2, 3, 4))), 1),
    Reshaped(DiagGaussian(jnp.zeros((2, 6)), jnp.ones((2, 6))), (2, 3)),
    Joint({"a": Categorical(jnp.zeros((2, 3))), "b": Independent(Bernoulli(jnp.zeros((2, 4))), 1)}),
])
def test_new_distributions_are_pytrees(dist):
  stacked = jax.tree.map(lambda x: jnp.stack([x, x]), dist)
  entropies = jax.jit(jax.vmap(lambda d: d.entropy()))(stacked)
  assert entropies.shape == (2, 2)
