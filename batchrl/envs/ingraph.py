"""``InGraphBatchEnv``: a host batch of environments callable from inside ``jax.jit``.

The seeds' InGraphBatchEnv made a Python batch env a TensorFlow op. Here the host env is
reached through ``jax.experimental.io_callback`` (ordered, so steps happen in program
order), and it speaks the batched in-graph protocol of ``batchrl.envs.jax_env``; the same
``simulate`` loop therefore runs with gymnax envs and with Gymnasium envs in processes.

The host env must follow the Gymnasium vector API with same-step auto-reset (``BatchEnv``
does; so does ``gymnasium.vector.SyncVectorEnv(..., autoreset_mode=SAME_STEP)``): after an
episode ends, ``step`` returns the first observation of the next episode and
``infos["final_obs"]`` / ``infos["_final_obs"]`` hold the finished one's last observation.

Limits: array observation/action spaces only (Box, Discrete, MultiDiscrete, MultiBinary),
and no ``vmap`` over the env (one host env, one batch). float64/int64 values are carried as
float32/int32 unless JAX's x64 mode is on.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from batchrl.envs.jax_env import EnvStep

_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                 gym.spaces.MultiBinary)


def _graph_dtype(space: gym.Space) -> np.dtype:
  """The dtype a space's values have inside the graph (canonicalised for x32 JAX)."""
  dtype = np.dtype(space.dtype)
  return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


def _check_space(space: gym.Space, what: str) -> None:
  if not isinstance(space, _ARRAY_SPACES):
    raise TypeError(f"InGraphBatchEnv supports array {what} spaces (Box, Discrete, "
                    f"MultiDiscrete, MultiBinary), got {type(space).__name__}. Flatten the "
                    "space with a wrapper (e.g. gymnasium.wrappers.FlattenObservation).")


@dataclasses.dataclass(eq=False)
class InGraphBatchEnv:
  """Wraps a host batch env (``BatchEnv``) as a batched in-graph env.

  The in-graph ``state`` is a step counter; the real environment state lives in the host
  env. ``reset(key)`` seeds the host env from ``key`` (reproducible for the same key).
  """

  batch_env: Any

  def __post_init__(self):
    _check_space(self.single_observation_space, "observation")
    _check_space(self.single_action_space, "action")
    b, obs = self.num_envs, self.single_observation_space
    self._obs_struct = jax.ShapeDtypeStruct((b,) + tuple(obs.shape), _graph_dtype(obs))
    self._float = jax.ShapeDtypeStruct((b,), np.float32)
    self._bool = jax.ShapeDtypeStruct((b,), np.bool_)

  @property
  def num_envs(self) -> int:
    return int(self.batch_env.num_envs)

  @property
  def single_observation_space(self) -> gym.Space:
    return self.batch_env.single_observation_space

  @property
  def single_action_space(self) -> gym.Space:
    return self.batch_env.single_action_space

  # -- host side ------------------------------------------------------------------------

  def _host_reset(self, seed):
    obs, _ = self.batch_env.reset(seed=int(seed))
    return np.asarray(obs, self._obs_struct.dtype)

  def _host_step(self, action):
    action = np.asarray(action, self.single_action_space.dtype)
    obs, reward, terminated, truncated, infos = self.batch_env.step(action)
    obs = np.asarray(obs, self._obs_struct.dtype)
    final_obs = obs.copy()
    mask = np.asarray(infos.get("_final_obs", np.zeros(self.num_envs, bool)), bool)
    if mask.any():
      final_obs[mask] = np.stack([infos["final_obs"][i] for i in np.flatnonzero(mask)])
    return (obs, np.asarray(reward, np.float32), np.asarray(terminated, np.bool_),
            np.asarray(truncated, np.bool_), final_obs)

  # -- graph side -----------------------------------------------------------------------

  def reset(self, key):
    seed = jax.random.randint(key, (), 0, np.iinfo(np.int32).max)
    obs = io_callback(self._host_reset, self._obs_struct, seed, ordered=True)
    return obs, jnp.int32(0)

  def step(self, key, state, action) -> EnvStep:
    del key  # the host envs own their randomness (seeded at reset)
    structs = (self._obs_struct, self._float, self._bool, self._bool, self._obs_struct)
    obs, reward, terminated, truncated, final_obs = io_callback(
        self._host_step, structs, action, ordered=True)
    return EnvStep(obs, state + 1, reward, terminated, truncated, final_obs, {})
