"""Reducing a phase's stacked iteration infos to the numbers a report shows."""
from __future__ import annotations

import math

import jax
import numpy as np


def summarize(infos: dict) -> dict[str, float]:
  """Reduces stacked iteration infos ``[..., N]`` to one report: scores weighted by episodes."""
  infos = jax.device_get(infos)
  out = {}
  for name, value in infos.items():
    value = np.asarray(value, np.float64)
    if name in ("mean_score", "mean_length"):
      out[name] = _episode_weighted(value, infos["episodes"])
    elif name == "episodes":
      out[name] = float(np.sum(value))
    else:
      out[name] = nan_mean(latest_computed(value))  # the latest update's value
  return out


def latest_computed(values) -> np.ndarray:
  """``values [..., N]`` -> ``[...]``: the latest of the ``N`` iterations' values that is
  not NaN (a metric the latest updates did not compute, such as a held actor step's loss,
  shows the one before), NaN where none is."""
  values = np.asarray(values, np.float64)
  present = ~np.isnan(values)
  last = values.shape[-1] - 1 - np.argmax(present[..., ::-1], axis=-1)
  latest = np.take_along_axis(values, last[..., None], axis=-1)[..., 0]
  return np.where(present.any(axis=-1), latest, np.nan)


def nan_mean(values) -> float:
  """The mean of the non-NaN values; NaN, without numpy's empty-slice warning, when there
  are none (no episode finished in the window, or a metric no update has written yet)."""
  values = np.asarray(values, np.float64)
  values = values[~np.isnan(values)]
  return float(values.mean()) if values.size else math.nan


def per_seed_scores(infos: dict) -> list[float]:
  """Mean score per seed for a vmapped run (infos ``[S, N]``)."""
  infos = jax.device_get(infos)
  return [_episode_weighted(s, e) for s, e in zip(infos["mean_score"], infos["episodes"])]


def per_seed_episodes(infos: dict) -> list[float]:
  """Episodes ended per seed for a vmapped run (infos ``[S, N]``)."""
  return [float(np.sum(e)) for e in np.asarray(jax.device_get(infos["episodes"]), np.float64)]


def per_seed_metrics(scores, episodes=None) -> dict[str, float]:
  """``seed<i>/mean_score`` entries of a report, one per seed, and ``seed<i>/episodes``
  with ``episodes`` (what weighs a seed's training score: ``batchrl bench`` reads them)."""
  out = {f"seed{i}/mean_score": float(x) for i, x in enumerate(scores)}
  if episodes is not None:
    out.update({f"seed{i}/episodes": float(n) for i, n in enumerate(episodes)})
  return out


def _episode_weighted(means, episodes) -> float:
  """Mean of per-iteration means weighted by their episode counts (NaN when no episodes)."""
  means, episodes = np.asarray(means, np.float64), np.asarray(episodes, np.float64)
  w = np.where(np.isnan(means), 0.0, episodes)
  return float(np.sum(np.nan_to_num(means) * w) / w.sum()) if w.sum() else math.nan
