"""DiagGaussian and Categorical against closed forms written in numpy."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl.networks import Categorical, DiagGaussian

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
