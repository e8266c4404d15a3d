"""``Conv``: the convolution every network of batchrl uses (the JSON builder's conv1d/conv2d
and PQN's layers), with ``flax.linen.Conv``'s parameters, computed on the CPU as image
patches times the kernel.

Why: inside a loop (a ``lax.scan`` of minibatches or env steps: DQN's and PQN's updates,
every rollout) XLA:CPU's convolution and its gradients are slow. The patches are strided
slices of the input, one per window offset, stacked: their gradient is a sum of padded
copies, where ``lax.conv_general_dilated_patches`` (a convolution with a one-hot kernel of
``C * window`` output channels) made Atari's update several times slower than XLA's
convolution. Measured on the 2-core CPU, gradients of a minibatch in a scan: MinAtar's 3x3
conv from 4 to 16 channels on 128 frames, 9.0 ms a step as XLA's convolution, 4.7 ms as
``conv_general_dilated_patches``, 1.8 ms as slices; the Nature CNN on 64 Atari frames,
1814 / 248 / 101 ms. Outside a loop XLA's convolution is faster (the Nature CNN's gradient on
256 frames: 308 ms against 512 ms as slices), so a program that runs at the top level (PPO's
host update on the CPU) traces its networks inside ``top_level_program()``, which keeps
XLA's convolution. On other backends the convolution itself runs. Both compute the same
function up to float rounding (``tests/test_layered_network.py``).

Shapes: ``x[N, *spatial, C]`` (``spatial`` of rank 1 or 2), ``kernel[*window, C, F]``,
``bias[F]`` -> ``[N, *spatial_out, F]``.
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools

import flax.linen as nn
import jax
import jax.numpy as jnp

# (lhs, rhs, out) layouts by number of spatial axes: channels last, as flax's Conv
_NUMBERS = {1: ("NWC", "WIO", "NWC"), 2: ("NHWC", "HWIO", "NHWC")}


# set while a top-level program is traced (``top_level_program``); per thread, as tracing is
_TOP_LEVEL = contextvars.ContextVar("batchrl_conv_top_level", default=False)


@contextlib.contextmanager
def top_level_program():
  """Convolutions traced within run as XLA's convolution even on the CPU: for the body of a
  program that runs at the top level, with no loop around its convolutions (module doc)."""
  token = _TOP_LEVEL.set(True)
  try:
    yield
  finally:
    _TOP_LEVEL.reset(token)


def convolve(x: jax.Array, kernel: jax.Array, stride: tuple[int, ...], padding: str, *,
             patches: bool | None = None) -> jax.Array:
  """``x`` convolved with ``kernel`` (no bias): as patches times the kernel when ``patches``
  (default: on the CPU, outside ``top_level_program()``), else XLA's convolution.
  ``padding``: ``'SAME'`` or ``'VALID'``."""
  numbers = _NUMBERS[kernel.ndim - 2]
  if patches is None:
    patches = jax.default_backend() == "cpu" and not _TOP_LEVEL.get()
  if not patches:
    return jax.lax.conv_general_dilated(x, kernel, stride, padding, dimension_numbers=numbers)
  window, features = kernel.shape[:-2], kernel.shape[-1]
  return patches_of(x, window, stride, padding) @ kernel.reshape(-1, features)


def patches_of(x: jax.Array, window: tuple[int, ...], stride: tuple[int, ...],
               padding: str) -> jax.Array:
  """``x[N, *spatial, C]`` -> ``[N, *spatial_out, prod(window) * C]``: each output position's
  input window, features ordered (*window, channel) as a kernel ``[*window, C, F]`` is."""
  pads = jax.lax.padtype_to_pads(x.shape[1:-1], window, stride, padding)
  if any(low or high for low, high in pads):
    x = jnp.pad(x, [(0, 0), *pads, (0, 0)])
  spatial = x.shape[1:-1]
  out = tuple((n - k) // s + 1 for n, k, s in zip(spatial, window, stride))
  strides = (1, *stride, 1)
  cols = []
  for offset in itertools.product(*(range(k) for k in window)):
    limit = tuple(o + (m - 1) * s + 1 for o, m, s in zip(offset, out, stride))
    cols.append(jax.lax.slice(x, (0, *offset, 0), (x.shape[0], *limit, x.shape[-1]), strides))
  return jnp.stack(cols, axis=-2).reshape(x.shape[0], *out, -1)


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
