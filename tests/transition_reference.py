"""Reference transitions for ``tests/test_transition_parity.py``: raw Gymnasium and EnvPool
stepped by hand with given actions, written without batchrl so that what batchrl stores can
be held against them.

Time-major arrays ``[T, B, ...]``: ``obs`` (the observation acted on), ``action``,
``reward``, ``terminated``, ``truncated`` and ``next_obs`` (what the action led to: at an
episode's end its final observation, never the next episode's first one).
"""
from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np


class Steps(NamedTuple):
  """Transitions ``[T, B, ...]`` (observations float64 as the env gave them)."""

  obs: np.ndarray
  action: np.ndarray
  reward: np.ndarray
  terminated: np.ndarray
  truncated: np.ndarray
  next_obs: np.ndarray

  @property
  def ends(self) -> np.ndarray:
    return self.terminated | self.truncated


def derived_seeds(seed: int, n: int) -> list[int]:
  """Per-env seeds of ``BatchEnv.reset(seed=seed)`` for ``n`` envs, as its documentation
  gives them: children of ``numpy.random.SeedSequence(seed)``, one 64-bit word each."""
  return [int(child.generate_state(1, np.uint64)[0])
          for child in np.random.SeedSequence(seed).spawn(n)]


def gymnasium_steps(env_id: str, seeds: list[int], actions: np.ndarray,
                    max_episode_steps: int | None = None, **make_kwargs) -> Steps:
  """``actions [T, B, ...]`` through ``B`` plain ``gymnasium.make(env_id)`` envs, env ``b``
  reset with ``seeds[b]`` first and unseeded after each episode (its generator goes on)."""
  envs = [gym.make(env_id, max_episode_steps=max_episode_steps, **make_kwargs) for _ in seeds]
  try:
    columns = [_one_env(env, seed, actions[:, b]) for b, (env, seed) in
               enumerate(zip(envs, seeds))]
  finally:
    for env in envs:
      env.close()
  return Steps(*(np.stack(parts, axis=1) for parts in zip(*columns)))


def _one_env(env: gym.Env, seed: int, actions: np.ndarray) -> tuple:
  obs, _ = env.reset(seed=seed)
  rows = []
  for action in actions:
    next_obs, reward, terminated, truncated, _ = env.step(action)
    rows.append((obs, action, reward, terminated, truncated, next_obs))
    obs = env.reset()[0] if terminated or truncated else next_obs
  obs, action, reward, terminated, truncated, next_obs = zip(*rows)
  return (np.array(obs), np.array(action), np.array(reward), np.array(terminated, bool),
          np.array(truncated, bool), np.array(next_obs))


def limit_duration_truncation(steps: Steps) -> np.ndarray:
  """``truncated`` as batchrl's ``LimitDuration`` reports a time limit: never together with
  ``terminated`` (Gymnasium's ``TimeLimit`` sets both when a fall lands on the last step)."""
  return steps.truncated & ~steps.terminated


def envpool_same_step(pool, actions: np.ndarray) -> tuple[np.ndarray, Steps]:
  """``actions [T, B, ...]`` through EnvPool's own host API (it resets an env on the step
  after its episode ended), turned into same-step auto-reset by hand: returns the first
  observations ``[B, ...]`` and the transitions. ``pool`` is fresh (not reset yet)."""
  obs, _ = pool.reset()
  rows = []
  for action in actions:
    next_obs, reward, terminated, truncated, _ = pool.step(np.asarray(action))
    first = next_obs.copy()
    for i in np.flatnonzero(terminated | truncated):  # the step EnvPool takes as its reset
      pool.send(np.zeros((1,) + action.shape[1:], action.dtype), np.array([i], np.int32))
      first[i] = pool.recv()[0][0]
    rows.append((obs, action, reward, np.asarray(terminated, bool),
                 np.asarray(truncated, bool), next_obs))
    obs = first
  first_obs = rows[0][0]
  return first_obs, Steps(*(np.array(parts) for parts in zip(*rows)))


def episode_lengths(ends: np.ndarray) -> list[list[int]]:
  """Lengths of the episodes that ended in ``ends [T, B]``, per env (the first from t=0)."""
  lengths = []
  for column in np.asarray(ends).T:
    stops = np.flatnonzero(column) + 1
    lengths.append(np.diff(np.concatenate([[0], stops])).tolist())
  return lengths


def running_mean_var(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Population mean and variance (ddof 0) over every leading sample axis, in float64: what
  a streaming normalizer that saw ``values`` should hold."""
  values = np.asarray(values, np.float64)
  flat = values.reshape((-1,) + values.shape[2:]) if values.ndim >= 2 else values
  return flat.mean(axis=0), flat.var(axis=0)
