"""``Conv``: the convolution every network of batchrl uses (the JSON builder's conv1d/conv2d
and PQN's layers), with ``flax.linen.Conv``'s parameters, computed on the CPU as image
patches times the kernel.

Why: XLA:CPU's convolution gradients on small channel counts are slow. Measured in a
minibatch scan, MinAtar's 3x3 conv from 4 to 16 channels on 128 frames took 11.6 ms a step
as a convolution and 2.2 ms as patches. On other backends the convolution itself runs. Both
compute the same function up to float rounding (``tests/test_layered_network.py``).

Shapes: ``x[N, *spatial, C]`` (``spatial`` of rank 1 or 2), ``kernel[*window, C, F]``,
``bias[F]`` -> ``[N, *spatial_out, F]``.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

# (lhs, rhs, out) layouts by number of spatial axes: channels last, as flax's Conv
_NUMBERS = {1: ("NWC", "WIO", "NWC"), 2: ("NHWC", "HWIO", "NHWC")}


def convolve(x: jax.Array, kernel: jax.Array, stride: tuple[int, ...], padding: str, *,
             patches: bool | None = None) -> jax.Array:
  """``x`` convolved with ``kernel`` (no bias): as patches times the kernel when ``patches``
  (default: on the CPU), else XLA's convolution. ``padding``: ``'SAME'`` or ``'VALID'``."""
  numbers = _NUMBERS[kernel.ndim - 2]
  if patches is None:
    patches = jax.default_backend() == "cpu"
  if not patches:
    return jax.lax.conv_general_dilated(x, kernel, stride, padding, dimension_numbers=numbers)
  window, features = kernel.shape[:-2], kernel.shape[-1]
  cols = jax.lax.conv_general_dilated_patches(x, window, stride, padding,
                                              dimension_numbers=numbers)
  # a patch's features are ordered (channel, *window): the kernel's axes to match
  order = (kernel.ndim - 2,) + tuple(range(kernel.ndim - 2)) + (kernel.ndim - 1,)
  return cols @ jnp.transpose(kernel, order).reshape(-1, features)


class Conv(nn.Module):
  """A 1-D or 2-D convolution; its parameters are ``nn.Conv``'s (``kernel`` initialized
  lecun-normal, ``bias`` zeros, the same names, shapes and initial values), so checkpoints
  of either load into the other."""

  features: int
  kernel_size: tuple[int, ...]
  strides: tuple[int, ...]
  padding: str  # 'SAME' | 'VALID'
  use_bias: bool = True

  @nn.compact
  def __call__(self, x):
    kernel = self.param("kernel", nn.initializers.lecun_normal(),
                        tuple(self.kernel_size) + (x.shape[-1], self.features))
    y = convolve(x, kernel, tuple(self.strides), self.padding)
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros_init(), (self.features,))
    return y
