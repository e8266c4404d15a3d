"""Streaming mean and variance (Chan et al.'s parallel update), as a pure pytree.

Used by agents to normalize observations (centred, scaled, clipped) and rewards (scaled
only). Statistics are per element of the value shape; batches are reduced over their
leading axes. Two statistics over disjoint data merge exactly (``merge``), which is what
makes them usable from several workers or seeds.

The variance is the population variance (``np.var``, ddof 0). Before two values have been
seen the variance reads as 1, so early normalization leaves values unscaled.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp


class RunningStats(NamedTuple):
  """Count, mean and sum of squared deviations (M2) of everything seen so far.

  Attributes:
    count: ``[]`` float32 number of values seen (per element).
    mean: ``[*shape]`` float32.
    m2: ``[*shape]`` float32, ``sum((x - mean)**2)``.
  """

  count: jax.Array
  mean: jax.Array
  m2: jax.Array

  @classmethod
  def create(cls, shape: tuple[int, ...] = ()) -> "RunningStats":
    """Empty statistics for values of ``shape``."""
    zeros = jnp.zeros(shape, jnp.float32)
    return cls(jnp.float32(0.0), zeros, zeros)

  def update(self, batch: jax.Array) -> "RunningStats":
    """Adds ``batch`` of shape ``[N..., *shape]``: every leading axis is a sample axis."""
    batch = jnp.asarray(batch, jnp.float32)
    axes = tuple(range(batch.ndim - self.mean.ndim))
    if batch.shape[len(axes):] != self.mean.shape:
      raise ValueError(f"RunningStats of shape {self.mean.shape} cannot take a batch of "
                       f"shape {batch.shape}; its trailing axes must be {self.mean.shape}.")
    count = jnp.float32(math.prod(batch.shape[:len(axes)]))
    mean = jnp.mean(batch, axis=axes)
    m2 = jnp.sum(jnp.square(batch - mean), axis=axes)
    return self.merge(RunningStats(count, mean, m2))

  def merge(self, other: "RunningStats") -> "RunningStats":
    """Statistics of the union of both data sets."""
    count = self.count + other.count
    safe = jnp.maximum(count, 1.0)
    delta = other.mean - self.mean
    mean = self.mean + delta * (other.count / safe)
    m2 = self.m2 + other.m2 + jnp.square(delta) * (self.count * other.count / safe)
    return RunningStats(count, mean, m2)

  @property
  def variance(self) -> jax.Array:
    """Population variance; 1 until two values have been seen."""
    return jnp.where(self.count >= 2, self.m2 / jnp.maximum(self.count, 1.0), 1.0)

  def std(self, epsilon: float = 1e-4) -> jax.Array:
    """``sqrt(variance + epsilon)``: never zero, even for constant values."""
    return jnp.sqrt(self.variance + epsilon)

  def normalize(self, value: jax.Array, *, center: bool = True, clip: float | None = None,
                epsilon: float = 1e-4) -> jax.Array:
    """``(value - mean) / std`` (``value / std`` when not ``center``), clipped to ``±clip``."""
    value = jnp.asarray(value, jnp.float32)
    if center:
      value = value - self.mean
    value = value / self.std(epsilon)
    if clip is not None:
      value = jnp.clip(value, -clip, clip)
    return value
