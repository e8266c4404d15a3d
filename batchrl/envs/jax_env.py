"""Environments inside the compiled program.

The protocol for a single JAX-native environment (pure functions over a pytree state, no
auto-reset)::

    env.observation_space, env.action_space        # gymnasium spaces of ONE env
    obs, state = env.reset(key)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action)

``VecEnv(env, num_envs)`` vectorises such an env with ``vmap`` and resets finished episodes
inside the graph; it is the batched protocol that ``simulate`` consumes::

    env.num_envs, env.single_observation_space, env.single_action_space
    obs[B], state = env.reset(key)
    step: EnvStep = env.step(key, state, action[B])

Adapters: ``GymnaxEnv`` (``pip install "batchrl[gymnax]"``) and ``BraxEnv`` (``pip install
"batchrl[brax]"``), each library imported when first used, so the core installs without
them. ``InGraphBatchEnv`` (``batchrl.envs.ingraph``) offers host environments through the
same batched protocol.
"""
from __future__ import annotations

import dataclasses
import importlib
import sys
import types
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.errors import UserInputError, did_you_mean, missing_extra


class EnvStep(NamedTuple):
  """Result of one batched step; every field has a leading ``[B]`` axis.

  ``obs`` is the observation to act on next: for envs whose episode ended on this step it
  is already the first observation of the new episode, and ``final_obs`` holds the last
  observation of the finished one (equal to ``obs`` elsewhere).
  """

  obs: Any
  state: Any
  reward: jax.Array
  terminated: jax.Array
  truncated: jax.Array
  final_obs: Any
  info: dict


# --------------------------------------------------------------------------- gymnax


class _Deferred(types.ModuleType):
  """Stands in for a module until one of its attributes is used, then imports it."""

  def __getattr__(self, attr):
    if sys.modules.get(self.__name__) is self:
      del sys.modules[self.__name__]
    return getattr(importlib.import_module(self.__name__), attr)


def import_gymnax(what: str = "run.backend='gymnax' (JAX-native environments)"):
  """``gymnax``, imported without the plotting libraries that its Pong, Catch and Rooms
  modules import at the top for rendering (seaborn, matplotlib.pyplot: 1.5 s of gymnax's
  2 s import on 2 cores); they are imported when first used instead.

  gymnax is the ``batchrl[gymnax]`` extra (it pins jax and gymnasium below the newest), and
  this is the one place that imports it: without it, a ``UserInputError`` says what to
  install, ``what`` being what needed it."""
  if sys.modules.get("gymnax") is not None:
    return sys.modules["gymnax"]
  deferred = {name: _Deferred(name) for name in ("seaborn", "matplotlib.pyplot")
              if name not in sys.modules}
  sys.modules.update(deferred)
  try:
    import gymnax
  except ImportError as e:  # gymnax, or what it imports undeclared (six): the extra has both
    raise missing_extra(what, "gymnax", e) from e
  finally:
    for name, module in deferred.items():
      if sys.modules.get(name) is module:
        del sys.modules[name]
  return gymnax


# --------------------------------------------------------------------------- spaces


def gymnax_space_to_gym(space) -> gym.Space:
  """Converts a gymnax space (Discrete, Box, Dict, Tuple) to the gymnasium equivalent."""
  import_gymnax()
  from gymnax.environments import spaces as gx

  if isinstance(space, gx.Discrete):
    return gym.spaces.Discrete(int(space.n))
  if isinstance(space, gx.Box):
    dtype = np.dtype(space.dtype)
    shape = tuple(int(s) for s in space.shape)
    low = np.broadcast_to(np.asarray(space.low, dtype=np.float64), shape)
    high = np.broadcast_to(np.asarray(space.high, dtype=np.float64), shape)
    if np.issubdtype(dtype, np.floating):
      return gym.spaces.Box(low.astype(dtype), high.astype(dtype), shape, dtype)
    return gym.spaces.Box(low.astype(dtype), high.astype(dtype), shape, dtype)
  if isinstance(space, gx.Dict):
    return gym.spaces.Dict({k: gymnax_space_to_gym(v) for k, v in space.spaces.items()})
  if isinstance(space, gx.Tuple):
    return gym.spaces.Tuple([gymnax_space_to_gym(v) for v in space.spaces])
  raise TypeError(f"Unsupported gymnax space {type(space).__name__}; "
                  "supported: Discrete, Box, Dict, Tuple.")


# --------------------------------------------------------------------------- adapters


@dataclasses.dataclass(frozen=True, eq=False)
class GymnaxEnv:
  """A gymnax environment as a single JAX env (time limit reported as truncation).

  Args:
    env: a gymnax environment id (``"CartPole-v1"``) or environment instance.
    params: environment parameters; defaults to the env's ``default_params`` updated with
      ``param_overrides`` (e.g. ``max_steps_in_episode=200``).
  """

  env: Any
  params: Any

  @classmethod
  def make(cls, env_id_or_env, params=None, **param_overrides) -> "GymnaxEnv":
    gymnax = import_gymnax(f"the gymnax environment {env_id_or_env!r} (run.backend='gymnax')"
                           if isinstance(env_id_or_env, str) else "GymnaxEnv")
    if isinstance(env_id_or_env, str):
      if env_id_or_env not in gymnax.registered_envs:
        hint = did_you_mean(env_id_or_env, gymnax.registered_envs, n=3)
        raise UserInputError(f"Unknown gymnax environment id {env_id_or_env!r}{hint}. "
                             f"Valid ids: {', '.join(sorted(gymnax.registered_envs))}.")
      env, default = gymnax.make(env_id_or_env)
    else:
      env, default = env_id_or_env, env_id_or_env.default_params
    params = default if params is None else params
    if param_overrides:
      params = params.replace(**param_overrides)
    return cls(env, params)

  @property
  def observation_space(self) -> gym.Space:
    # gymnax builds bounds with jnp: evaluate them eagerly even inside a trace (jit/vmap)
    with jax.ensure_compile_time_eval():
      return gymnax_space_to_gym(self.env.observation_space(self.params))

  @property
  def action_space(self) -> gym.Space:
    with jax.ensure_compile_time_eval():
      return gymnax_space_to_gym(self.env.action_space(self.params))

  @property
  def max_episode_steps(self) -> int | None:
    return getattr(self.params, "max_steps_in_episode", None)

  def reset(self, key):
    obs, state = self.env.reset_env(key, self.params)
    return obs, _strong(state)

  def step(self, key, state, action):
    obs, state, reward, terminated, info = self.env.step_env(key, state, action, self.params)
    state = _strong(state)
    truncated = self.env.is_truncated(state, self.params)
    terminated = jnp.asarray(terminated, jnp.bool_)
    truncated = jnp.logical_and(jnp.asarray(truncated, jnp.bool_), jnp.logical_not(terminated))
    return obs, state, jnp.asarray(reward, jnp.float32), terminated, truncated, info


def _strong(tree):
  """``tree`` without weak types. gymnax resets some fields from Python numbers (Pendulum's
  ``last_u = 0.0``: a weak float) that its step makes strong; a state whose types change
  after one step makes every compiled program that takes it trace (and, unless the
  persistent cache answers, compile) twice: a fused Pendulum training chunk, 1-4 s of CPU."""
  return jax.tree.map(lambda x: jnp.asarray(x, jnp.result_type(x)), tree)


class _BraxState(NamedTuple):
  pipeline: Any
  time: jax.Array


@dataclasses.dataclass(frozen=True, eq=False)
class BraxEnv:
  """A brax environment as a single JAX env, with the time limit handled here.

  brax's ``State.done`` marks a true end; reaching ``episode_length`` steps is reported as
  truncation so agents bootstrap there. Needs ``pip install batchrl[brax]``.
  """

  env: Any
  episode_length: int = 1000

  @classmethod
  def make(cls, env_name_or_env, episode_length: int = 1000, **kwargs) -> "BraxEnv":
    if isinstance(env_name_or_env, str):
      try:
        from brax import envs as brax_envs
      except ImportError as e:
        raise missing_extra("BraxEnv", "brax", e) from e
      env = brax_envs.get_environment(env_name_or_env, **kwargs)
    else:
      env = env_name_or_env
    if episode_length < 1:
      raise ValueError(f"episode_length must be >= 1, got {episode_length}.")
    return cls(env, episode_length)

  @property
  def observation_space(self) -> gym.Space:
    size = int(self.env.observation_size)
    return gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)

  @property
  def action_space(self) -> gym.Space:
    size = int(self.env.action_size)
    return gym.spaces.Box(-1.0, 1.0, (size,), np.float32)

  @property
  def max_episode_steps(self) -> int:
    return self.episode_length

  def reset(self, key):
    pipeline = self.env.reset(key)
    return pipeline.obs, _BraxState(pipeline, jnp.int32(0))

  def step(self, key, state, action):
    del key  # brax dynamics are deterministic given the state
    pipeline = self.env.step(state.pipeline, action)
    time = state.time + 1
    terminated = jnp.asarray(pipeline.done, jnp.float32) > 0.5
    truncated = jnp.logical_and(time >= self.episode_length, jnp.logical_not(terminated))
    reward = jnp.asarray(pipeline.reward, jnp.float32)
    return pipeline.obs, _BraxState(pipeline, time), reward, terminated, truncated, {}


# --------------------------------------------------------------------------- batching


def _where(mask, new, old):
  """Per-env select over pytrees whose leaves have a leading [B] axis."""

  def pick(a, b):
    m = jnp.reshape(mask, mask.shape + (1,) * (a.ndim - mask.ndim))
    return jnp.where(m, a, b)

  return jax.tree.map(pick, new, old)


@dataclasses.dataclass(frozen=True, eq=False)
class VecEnv:
  """``num_envs`` copies of a single JAX env, stepped with ``vmap``, auto-reset in the graph."""

  env: Any
  num_envs: int

  def __post_init__(self):
    if not isinstance(self.num_envs, int) or self.num_envs < 1:
      raise ValueError(f"num_envs must be a positive int, got {self.num_envs!r}.")

  @property
  def single_observation_space(self) -> gym.Space:
    return self.env.observation_space

  @property
  def single_action_space(self) -> gym.Space:
    return self.env.action_space

  @property
  def max_episode_steps(self):
    return getattr(self.env, "max_episode_steps", None)

  def reset(self, key):
    keys = jax.random.split(key, self.num_envs)
    return jax.vmap(self.env.reset)(keys)

  def step(self, key, state, action) -> EnvStep:
    step_key, reset_key = jax.random.split(key)
    step_keys = jax.random.split(step_key, self.num_envs)
    obs, new_state, reward, terminated, truncated, info = jax.vmap(self.env.step)(
        step_keys, state, action)
    done = jnp.logical_or(terminated, truncated)
    reset_obs, reset_state = self.reset(reset_key)
    next_obs = _where(done, reset_obs, obs)
    next_state = _where(done, reset_state, new_state)
    return EnvStep(next_obs, next_state, reward, terminated, truncated, obs, info)


def make_vec(env_id: str, num_envs: int, backend: str = "gymnax", **kwargs) -> VecEnv:
  """A batched in-graph environment from an id: ``make_vec("CartPole-v1", 1024)``.

  ``backend`` is ``"gymnax"`` (kwargs override env params, e.g. ``max_steps_in_episode``)
  or ``"brax"`` (kwargs go to ``BraxEnv.make``, e.g. ``episode_length``).
  """
  if backend == "gymnax":
    return VecEnv(GymnaxEnv.make(env_id, **kwargs), num_envs)
  if backend == "brax":
    return VecEnv(BraxEnv.make(env_id, **kwargs), num_envs)
  raise ValueError(f"Unknown backend {backend!r}; valid: 'gymnax', 'brax'.")
