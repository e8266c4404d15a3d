"""Agents without learning as ``Model``s: ``random_agent`` and ``fixed_agent`` (TensorForce's
random and constant agents). They exercise drivers and ``simulate`` and serve as baselines."""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.agents.core import Model, never_ready, no_store, no_update
from batchrl.specs import EnvSpec


def sample_space(key: jax.Array, space: gym.Space, batch: int):
  """``batch`` uniform samples of a gymnasium space, as JAX arrays with a leading [batch]."""
  if isinstance(space, gym.spaces.Discrete):
    return jax.random.randint(key, (batch,), space.start, space.start + space.n, jnp.int32)
  if isinstance(space, gym.spaces.MultiDiscrete):
    nvec = jnp.asarray(space.nvec)
    u = jax.random.uniform(key, (batch,) + tuple(space.shape))
    return jnp.floor(u * nvec).astype(jnp.int32)
  if isinstance(space, gym.spaces.MultiBinary):
    return jax.random.bernoulli(key, 0.5, (batch,) + tuple(space.shape)).astype(jnp.int8)
  if isinstance(space, gym.spaces.Box):
    return _sample_box(key, space, batch)
  if isinstance(space, gym.spaces.Dict):
    keys = jax.random.split(key, len(space.spaces))
    return {k: sample_space(kk, s, batch) for kk, (k, s) in zip(keys, space.spaces.items())}
  if isinstance(space, gym.spaces.Tuple):
    keys = jax.random.split(key, len(space.spaces))
    return tuple(sample_space(kk, s, batch) for kk, s in zip(keys, space.spaces))
  raise TypeError(f"Cannot sample {type(space).__name__}; supported: Discrete, MultiDiscrete, "
                  "MultiBinary, Box, Dict, Tuple.")


def _sample_box(key, space: gym.spaces.Box, batch: int):
  shape = (batch,) + tuple(space.shape)
  low = np.where(np.isfinite(space.low), space.low, -1.0)
  high = np.where(np.isfinite(space.high), space.high, 1.0)
  if np.issubdtype(space.dtype, np.integer):
    return jax.random.randint(key, shape, low, high + 1).astype(space.dtype)
  return jax.random.uniform(key, shape, jnp.float32, low, high).astype(space.dtype)


def random_agent(action_space: gym.Space) -> Model:
  """Uniformly random actions from ``action_space`` (unbounded Box dims use [-1, 1])."""

  def init(key, spec: EnvSpec):
    del key
    if spec.action_space != action_space:
      raise ValueError(f"random_agent was built for {action_space}, but the env's action "
                       f"space is {spec.action_space}.")
    return {}

  def act(state, obs, key, deterministic=False):
    del state, deterministic
    batch = jax.tree.leaves(obs)[0].shape[0]
    return sample_space(key, action_space, batch), {}

  return Model(init=init, act=act, store=no_store, update=no_update, ready=never_ready,
               name="random")


def fixed_agent(policy: Callable) -> Model:
  """A fixed policy ``policy(obs[B, ...]) -> action[B, ...]`` (pure JAX), no learning."""

  def init(key, spec: EnvSpec):
    del key, spec
    return {}

  def act(state, obs, key, deterministic=False):
    del state, key, deterministic
    return policy(obs), {}

  return Model(init=init, act=act, store=no_store, update=no_update, ready=never_ready,
               name="fixed")
