"""SimBa (Lee et al., ICLR 2025, "SimBa: Simplicity Bias for Scaling Up Parameters in Deep
RL"): a network whose hidden layers are residual blocks, so that it stays close to a linear
map of its input as it grows (the "simplicity bias" that lets off-policy critics scale).

``Simba(widths)`` on ``x [N, D]``: a Dense layer to ``widths[0]``, then one residual block per
width, ``x + Dense_w(act(Dense_4w(LayerNorm(x))))`` (pre-LayerNorm, an inverted bottleneck 4x
wide, He-normal kernels), then a final LayerNorm: ``[N, D] -> [N, widths[-1]]``. As sbx 0.28's
``SimbaResidualBlock`` and Simba actor and critics (their first Dense keeps flax's default
initializer; SimBa's own code used an orthogonal one). A block adds its input to its output,
so every width is the same (``batchrl.networks.layer_specs.simba_widths_error`` says so
without JAX). With ``dropout`` (DroQ on a SimBa critic, as sbx) each block's output is
dropped out, active only when not ``deterministic``.

The running observation normalization SimBa puts before the network (its RSNorm) is the
agent's, not a layer: ``batchrl.agents.actor_critic`` keeps its statistics in the state.
"""
from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax

from batchrl.networks.dense import Dense

EXPANSION = 4  # the inverted bottleneck: a block's hidden layer is 4 times its width


class SimbaBlock(nn.Module):
  """One residual block: ``x + Dense_w(act(Dense_4w(LayerNorm(x))))``, ``[N, w] -> [N, w]``."""

  width: int
  activation: Callable[[jax.Array], jax.Array] = nn.relu

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    y = nn.LayerNorm()(x)
    y = self.activation(Dense(EXPANSION * self.width, kernel_init=nn.initializers.he_normal())(y))
    return x + Dense(self.width, kernel_init=nn.initializers.he_normal())(y)


class Simba(nn.Module):
  """A Dense layer to ``widths[0]``, a ``SimbaBlock`` per width (dropout after each when
  ``dropout`` > 0 and not ``deterministic``), a final LayerNorm: ``[N, D] -> [N, w]``."""

  widths: tuple[int, ...]
  activation: Callable[[jax.Array], jax.Array] = nn.relu
  dropout: float = 0.0

  @nn.compact
  def __call__(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
    x = Dense(self.widths[0])(x)
    for width in self.widths:
      x = SimbaBlock(width, self.activation)(x)
      if self.dropout:
        x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
    return nn.LayerNorm()(x)

