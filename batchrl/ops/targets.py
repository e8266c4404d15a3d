"""Target networks: moving a target's parameters toward the online ones (every replay agent,
and the actor-critic agents' soft updates)."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def soft_update(target, online, tau: float):
  """``tau * online + (1 - tau) * target`` per leaf (``tau = 1``: an exact copy)."""
  if tau == 1.0:
    return jax.tree.map(lambda t, o: o, target, online)
  return jax.tree.map(lambda t, o: tau * o + (1.0 - tau) * t, target, online)


def polyak_update(target, online, tau: float, move: jax.Array):
  """The Polyak step ``soft_update(target, online, tau)`` where ``move`` (a traced bool
  ``[]``), ``target`` unchanged elsewhere: the one target sync of every replay agent."""
  moved = soft_update(target, online, tau)
  return jax.tree.map(lambda new, old: jnp.where(move, new, old), moved, target)
