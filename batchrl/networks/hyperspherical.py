"""SimbaV2's hyperspherical networks (Lee et al. 2025, "Hyperspherical Normalization for
Scalable Deep Reinforcement Learning"), as the authors' reference (dojeon-ai/SimbaV2,
``scale_rl/agents/simbaV2``) builds them: every hidden feature vector lies on the unit
sphere, every weight vector too (``project``, after each optimizer step), and learnable
per-feature ``Scaler`` vectors carry the magnitudes.

With ``n(x) = x / max(||x||, 1e-8)`` over the feature axis, ``h`` a block's width:

* ``HyperDense``: a Dense layer without bias; ``project`` keeps each output unit's
  incoming weight vector at unit norm.
* ``Scaler(init, scale)``: ``s * (init / scale) * x``, the parameter ``s`` starting at
  ``scale`` (so the multiplier starts at ``init``, and ``scale`` sets how far one Adam step
  moves it).
* ``HyperEmbedder``: ``n(Scaler(W n([x, c_shift])))``: a constant feature ``c_shift``
  appended before the first normalization keeps the input's norm as information.
* ``HyperLERPBlock``: ``n(z + alpha * (MLP(z) - z))``, the MLP ``n(W2 (relu(Scaler(W1 z)) +
  1e-8))`` four times as wide inside, ``alpha`` a ``Scaler`` (a learned step toward the MLP's
  point on the sphere instead of a residual sum).
* ``HyperEncoder``: the embedder then one block per width (all widths equal).
* ``HyperGaussianHead``: ``mean`` and ``log std`` each ``W2 Scaler(W1 z) + b``, the log std
  squashed into ``(-10, 2)`` by a tanh.
* ``HyperCategoricalHead``: logits ``W2 Scaler(W1 z) + b`` over a value distribution's bins.

The default scalers are the reference's: ``sqrt(2 / h)`` for the embedder's and the blocks'
(halved inside a block's 4x-wide MLP), ``1`` for the heads'; the gate ``alpha`` starts at
``1 / (blocks + 1)`` with scale ``1 / sqrt(h)``.
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from batchrl.networks.dense import Dense

EPSILON = 1e-8  # the smallest norm divided by
EXPANSION = 4  # a block's MLP is 4 times its width inside
LOG_STD_MIN, LOG_STD_MAX = -10.0, 2.0  # the Gaussian head's log std range
KERNEL = "hyper_dense"  # the name of every projected layer: ``project`` finds them by it


def l2_normalized(x: jax.Array, axis: int = -1) -> jax.Array:
  """``x / max(||x||_2, 1e-8)`` along ``axis``."""
  norm = jnp.sqrt(jnp.sum(jnp.square(x), axis=axis, keepdims=True))
  return x / jnp.maximum(norm, EPSILON)


def project(params):
  """``params`` with every ``HyperDense`` kernel ``[..., in, out]`` scaled to unit norm over
  its input axis (each output unit's weight vector back on the sphere); every other leaf
  (scalers, head biases) as it is. What SimbaV2 applies at init and after each optimizer
  step of the network."""
  def leaf(path, x):
    names = [getattr(k, "key", None) for k in path]
    if KERNEL in names and names[-1] == "kernel":
      return l2_normalized(x, axis=-2)
    return x

  return jax.tree_util.tree_map_with_path(leaf, params)


def default_scaler(width: int) -> float:
  """The embedder's and the blocks' scaler init and scale: ``sqrt(2 / width)``."""
  return math.sqrt(2.0 / width)


class Scaler(nn.Module):
  """``s * (init / scale) * x`` over the last axis, ``s [dim]`` starting at ``scale``."""

  dim: int
  init: float = 1.0
  scale: float = 1.0

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    s = self.param("scaler", nn.initializers.constant(self.scale), (self.dim,))
    return s * (self.init / self.scale) * x


class HyperDense(nn.Module):
  """A Dense layer of ``features`` without bias; its kernel is what ``project`` normalizes.

  Initialized with standard normal entries, which ``project`` (at init) turns into weight
  vectors uniformly distributed on the sphere: each one distributed as a column of the
  reference's orthogonal init, though not exactly orthogonal to the others (in 512
  dimensions their dot products are about 0.04). Why not the orthogonal init itself: it
  takes a QR decomposition, which JAX hands to the threaded OpenBLAS of the CPU; on 2
  cores shared with another process, building ``simbav2_mujoco``'s networks took 40 s
  against 3.4 s with one OpenBLAS thread (2026-12-07)."""

  features: int

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    return Dense(self.features, use_bias=False, kernel_init=nn.initializers.normal(1.0),
                 name=KERNEL)(x)


class HyperMLP(nn.Module):
  """``n(W2 (relu(Scaler(W1 x)) + 1e-8))``: ``[N, w] -> [N, out]``, ``hidden`` wide inside
  (the small constant keeps a dead layer's output off the zero vector)."""

  hidden: int
  out: int
  scaler: float

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    y = Scaler(self.hidden, self.scaler, self.scaler)(HyperDense(self.hidden)(x))
    return l2_normalized(HyperDense(self.out)(nn.relu(y) + EPSILON))


class HyperEmbedder(nn.Module):
  """``n(Scaler(W n([x, c_shift])))``: ``[N, D] -> [N, width]`` on the sphere."""

  width: int
  c_shift: float

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    shift = jnp.full(x.shape[:-1] + (1,), self.c_shift, x.dtype)
    x = l2_normalized(jnp.concatenate([x, shift], axis=-1))
    scale = default_scaler(self.width)
    return l2_normalized(Scaler(self.width, scale, scale)(HyperDense(self.width)(x)))


class HyperLERPBlock(nn.Module):
  """``n(z + alpha * (HyperMLP(z) - z))``, ``[N, w] -> [N, w]``; ``alpha`` a ``Scaler``
  starting at ``alpha_init``."""

  width: int
  alpha_init: float

  @nn.compact
  def __call__(self, z: jax.Array) -> jax.Array:
    inner = default_scaler(self.width) / math.sqrt(EXPANSION)
    moved = HyperMLP(EXPANSION * self.width, self.width, inner)(z)
    alpha = Scaler(self.width, self.alpha_init, 1.0 / math.sqrt(self.width))
    return l2_normalized(z + alpha(moved - z))


class HyperEncoder(nn.Module):
  """The embedder to ``widths[0]`` and a ``HyperLERPBlock`` per width: ``[N, D] -> [N, w]``
  on the sphere. Every width is the same (a block interpolates between points of one
  sphere)."""

  widths: tuple[int, ...]
  c_shift: float = 3.0

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    z = HyperEmbedder(self.widths[0], self.c_shift)(x)
    for width in self.widths:
      z = HyperLERPBlock(width, 1.0 / (len(self.widths) + 1))(z)
    return z


class HyperLinearHead(nn.Module):
  """``W2 Scaler(W1 z) + b``: ``[N, w] -> [N, out]``, no activation between (the
  reference's heads), the scaler starting at 1, ``b`` at zero."""

  out: int

  @nn.compact
  def __call__(self, z: jax.Array) -> jax.Array:
    width = z.shape[-1]
    hidden = Scaler(width)(HyperDense(width)(z))
    return HyperDense(self.out)(hidden) + self.param("bias", nn.initializers.zeros, (self.out,))


def squashed_log_std(raw: jax.Array) -> jax.Array:
  """``raw`` mapped into ``(LOG_STD_MIN, LOG_STD_MAX)`` by a tanh."""
  return LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (1.0 + jnp.tanh(raw))


class HyperGaussianActor(nn.Module):
  """obs ``[N, D]`` -> ``(mean, log_std)`` ``[N, A]`` each, of a Gaussian to squash by tanh:
  a ``HyperEncoder`` and two ``HyperLinearHead`` branches."""

  widths: tuple[int, ...]
  size: int
  c_shift: float = 3.0

  @nn.compact
  def __call__(self, obs: jax.Array):
    z = HyperEncoder(self.widths, self.c_shift)(obs)
    mean = HyperLinearHead(self.size, name="mean")(z)
    return mean, squashed_log_std(HyperLinearHead(self.size, name="log_std")(z))


class HyperCategoricalCritic(nn.Module):
  """``(obs [N, D], action [N, A]) -> logits [N, bins]`` of the return's distribution over a
  fixed support: a ``HyperEncoder`` of ``[obs, action]`` and a ``HyperLinearHead``."""

  widths: tuple[int, ...]
  bins: int
  c_shift: float = 3.0

  @nn.compact
  def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
    z = HyperEncoder(self.widths, self.c_shift)(jnp.concatenate([obs, action], axis=-1))
    return HyperLinearHead(self.bins, name="logits")(z)


class HyperCategoricalCritics(nn.Module):
  """``num`` independent ``HyperCategoricalCritic``: ``(obs, action) -> logits [C, N,
  bins]``."""

  num: int
  widths: tuple[int, ...]
  bins: int
  c_shift: float = 3.0

  @nn.compact
  def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
    return jnp.stack([HyperCategoricalCritic(self.widths, self.bins, self.c_shift,
                                             name=f"critic_{i}")(obs, action)
                      for i in range(self.num)])
