"""Batch Renormalization (Ioffe 2017), the normalization CrossQ (Bhatt et al. 2024) puts in its
actor and critics.

In training (``train=True``) a layer normalizes each feature by the statistics of the batch
and moves its running mean and variance toward them (``momentum``); in inference it
normalizes by the running statistics alone. For the first ``warmup_steps`` training calls it
is batch normalization; after them the batch's normalization is corrected toward the
running statistics, ``x_hat = (x - mu_B) / sigma_B * r + d`` with ``r = sigma_B / sigma``
clipped to ``[1 / r_max, r_max]`` and ``d = (mu_B - mu) / sigma`` clipped to ``[-d_max,
d_max]``, both without gradient: early batches are noisy, later ones are kept close to what
inference will see. Then ``y = scale * x_hat + bias``.

``sigma = sqrt(var + epsilon)`` throughout; the variances are the biased ones (as flax's
``BatchNorm``). The values are sbx's and the paper's: momentum 0.99, epsilon 1e-3, r_max 3,
d_max 5; CrossQ's 100k warmup steps mean a 100k-step run is batch normalization throughout.

Variables: ``params`` ``scale``, ``bias`` ``[F]``; ``batch_stats`` ``mean``, ``var`` ``[F]``
and ``steps`` (int32, the training calls so far). Initialization does not move them.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from batchrl.networks.layer_specs import RenormSettings


class BatchRenorm(nn.Module):
  """Batch Renormalization over the last axis: ``x [..., F] -> [..., F]``, statistics over
  every other axis."""

  settings: RenormSettings = RenormSettings()

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    s = self.settings
    features = x.shape[-1]
    mean = self.variable("batch_stats", "mean", jnp.zeros, (features,), jnp.float32)
    var = self.variable("batch_stats", "var", jnp.ones, (features,), jnp.float32)
    steps = self.variable("batch_stats", "steps", lambda: jnp.int32(0))
    scale = self.param("scale", nn.initializers.ones, (features,), jnp.float32)
    bias = self.param("bias", nn.initializers.zeros, (features,), jnp.float32)

    if not train:
      x_hat = (x - mean.value) * jax.lax.rsqrt(var.value + s.epsilon)
      return x_hat * scale + bias

    axes = tuple(range(x.ndim - 1))
    batch_mean = jnp.mean(x, axis=axes)
    batch_var = jnp.mean(jnp.square(x), axis=axes) - jnp.square(batch_mean)
    batch_var = jnp.maximum(batch_var, 0.0)  # E[x^2] - E[x]^2 can round below zero
    batch_sigma = jnp.sqrt(batch_var + s.epsilon)
    x_hat = (x - batch_mean) / batch_sigma
    if not self.is_initializing():
      sigma = jnp.sqrt(var.value + s.epsilon)
      r = jax.lax.stop_gradient(jnp.clip(batch_sigma / sigma, 1.0 / s.r_max, s.r_max))
      d = jax.lax.stop_gradient(jnp.clip((batch_mean - mean.value) / sigma, -s.d_max, s.d_max))
      warm = steps.value >= s.warmup_steps
      x_hat = jnp.where(warm, x_hat * r + d, x_hat)
      # the running statistics see the batch's, not the corrected ones (as the paper)
      mean.value = s.momentum * mean.value + (1.0 - s.momentum) * jax.lax.stop_gradient(
          batch_mean)
      var.value = s.momentum * var.value + (1.0 - s.momentum) * jax.lax.stop_gradient(
          batch_var)
      steps.value = steps.value + 1
    return x_hat * scale + bias
