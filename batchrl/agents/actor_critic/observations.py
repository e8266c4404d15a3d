"""Running observation normalization of the actor-critic agents (``normalize_observations``:
SimBa's RSNorm; sbx's SimBa recipe gets it from VecNormalize): the mean and variance of the
float observations stored so far, kept in the agent's state (``()`` when off, so the state
and its programs are as without the option), moved by each ``store``, applied when acting
and to every sampled batch's ``obs`` and ``next_obs``. The replay memory keeps observations
as they came, so a batch is always normalized by the newest statistics (as SB3's replay
memory under VecNormalize).

The statistics are ``batchrl.ops.running_stats`` per element (PPO's and PQN's), the clip and
epsilon VecNormalize's defaults: ``clip((x - mean) / sqrt(var + 1e-8), -10, 10)``; the
variance reads 1 until two observations were stored. Int and bool states (and action masks)
are left as they are.
"""
from __future__ import annotations

from typing import Any

from batchrl.agents import spaces
from batchrl.agents.spaces import SpaceInfo

OBSERVATION_CLIP = 10.0  # VecNormalize's clip_obs
NORMALIZER_EPSILON = 1e-8  # VecNormalize's epsilon


def init_stats(config, info: SpaceInfo) -> Any:
  """Empty statistics of ``info``'s float observations, or ``()`` when not normalizing."""
  return spaces.obs_stats_init(info) if config.normalize_observations else ()


def update_stats(config, stats, obs) -> Any:
  """``stats`` with the observations ``obs [B, ...]`` (as ``spaces.float_obs`` gives them)
  added; as they are when not normalizing."""
  if not config.normalize_observations:
    return stats
  return spaces.obs_stats_update(stats, obs)


def normalized(config, stats, obs) -> Any:
  """``obs [..., ...]`` centred, scaled and clipped by ``stats``; as they are when not
  normalizing."""
  if not config.normalize_observations:
    return obs
  return spaces.normalize_obs_tree(stats, obs, OBSERVATION_CLIP, NORMALIZER_EPSILON)


def mean_std(stats):
  """The mean and std averaged over every normalized element (for TensorBoard)."""
  return spaces.obs_stats_mean_std(stats, NORMALIZER_EPSILON)
