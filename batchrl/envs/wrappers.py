"""Gymnasium wrappers with Batch PPO's semantics, on the 1.x API.

Every wrapper uses the 5-tuple ``step`` (terminated and truncated stay apart) and forwards
unknown attribute access to the wrapped env, which gymnasium 1.x wrappers no longer do.

=====================  ======================================================================
wrapper                behaviour
=====================  ======================================================================
AutoReset              after a done step the next ``step()`` resets: ``(obs, 0., False, False, {})``
ActionRepeat(n)        repeats an action up to n times, sums rewards, stops early when done
RandomStart(k)         after reset takes 0..k seeded random actions (resets again if it ends)
FrameHistory(idx)      frames at offsets ``idx`` into the past, stacked (or concatenated)
FrameDelta             ``obs - previous obs``; the first observation raw
RangeNormalize         finite Box observations -> [-1, 1]; actions in [-1, 1] -> real range
ClipAction             clips actions to the real bounds; advertises an unbounded Box (or them)
LimitDuration(n)       truncated after n steps; refuses ``step()`` before ``reset()``
ConvertTo32Bit         float64 -> float32, int64 -> int32 observations, float32 rewards
CacheSpaces            reads the spaces once (cheap access through process wrappers)
Guard(mode)            checks actions, and NaN/inf in observations and rewards
=====================  ======================================================================

``batch_ppo_stack(env, max_length)`` builds the wrapper stack BatchPPO trains on.
"""
from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from batchrl.envs.checker import nonfinite_problems, space_problems
from batchrl.envs.core import make_gym
from batchrl.errors import did_you_mean


class Wrapper(gym.Wrapper):
  """``gymnasium.Wrapper`` that forwards unknown attributes to the wrapped env."""

  def __getattr__(self, name: str) -> Any:
    # Only reached when normal lookup failed. Dunders are not forwarded so copy/pickle
    # probes behave; 'env' missing means __init__ has not run yet.
    env = self.__dict__.get("env")
    if env is None or (name.startswith("__") and name.endswith("__")):
      raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
    return getattr(env, name)


def _require_box(space: gym.Space, wrapper: str, which: str, float_only: bool = False) -> None:
  kind = "float Box" if float_only else "Box"
  if not isinstance(space, spaces.Box) or (float_only and space.dtype.kind != "f"):
    raise TypeError(f"{wrapper} needs a {kind} {which} space, got {space}")


class AutoReset(Wrapper):
  """After a done step (terminated or truncated), the next ``step()`` ignores its action,
  resets, and returns ``(first_obs, 0.0, False, False, {})``. ``step()`` before any
  ``reset()`` resets too."""

  def __init__(self, env: gym.Env):
    super().__init__(env)
    self._done = True

  def reset(self, *, seed=None, options=None):
    self._done = False
    return self.env.reset(seed=seed, options=options)

  def step(self, action):
    if self._done:
      observation, _ = self.env.reset()
      self._done = False
      return observation, 0.0, False, False, {}
    observation, reward, terminated, truncated, info = self.env.step(action)
    self._done = bool(terminated or truncated)
    return observation, reward, terminated, truncated, info


class ActionRepeat(Wrapper):
  """Repeats each action up to ``amount`` times; rewards are summed; stops at the first done.
  Returns the last observation, flags and info."""

  def __init__(self, env: gym.Env, amount: int):
    super().__init__(env)
    if not isinstance(amount, (int, np.integer)) or amount < 1:
      raise ValueError(f"ActionRepeat amount must be an int >= 1, got {amount!r}")
    self._amount = int(amount)

  def step(self, action):
    total = 0.0
    for _ in range(self._amount):
      observation, reward, terminated, truncated, info = self.env.step(action)
      total += reward
      if terminated or truncated:
        break
    return observation, total, terminated, truncated, info


class RandomStart(Wrapper):
  """After each reset takes a random number (0 .. ``max_steps``, inclusive) of random actions.

  Both the count and the actions come from generators seeded by ``reset(seed=...)``, so a
  seeded reset gives the same start. If the random steps end the episode, the env is reset
  again and a smaller count is drawn (below the length that ended), so this always finishes.
  """

  def __init__(self, env: gym.Env, max_steps: int):
    super().__init__(env)
    if not isinstance(max_steps, (int, np.integer)) or max_steps < 0:
      raise ValueError(f"RandomStart max_steps must be an int >= 0, got {max_steps!r}")
    self._max_steps = int(max_steps)
    # A private copy: seeding it must not disturb sampling from the env's own action space.
    self._sampler = copy.deepcopy(env.action_space)
    self._rng = np.random.default_rng()

  def reset(self, *, seed=None, options=None):
    if seed is not None:
      count_seed, action_seed = np.random.SeedSequence(seed).spawn(2)
      self._rng = np.random.default_rng(count_seed)
      self._sampler.seed(int(action_seed.generate_state(1)[0]))
    observation, info = self.env.reset(seed=seed, options=options)
    limit = self._max_steps
    while True:
      count = int(self._rng.integers(0, limit + 1))
      observation, ended_after = self._random_steps(observation, count)
      if ended_after is None:
        return observation, info
      limit = min(limit, ended_after - 1)
      observation, info = self.env.reset(options=options)

  def _random_steps(self, observation, count: int):
    """Takes ``count`` random actions; returns ``(obs, None)`` or ``(obs, steps)`` if done."""
    for step in range(1, count + 1):
      observation, _, terminated, truncated, _ = self.env.step(self._sampler.sample())
      if terminated or truncated:
        return observation, step
    return observation, None


class FrameHistory(Wrapper):
  """Observations ``[len(past_indices), *obs_shape]``: frame ``t - i`` for each ``i``.

  A ring buffer holds ``max(past_indices) + 1`` frames, filled with the first observation at
  reset. ``flatten=True`` merges the first two axes: ``[len * obs_shape[0], *obs_shape[1:]]``.
  """

  def __init__(self, env: gym.Env, past_indices: Sequence[int], flatten: bool = False):
    super().__init__(env)
    _require_box(env.observation_space, "FrameHistory", "observation")
    indices = tuple(past_indices)
    if not indices or any(not isinstance(i, (int, np.integer)) or i < 0 for i in indices):
      raise ValueError(f"FrameHistory past_indices must be ints >= 0, got {past_indices!r}")
    if 0 not in indices:
      raise ValueError(f"FrameHistory past_indices must include 0 (the current frame), "
                       f"got {past_indices!r}")
    self._indices = np.asarray(indices)
    self._flatten = bool(flatten)
    self._capacity = int(max(indices)) + 1
    self._buffer = None
    self._head = 0
    space = env.observation_space
    self.observation_space = spaces.Box(self._stack(np.stack([space.low] * len(indices))),
                                        self._stack(np.stack([space.high] * len(indices))),
                                        dtype=space.dtype)

  def _stack(self, frames: np.ndarray) -> np.ndarray:
    return frames.reshape((-1,) + frames.shape[2:]) if self._flatten else frames

  def reset(self, *, seed=None, options=None):
    observation, info = self.env.reset(seed=seed, options=options)
    self._buffer = np.repeat(np.asarray(observation)[None], self._capacity, axis=0)
    self._head = 0
    return self._select(), info

  def step(self, action):
    if self._buffer is None:
      raise RuntimeError("FrameHistory: step() before reset(); call reset() first")
    observation, reward, terminated, truncated, info = self.env.step(action)
    self._head = (self._head + 1) % self._capacity
    self._buffer[self._head] = observation
    return self._select(), reward, terminated, truncated, info

  def _select(self) -> np.ndarray:
    return self._stack(self._buffer[(self._head - self._indices) % self._capacity])


class FrameDelta(Wrapper):
  """Observations become ``obs - previous_obs``; the first one after reset stays raw."""

  def __init__(self, env: gym.Env):
    super().__init__(env)
    _require_box(env.observation_space, "FrameDelta", "observation", float_only=True)
    low, high = env.observation_space.low, env.observation_space.high
    with np.errstate(invalid="ignore", over="ignore"):
      # Raw first frames lie in [low, high], differences in [low - high, high - low].
      self.observation_space = spaces.Box(np.minimum(low, low - high),
                                          np.maximum(high, high - low),
                                          dtype=env.observation_space.dtype)
    self._last = None

  def reset(self, *, seed=None, options=None):
    observation, info = self.env.reset(seed=seed, options=options)
    self._last = observation
    return observation, info

  def step(self, action):
    if self._last is None:
      raise RuntimeError("FrameDelta: step() before reset(); call reset() first")
    observation, reward, terminated, truncated, info = self.env.step(action)
    delta = observation - self._last
    self._last = observation
    return delta, reward, terminated, truncated, info


def _bounded(space: spaces.Box) -> np.ndarray:
  """Elements with finite, distinct bounds. Bounds at the dtype's limit count as infinite:
  older envs wrote ``np.finfo(np.float32).max`` to mean unbounded."""
  limit = np.finfo(space.dtype).max if space.dtype.kind == "f" else np.iinfo(space.dtype).max
  low, high = space.low.astype(np.float64), space.high.astype(np.float64)
  return (np.abs(low) < limit) & (np.abs(high) < limit) & (high > low)


def normalize_mask(space: gym.Space, setting: bool | None, which: str) -> np.ndarray | None:
  """Elements RangeNormalize rescales (None: none). ``setting``: None only where bounded,
  True everywhere (raise if unbounded), False nowhere."""
  if setting is False:
    return None
  if not isinstance(space, spaces.Box) or space.dtype.kind != "f":
    if setting is True:
      raise TypeError(f"RangeNormalize({which}=True) needs a float Box {which} space, got "
                      f"{space}; pass {which}=None to skip other spaces")
    return None
  mask = _bounded(space)
  if setting is True and not mask.all():
    raise ValueError(f"RangeNormalize({which}=True): the {which} space {space} is unbounded "
                     f"at {np.argwhere(~mask).tolist()}; pass {which}=None to normalize only "
                     f"the bounded elements")
  return mask if mask.any() else None


class RangeNormalize(Wrapper):
  """Maps bounded Box observations to [-1, 1], and agent actions in [-1, 1] to the real range.

  ``observ`` / ``action``: ``None`` rescales only the elements with finite bounds, ``True``
  requires every element bounded (raises otherwise), ``False`` leaves that side alone.
  """

  def __init__(self, env: gym.Env, observ: bool | None = None, action: bool | None = None):
    super().__init__(env)
    self._observ_mask = normalize_mask(env.observation_space, observ, "observ")
    self._action_mask = normalize_mask(env.action_space, action, "action")
    if self._observ_mask is not None:
      self.observation_space = unit_box(env.observation_space, self._observ_mask)
    if self._action_mask is not None:
      self.action_space = unit_box(env.action_space, self._action_mask)
    # the affine maps, computed once (a step pays the arithmetic only); an action range
    # that is [-1, 1] already (MuJoCo's) maps to itself and is only cast (the float64 map
    # changed only actions under 2e-9 in magnitude, by rounding them to multiples of 2^-52)
    self._observ_map = affine_map(env.observation_space, self._observ_mask)
    self._action_map = affine_map(env.action_space, self._action_mask)
    self._action_identity = self._action_mask is not None and unit_range(
        env.action_space, self._action_mask)

  def reset(self, *, seed=None, options=None):
    observation, info = self.env.reset(seed=seed, options=options)
    return self._observation(observation), info

  def step(self, action):
    if self._action_identity:
      action = np.asarray(action).astype(self.env.action_space.dtype)
    elif self._action_mask is not None:
      low, width = self._action_map
      real = low + (np.asarray(action, np.float64) + 1.0) * width / 2.0
      action = np.where(self._action_mask, real, action).astype(self.env.action_space.dtype)
    observation, reward, terminated, truncated, info = self.env.step(action)
    return self._observation(observation), reward, terminated, truncated, info

  def _observation(self, observation):
    if self._observ_mask is None:
      return observation
    low, width = self._observ_map
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
      scaled = 2.0 * (np.asarray(observation, np.float64) - low) / width - 1.0
    return np.where(self._observ_mask, scaled, observation).astype(
        self.env.observation_space.dtype)


def affine_map(space: gym.Space, mask: np.ndarray | None):
  """``(low, high - low)`` in float64 of a rescaled Box (None when nothing is rescaled)."""
  if mask is None:
    return None
  low, high = space.low.astype(np.float64), space.high.astype(np.float64)
  with np.errstate(invalid="ignore", over="ignore"):  # unbounded elements are masked out
    return low, high - low


def unit_range(space: spaces.Box, mask: np.ndarray) -> bool:
  """Whether every element ``mask`` rescales has the range [-1, 1] already (MuJoCo's
  actions): the map is the identity, and applying it in float would only round."""
  return bool(np.all(~mask | ((space.low == -1) & (space.high == 1))))


def unit_box(space: spaces.Box, mask: np.ndarray) -> spaces.Box:
  return spaces.Box(np.where(mask, -1.0, space.low).astype(space.dtype),
                    np.where(mask, 1.0, space.high).astype(space.dtype), dtype=space.dtype)


class ClipAction(Wrapper):
  """Clips actions to the real bounds, so an agent's Gaussian samples never leave the env's
  range.

  By default it advertises an unbounded Box (BatchPPO's and Gymnasium's ClipAction: any value
  may be sent). ``advertise_bounds=True`` advertises the wrapped env's own Box instead, so
  agents that need bounds (tanh actors, Beta policies, NAF's squashed mean) find them; values
  outside them are still taken and clipped.
  """

  def __init__(self, env: gym.Env, advertise_bounds: bool = False):
    super().__init__(env)
    _require_box(env.action_space, "ClipAction", "action")
    space = env.action_space
    if not advertise_bounds:
      self.action_space = spaces.Box(-np.inf, np.inf, space.shape, dtype=space.dtype)

  def step(self, action):
    space = self.env.action_space
    return self.env.step(np.clip(action, space.low, space.high).astype(space.dtype))


class LimitDuration(Wrapper):
  """Sets ``truncated`` after ``duration`` steps (``terminated`` is left as the env said).

  ``step()`` before ``reset()``, or after an episode ended, raises: both would silently
  run an episode without the limit.
  """

  def __init__(self, env: gym.Env, duration: int):
    super().__init__(env)
    if not isinstance(duration, (int, np.integer)) or duration < 1:
      raise ValueError(f"LimitDuration duration must be an int >= 1, got {duration!r}")
    self._duration = int(duration)
    self._step = None

  def reset(self, *, seed=None, options=None):
    self._step = 0
    return self.env.reset(seed=seed, options=options)

  def step(self, action):
    if self._step is None:
      raise RuntimeError("LimitDuration: step() before reset() (or after the episode "
                         "ended); call reset() first")
    observation, reward, terminated, truncated, info = self.env.step(action)
    self._step += 1
    truncated = bool(truncated) or (self._step >= self._duration and not terminated)
    if terminated or truncated:
      self._step = None
    return observation, reward, terminated, truncated, info


_NARROW = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32)}


def _narrow_space(space: gym.Space) -> gym.Space:
  """The space with float64 -> float32 and int64 -> int32 (recursing into Dict / Tuple)."""
  if isinstance(space, spaces.Box) and space.dtype in _NARROW:
    dtype = _NARROW[space.dtype]
    low, high = space.low, space.high
    if dtype.kind == "i":  # ints would wrap around; floats become +-inf, still unbounded
      info = np.iinfo(dtype)
      low, high = np.clip(low, info.min, info.max), np.clip(high, info.min, info.max)
    with np.errstate(over="ignore"):
      return spaces.Box(low.astype(dtype), high.astype(dtype), dtype=dtype)
  if isinstance(space, spaces.MultiDiscrete) and space.dtype in _NARROW:
    return spaces.MultiDiscrete(space.nvec, dtype=np.int32, start=space.start)
  if isinstance(space, spaces.Dict):
    return spaces.Dict({key: _narrow_space(sub) for key, sub in space.spaces.items()})
  if isinstance(space, spaces.Tuple):
    return spaces.Tuple([_narrow_space(sub) for sub in space.spaces])
  return space


def _narrow_value(value: Any, space: gym.Space) -> Any:
  if isinstance(space, spaces.Dict):
    return {key: _narrow_value(value[key], sub) for key, sub in space.spaces.items()}
  if isinstance(space, spaces.Tuple):
    return tuple(_narrow_value(item, sub) for item, sub in zip(value, space.spaces))
  if isinstance(space, (spaces.Box, spaces.MultiDiscrete)):
    return np.asarray(value).astype(space.dtype)
  return value


_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_MAX_SQUARED = _FLOAT32_MAX ** 2  # a float64 (about 1.2e77)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _fits_float32(array: np.ndarray) -> bool:
  """True when every element of a float32/float64 array is finite and within float32's
  range, by one float64 dot product: a sum of squares is NaN or inf when any element is
  (infinities never cancel in it) and exceeds ``max**2`` when any element exceeds ``max``
  (float32 values cannot overflow it; float64 ones beyond 1e154, far out of float32's
  range anyway, overflow with numpy's warning and fail the test). False sends callers to
  the exact check."""
  flat = np.asarray(array, np.float64).reshape(-1)
  return float(flat.dot(flat)) <= _FLOAT32_MAX_SQUARED  # NaN compares False


class ConvertTo32Bit(Wrapper):
  """float64 -> float32 and int64 -> int32 observations, float32 rewards; raises
  ``ValueError`` on NaN/inf observations or rewards (after the cast, which can overflow).

  Float Box observations and number rewards take a short path (one cast, one finiteness
  test by ``_fits_float32``, no ``np.errstate``): the general one cost CartPole about
  3x its own step time. Anything else, and any value the short test doubts, takes the
  general path, so results and errors are the same.
  """

  def __init__(self, env: gym.Env):
    super().__init__(env)
    self.observation_space = _narrow_space(env.observation_space)
    space = self.observation_space
    # _narrow_space makes every float Box float32
    self._float_box = isinstance(space, spaces.Box) and space.dtype == np.float32

  def reset(self, *, seed=None, options=None):
    observation, info = self.env.reset(seed=seed, options=options)
    return self._observation(observation, "reset() observation"), info

  def step(self, action):
    observation, reward, terminated, truncated, info = self.env.step(action)
    observation = self._observation(observation, "step() observation")
    if isinstance(reward, (float, int, np.floating, np.integer)) and (
        -_FLOAT32_MAX <= reward <= _FLOAT32_MAX):  # finite, and no overflow in the cast
      return observation, np.float32(reward), terminated, truncated, info
    with np.errstate(over="ignore"):
      reward = np.float32(reward)
    _raise_on(nonfinite_problems(reward, "step() reward"), "ConvertTo32Bit")
    return observation, reward, terminated, truncated, info

  def _observation(self, observation, where: str):
    if self._float_box:
      array = np.asarray(observation)
      if array.dtype in _FLOATS and _fits_float32(array):
        return array.astype(np.float32)  # a copy, as the general path makes
    with np.errstate(over="ignore"):
      observation = _narrow_value(observation, self.observation_space)
    _raise_on(nonfinite_problems(observation, where), "ConvertTo32Bit")
    return observation


def _raise_on(problems: list[str], wrapper: str) -> None:
  if problems:
    raise ValueError(f"{wrapper}: " + "; ".join(problems))


class CacheSpaces(Wrapper):
  """Reads the observation and action spaces once, so later access costs nothing even when
  the wrapped env lives in another process."""

  def __init__(self, env: gym.Env):
    super().__init__(env)
    self.observation_space = env.observation_space
    self.action_space = env.action_space


class GuardError(ValueError):
  """A bad action, or a NaN/inf observation or reward, caught by ``Guard``."""


class GuardWarning(UserWarning):
  """What ``Guard(mode='warn')`` emits instead of raising ``GuardError``."""


_GUARD_MODES = ("raise", "warn")


class Guard(Wrapper):
  """Checks every action against the action space (shape, dtype kind, bounds, NaN) before it
  reaches the env, and observations and rewards for NaN/inf after.

  ``mode='raise'`` raises ``GuardError`` (a bad action never reaches the env);
  ``mode='warn'`` emits ``GuardWarning`` and passes values through unchanged.
  """

  def __init__(self, env: gym.Env, mode: str = "raise"):
    super().__init__(env)
    if mode not in _GUARD_MODES:
      raise ValueError(f"Guard mode {mode!r} is not valid{did_you_mean(mode, _GUARD_MODES)}; "
                       "valid modes: "
                       f"{list(_GUARD_MODES)}")
    self._mode = mode

  def reset(self, *, seed=None, options=None):
    observation, info = self.env.reset(seed=seed, options=options)
    self._report(nonfinite_problems(observation, "reset() observation"))
    return observation, info

  def step(self, action):
    self._report(space_problems(action, self.env.action_space, "action", exact_dtype=False))
    observation, reward, terminated, truncated, info = self.env.step(action)
    self._report(nonfinite_problems(observation, "step() observation")
                 + nonfinite_problems(reward, "step() reward"))
    return observation, reward, terminated, truncated, info

  def _report(self, problems: list[str]) -> None:
    if not problems:
      return
    message = "Guard: " + "; ".join(problems)
    if self._mode == "raise":
      raise GuardError(message)
    warnings.warn(message, GuardWarning, stacklevel=3)


def batch_ppo_stack(env: gym.Env | str, max_length: int | None,
                    normalize_ranges: bool = True) -> gym.Env:
  """The env stack BatchPPO trains on.

  ``LimitDuration(max_length)`` (skipped when None) -> for Box actions ``RangeNormalize``
  then ``ClipAction`` (other actions: observations only are normalized) ->
  ``ConvertTo32Bit`` -> ``CacheSpaces``. ``env`` is an env or a registered id; an env's own
  ``TimeLimit`` stays in place, whichever limit is shorter ends the episode.

  Unlike the original's, the stack advertises its real action bounds (``[-1, 1]`` where
  ``RangeNormalize`` mapped them, the env's own elsewhere): DDPG, TD3 and SAC need bounds,
  and the policy-gradient agents clip their samples to them (``clip_actions``) exactly as
  ``ClipAction`` would, so what reaches the env is the same.
  """
  if isinstance(env, str):
    env = make_gym(env)
  if max_length is not None:
    env = LimitDuration(env, max_length)
  if isinstance(env.action_space, spaces.Box):
    if normalize_ranges:
      env = RangeNormalize(env)
    env = ClipAction(env, advertise_bounds=True)
  elif normalize_ranges:
    env = RangeNormalize(env, action=False)
  env = ConvertTo32Bit(env)
  return CacheSpaces(env)
