"""Reward scaling of the actor-critic agents (``normalize_rewards``; SimbaV2's, Lee et al.
2025): rewards divided by the spread of a running discounted return, so that returns stay
within about ``normalized_return_max`` whatever the task's reward scale (what a fixed
categorical support needs: SimbaV2's critic spans ``[-5, 5]``). Kept in the agent's state
(``()`` when off, so the state and its programs are as without the option), moved by each
``store``, applied to every sampled batch: the replay memory keeps rewards as they came.

Per env a discounted return ``G <- discount (1 - done) G + r`` (``done``: the step ended or
cut the episode; Gymnasium's ``NormalizeReward`` convention), its running variance over
every env and step (``batchrl.ops.running_stats``) and the largest ``|G|`` seen; a reward
is scaled as ``r / max(sqrt(var(G) + 1e-8), max|G| / normalized_return_max)``, not centred.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from batchrl.ops.running_stats import RunningStats

EPSILON = 1e-8  # added to the variance


class ReturnScale(NamedTuple):
  """The statistics rewards are scaled by."""

  returns: jax.Array  # [B] each env's running discounted return G
  stats: RunningStats  # of every G seen (scalar statistics)
  largest: jax.Array  # [] the largest |G| seen


def init_stats(config, num_envs: int) -> Any:
  """Empty statistics for ``num_envs`` envs, or ``()`` when not scaling rewards."""
  if not config.normalize_rewards:
    return ()
  return ReturnScale(jnp.zeros((num_envs,), jnp.float32), RunningStats.create(),
                     jnp.float32(0.0))


def update_stats(config, stats, reward: jax.Array, done: jax.Array) -> Any:
  """``stats`` after a store of ``reward [B]`` with ``done [B]`` (ended or cut); as they are
  when not scaling rewards."""
  if not config.normalize_rewards:
    return stats
  returns = config.discount * (1.0 - done.astype(jnp.float32)) * stats.returns + reward
  return ReturnScale(returns, stats.stats.update(returns),
                     jnp.maximum(stats.largest, jnp.max(jnp.abs(returns))))


def scale(config, stats) -> jax.Array:
  """The divisor of every reward ``[]``: ``max(sqrt(var(G) + 1e-8), max|G| /
  normalized_return_max)``; 1 when not scaling rewards."""
  if not config.normalize_rewards:
    return jnp.float32(1.0)
  spread = jnp.sqrt(stats.stats.variance + EPSILON)
  return jnp.maximum(spread, stats.largest / config.normalized_return_max)


def scaled(config, stats, reward: jax.Array) -> jax.Array:
  """``reward`` divided by ``scale``; as it is when not scaling rewards."""
  if not config.normalize_rewards:
    return reward
  return reward / scale(config, stats)
