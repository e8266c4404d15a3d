"""Float actions as one normalized vector, for the agents that learn continuous actions in
normalized units (NAF, DDPG, TD3, SAC): ``ActionMap`` converts the env's float actions (one
Box or a Dict of them) to one ``[N, A]`` vector and back.

Shapes: ``N`` rows, ``A`` action size (all float action elements of all named actions,
flattened and concatenated in name order). Each element with finite bounds is mapped to
``[-1, 1]``; elements without bounds are left as they are.
"""
from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np


def float_action_leaves(space: gym.Space) -> list[tuple[str | None, gym.spaces.Box]] | None:
  """``[(name, Box)]`` in name order (name None for one unnamed action), or None when a part
  of ``space`` is not a float Box (each agent words that error for itself)."""
  if isinstance(space, gym.spaces.Dict):
    leaves = [(name, sub) for name, sub in sorted(space.spaces.items())]
  else:
    leaves = [(None, space)]
  for _, sub in leaves:
    if not (isinstance(sub, gym.spaces.Box) and np.issubdtype(sub.dtype, np.floating)):
      return None
  return leaves


@dataclasses.dataclass(frozen=True)
class ActionMap:
  """The env's float actions <-> one normalized vector ``[N, A]`` (static, hashable).

  Attributes:
    names: action names in order (``(None,)`` for one unnamed action).
    shapes: each action's shape.
    low, high: per flattened element, env units (may be infinite).
  """

  names: tuple[str | None, ...]
  shapes: tuple[tuple[int, ...], ...]
  low: tuple[float, ...]
  high: tuple[float, ...]

  @property
  def size(self) -> int:
    return len(self.low)

  @property
  def bounded(self) -> np.ndarray:
    """``bool[A]``: elements with finite bounds on both sides (learned in ``[-1, 1]``)."""
    return np.isfinite(np.asarray(self.low)) & np.isfinite(np.asarray(self.high))

  @property
  def normalized_low(self) -> np.ndarray:
    return np.where(self.bounded, -1.0, -np.inf).astype(np.float32)

  @property
  def normalized_high(self) -> np.ndarray:
    return np.where(self.bounded, 1.0, np.inf).astype(np.float32)

  def _affine(self) -> tuple[np.ndarray, np.ndarray]:
    """``env = center + half * x`` on bounded elements (``center 0, half 1`` elsewhere)."""
    bounded = self.bounded
    low = np.where(bounded, np.asarray(self.low), -1.0)
    high = np.where(bounded, np.asarray(self.high), 1.0)
    center = np.where(bounded, (low + high) / 2, 0.0).astype(np.float32)
    half = np.where(bounded, (high - low) / 2, 1.0).astype(np.float32)
    return center, half

  def clip(self, x: jax.Array) -> jax.Array:
    """Normalized actions ``[..., A]`` clipped to ``[-1, 1]`` where bounded."""
    return jnp.clip(x, self.normalized_low, self.normalized_high)

  def to_env(self, x: jax.Array):
    """Normalized ``[N, A]`` -> the env's action (clipped to its bounds): one array ``[N,
    *shape]`` or a dict of them."""
    center, half = self._affine()
    flat = center + half * self.clip(x)
    lead = flat.shape[:-1]
    out, offset = {}, 0
    for name, shape in zip(self.names, self.shapes):
      size = math.prod(shape)
      out[name] = flat[..., offset:offset + size].reshape(lead + shape)
      offset += size
    return out[None] if self.names == (None,) else out

  def from_env(self, action) -> jax.Array:
    """The env's action (``[N, *shape]`` or a dict) -> normalized ``[N, A]``, clipped."""
    named = {None: action} if self.names == (None,) else action
    parts = []
    for name, shape in zip(self.names, self.shapes):
      x = jnp.asarray(named[name], jnp.float32)
      parts.append(x.reshape(x.shape[:x.ndim - len(shape)] + (-1,)))
    center, half = self._affine()
    return self.clip((jnp.concatenate(parts, axis=-1) - center) / half)


def action_map(space: gym.Space) -> ActionMap:
  """The ``ActionMap`` of a float action space (one Box or a Dict of them); callers check
  the space first, so a discrete part here is a plain TypeError."""
  leaves = float_action_leaves(space)
  if leaves is None:
    raise TypeError(f"an ActionMap takes float actions only, got the action space {space}.")
  low = np.concatenate([np.asarray(b.low, np.float64).ravel() for _, b in leaves])
  high = np.concatenate([np.asarray(b.high, np.float64).ravel() for _, b in leaves])
  return ActionMap(tuple(n for n, _ in leaves), tuple(tuple(b.shape) for _, b in leaves),
                   tuple(float(x) for x in low), tuple(float(x) for x in high))
