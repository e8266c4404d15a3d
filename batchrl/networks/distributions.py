"""Action distributions as pytrees: a diagonal Gaussian and a categorical.

Both are ``NamedTuple``s of arrays, so they pass through ``jit``, ``vmap``, ``lax.scan`` and
can be stored in rollouts (the "old policy" of PPO). Leading axes are batch axes (``[...]``);
the event axis is the last one (``[..., A]`` actions for the Gaussian, ``[..., K]`` logits
for the categorical). Every method reduces over the event axis and returns ``[...]``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class DiagGaussian(NamedTuple):
  """Independent normal per action dimension. ``mean``, ``std``: ``[..., A]``."""

  mean: jax.Array
  std: jax.Array

  def log_prob(self, x: jax.Array) -> jax.Array:
    """``[..., A] -> [...]``."""
    z = (x - self.mean) / self.std
    return jnp.sum(-0.5 * jnp.square(z) - jnp.log(self.std) - _HALF_LOG_2PI, axis=-1)

  def entropy(self) -> jax.Array:
    return jnp.sum(0.5 + _HALF_LOG_2PI + jnp.log(self.std), axis=-1)

  def kl(self, other: "DiagGaussian") -> jax.Array:
    """``KL(self || other)`` in closed form."""
    var_ratio = jnp.square(self.std / other.std)
    mean_term = jnp.square((self.mean - other.mean) / other.std)
    return jnp.sum(0.5 * (var_ratio + mean_term - 1.0 - jnp.log(var_ratio)), axis=-1)

  def mode(self) -> jax.Array:
    return self.mean

  def sample(self, key: jax.Array) -> jax.Array:
    noise = jax.random.normal(key, jnp.shape(self.mean), jnp.result_type(self.mean))
    return self.mean + self.std * noise


class Categorical(NamedTuple):
  """Distribution over ``K`` classes from unnormalized ``logits: [..., K]``; samples are int32."""

  logits: jax.Array

  @property
  def log_probs(self) -> jax.Array:
    return jax.nn.log_softmax(self.logits, axis=-1)

  def log_prob(self, x: jax.Array) -> jax.Array:
    """``x: [...]`` int class indices ``-> [...]``."""
    picked = jnp.take_along_axis(self.log_probs, x[..., None].astype(jnp.int32), axis=-1)
    return picked[..., 0]

  def entropy(self) -> jax.Array:
    log_p = self.log_probs
    return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)

  def kl(self, other: "Categorical") -> jax.Array:
    """``KL(self || other)``."""
    log_p = self.log_probs
    return jnp.sum(jnp.exp(log_p) * (log_p - other.log_probs), axis=-1)

  def mode(self) -> jax.Array:
    return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

  def sample(self, key: jax.Array) -> jax.Array:
    return jax.random.categorical(key, self.logits, axis=-1).astype(jnp.int32)
