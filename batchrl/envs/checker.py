"""Checks a user-written environment before it meets an agent.

``check_env(env)`` accepts a Gymnasium env (``reset``/``step``) or a batchrl ``Environment``
(``reset``/``execute``). It collects every problem it finds, each with what to fix, and
raises one ``EnvCheckError`` listing them (or warns with ``warn=True``). It returns a
``CheckReport``: the list of problems, which prints as ``no problems found`` when empty.

``space_problems`` and ``nonfinite_problems`` are the value checks it is built from; the
``Guard`` wrapper reuses them for actions, observations and rewards.
"""
from __future__ import annotations

import copy
import functools
import inspect
import warnings
from collections.abc import Mapping
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from batchrl.envs.core import Environment
from batchrl.specs import SUPPORTED_SPACES, SpecError, from_space, to_space

_ROLLOUT_STEPS = 10  # enough to see a step's types and to compare two seeded rollouts
_FAILED = object()  # what a reset/step adapter returns when the call made no sense


def _numbered(problems: list[str], env_name: str) -> str:
  lines = "\n".join(f"  {i}. {problem}" for i, problem in enumerate(problems, 1))
  return f"check_env found {len(problems)} problem(s) with {env_name}:\n{lines}"


class CheckReport(list):
  """What ``check_env`` found: the list of problem strings, empty when the env passes.

  It is a ``list`` (``report == []``, ``len``, iteration and ``bool`` as for a list: true
  when there are problems) that prints readably: ``no problems found with MyEnv``, or the
  numbered problems.
  """

  def __init__(self, problems=(), env_name: str = "environment"):
    super().__init__(problems)
    self.env_name = env_name

  def __str__(self) -> str:
    if not self:
      return f"check_env: no problems found with {self.env_name}"
    return _numbered(self, self.env_name)

  __repr__ = __str__


class EnvCheckError(ValueError):
  """An environment failed ``check_env``; ``problems`` lists every problem found."""

  def __init__(self, problems: list[str], env_name: str = "environment"):
    self.problems = CheckReport(problems, env_name)
    super().__init__(str(self.problems))


def check_env(env: Any, seed: int = 0, warn: bool = False) -> CheckReport:
  """Checks spaces, reset/step signatures and returns, value types, and determinism.

  Returns a ``CheckReport``: the list of problems, empty when the env passes, which prints
  as ``check_env: no problems found with <env>`` or the numbered problems. Raises
  ``EnvCheckError`` when there are problems, unless ``warn=True``, which emits one warning
  per problem instead (and returns them).
  """
  if isinstance(env, Environment):
    problems = _check_environment(env, seed)
  elif callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None)):
    problems = _check_gym_env(env, seed)
  else:
    problems = [f"{type(env).__name__} is neither a gymnasium.Env (reset/step) nor a "
                f"batchrl Environment (reset/execute)"]
  # the same problem seen twice is listed once
  report = CheckReport(dict.fromkeys(problems), _env_name(env))
  if report and warn:
    for problem in report:
      warnings.warn(f"check_env: {problem}", UserWarning, stacklevel=2)
  elif report:
    raise EnvCheckError(report, report.env_name)
  return report


def _env_name(env: Any) -> str:
  """The registered id of a ``gymnasium.make`` env (not its outer wrapper's class), else the
  class name of the env under any wrappers."""
  env_id = getattr(getattr(env, "spec", None), "id", None)
  return env_id if isinstance(env_id, str) else type(getattr(env, "unwrapped", env)).__name__


# --- value checks -----------------------------------------------------------------------------

def space_problems(value: Any, space: gym.Space, where: str = "value",
                   exact_dtype: bool = True) -> list[str]:
  """Why ``value`` is not a member of ``space`` (shape, dtype, bounds); ``[]`` when it is.

  ``exact_dtype=True`` (observations) demands numpy values of the space's dtype;
  ``False`` (actions) accepts anything castable of the right kind, lists included.
  """
  if isinstance(space, spaces.Dict):
    return _dict_problems(value, space, where, exact_dtype)
  if isinstance(space, spaces.Tuple):
    return _tuple_problems(value, space, where, exact_dtype)
  if isinstance(space, (spaces.Discrete, spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
    return _array_problems(value, space, where, exact_dtype)
  return [f"{where}: space {space} is not supported; use one of "
          f"{[cls.__name__ for cls in SUPPORTED_SPACES]}"]


def _dict_problems(value, space: spaces.Dict, where: str, exact_dtype: bool) -> list[str]:
  if not isinstance(value, Mapping):
    return [f"{where} is a {type(value).__name__}; {space} expects a dict with keys "
            f"{list(space.spaces)}"]
  missing = [key for key in space.spaces if key not in value]
  extra = [key for key in value if key not in space.spaces]
  problems = [f"{where} lacks key {key!r} of the Dict space" for key in missing]
  problems += [f"{where} has key {key!r} that the Dict space does not have (valid keys: "
               f"{list(space.spaces)})" for key in extra]
  for key, sub in space.spaces.items():
    if key in value:
      problems += space_problems(value[key], sub, f"{where}[{key!r}]", exact_dtype)
  return problems


def _tuple_problems(value, space: spaces.Tuple, where: str, exact_dtype: bool) -> list[str]:
  kinds = tuple if exact_dtype else (tuple, list)
  if not isinstance(value, kinds) or len(value) != len(space.spaces):
    return [f"{where} is a {type(value).__name__} of length {_length(value)}; {space} expects "
            f"a tuple of {len(space.spaces)} items"]
  problems = []
  for index, (item, sub) in enumerate(zip(value, space.spaces)):
    problems += space_problems(item, sub, f"{where}[{index}]", exact_dtype)
  return problems


def _length(value) -> Any:
  return len(value) if hasattr(value, "__len__") else "n/a"


def _array_problems(value, space: gym.Space, where: str, exact_dtype: bool) -> list[str]:
  if exact_dtype and not isinstance(value, (np.ndarray, np.generic, int)):
    return [f"{where} is a {type(value).__name__}; {space} expects a numpy array of shape "
            f"{space.shape} and dtype {space.dtype}, e.g. np.asarray(x, dtype=np.{space.dtype})"]
  try:
    array = np.asarray(value)
  except (TypeError, ValueError) as error:
    return [f"{where} ({value!r}) is not an array: {error}"]
  if array.shape != space.shape:
    return [f"{where} has shape {array.shape}; {space} expects shape {space.shape}"]
  problem = _dtype_problem(array.dtype, space, where, exact_dtype)
  if problem:
    return [problem]
  return _range_problems(array, space, where)


def _dtype_problem(dtype: np.dtype, space: gym.Space, where: str, exact_dtype: bool) -> str:
  expected = np.dtype(space.dtype)
  integer_space = isinstance(space, spaces.Discrete) or expected.kind in "iu"
  if isinstance(space, spaces.Discrete) or not exact_dtype:
    # Discrete members may be any integer type; loose checks only ask for the right kind.
    kinds = "iub" if isinstance(space, spaces.MultiBinary) else ("iu" if integer_space else "fiu")
    if dtype.kind in kinds:
      return ""
    wanted = "integers" if integer_space else "numbers"
    return f"{where} has dtype {dtype.name}; {space} expects {wanted} (dtype {expected.name})"
  if dtype != expected:
    return (f"{where} has dtype {dtype.name}; {space} expects {expected.name}: cast with "
            f"np.asarray(x, dtype=np.{expected.name}) or declare the space with "
            f"dtype=np.{dtype.name}")
  return ""


def _range_problems(array: np.ndarray, space: gym.Space, where: str) -> list[str]:
  if isinstance(space, spaces.Box):
    low, high = space.low, space.high
    valid = "the bounds"
  elif isinstance(space, spaces.MultiBinary):
    low, high = np.zeros(space.shape, int), np.ones(space.shape, int)
    valid = "0 or 1"
  else:  # Discrete / MultiDiscrete: start .. start + n - 1
    n = space.n if isinstance(space, spaces.Discrete) else space.nvec
    low, high = np.asarray(space.start), np.asarray(space.start) + np.asarray(n) - 1
    valid = "start .. start + n - 1"
  if array.dtype.kind == "f" and np.isnan(array).any():
    return [f"{where} contains NaN at index {_first(np.isnan(array))}"]
  low, high = np.broadcast_to(low, array.shape), np.broadcast_to(high, array.shape)
  outside = (array < low) | (array > high)
  if not outside.any():
    return []
  index = _first(outside)
  at = f"[{', '.join(map(str, index))}]" if index else ""
  count = int(outside.sum())
  more = f"; {count} elements are outside" if count > 1 else ""
  return [f"{where}{at} = {array[index]} is outside {space}: valid values{' there' if at else ''} "
          f"are {low[index]} .. {high[index]} ({valid}){more}"]


def _first(mask: np.ndarray) -> tuple[int, ...]:
  return tuple(int(i) for i in np.argwhere(mask)[0])


def nonfinite_problems(value: Any, where: str = "value") -> list[str]:
  """Where ``value`` (an array, scalar, or dict / tuple of them) holds NaN or inf."""
  if isinstance(value, Mapping):
    return [p for key, sub in value.items() for p in nonfinite_problems(sub, f"{where}[{key!r}]")]
  if isinstance(value, (tuple, list)) and any(isinstance(v, (Mapping, tuple, list, np.ndarray))
                                              for v in value):
    return [p for i, sub in enumerate(value) for p in nonfinite_problems(sub, f"{where}[{i}]")]
  try:
    array = np.asarray(value)
  except (TypeError, ValueError):
    return []
  if array.dtype.kind not in "fc" or np.isfinite(array).all():
    return []
  index = _first(~np.isfinite(array))
  at = f" at index {index}" if index else ""
  return [f"{where} is not finite ({array[index]}){at}; NaN or inf must not leave the env"]


def reward_problems(reward: Any, where: str = "reward") -> list[str]:
  """Why ``reward`` is not a finite real scalar; ``[]`` when it is."""
  if isinstance(reward, (bool, np.bool_)):
    return [f"{where} is a bool; return a float, e.g. float(reward)"]
  array = np.asarray(reward) if isinstance(reward, (int, float, np.number, np.ndarray)) else None
  if array is None or array.shape != () or array.dtype.kind not in "iuf":
    shape = f" of shape {array.shape}" if array is not None else ""
    return [f"{where} is a {type(reward).__name__}{shape}; return a float scalar, "
            f"e.g. float(reward)"]
  return nonfinite_problems(reward, where)


def _flag_problems(flag: Any, where: str) -> list[str]:
  if isinstance(flag, (bool, np.bool_)):
    return []
  return [f"{where} is {flag!r} of type {type(flag).__name__}; return a bool"]


# --- rollouts ---------------------------------------------------------------------------------

def _rollout(reset: Callable, step: Callable, action_space: gym.Space, seed: int):
  """Resets with ``seed`` and takes seeded random actions until done or the step budget.

  ``reset(seed) -> (obs, problems)`` and ``step(action) -> (obs, reward, done, problems)``
  return ``obs=_FAILED`` when the call could not be made sense of. Returns
  ``(trajectory, problems)``; the trajectory is ``[obs, (obs, reward), ...]``.
  """
  observation, problems = reset(seed)
  if observation is _FAILED:
    return [], problems
  sampler = copy.deepcopy(action_space)
  sampler.seed(seed)
  trajectory = [observation]
  for _ in range(_ROLLOUT_STEPS):
    observation, reward, done, step_problems = step(sampler.sample())
    problems += step_problems
    if observation is _FAILED or step_problems:
      break  # later steps would repeat the same problems
    trajectory.append((observation, reward))
    if done:
      break
  return trajectory, problems


def _determinism_problems(run: Callable, seed: int, first: list) -> list[str]:
  """Compares a second seeded rollout with the first one."""
  second, _ = run()
  for index, (a, b) in enumerate(zip(first, second)):
    if not _same(a, b):
      when = "after reset" if index == 0 else f"at step {index}"
      return [f"not deterministic: two resets with seed={seed} and the same actions differ "
              f"{when}; draw all randomness from a generator seeded in reset(seed) "
              f"(gymnasium: super().reset(seed=seed), then self.np_random)"]
  if len(first) != len(second):
    return [f"not deterministic: with seed={seed} and the same actions the episode lasted "
            f"{len(first) - 1} then {len(second) - 1} steps"]
  return []


def _same(a: Any, b: Any) -> bool:
  if isinstance(a, Mapping) and isinstance(b, Mapping):
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
  if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
  try:
    return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
  except TypeError:
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def _call(problems: list, where: str, function: Callable, *args, **kwargs) -> Any:
  try:
    return function(*args, **kwargs)
  except Exception as error:  # the checker reports user errors instead of crashing on them
    problems.append(f"{where} raised {type(error).__name__}: {error}")
    return _FAILED


def _accepts(function: Callable, name: str) -> bool:
  try:
    parameters = inspect.signature(function).parameters.values()
  except (TypeError, ValueError):
    return True  # builtins without a signature: assume the standard one
  return any(p.name == name or p.kind is p.VAR_KEYWORD for p in parameters)


# --- gymnasium envs ---------------------------------------------------------------------------

def _check_gym_env(env: Any, seed: int) -> list[str]:
  problems = _gym_space_problems(env)
  if problems:
    return problems  # values cannot be checked without valid spaces
  missing = [name for name in ("seed", "options") if not _accepts(env.reset, name)]
  if missing:
    problems.append(f"reset() has no {' or '.join(map(repr, missing))} keyword; gymnasium 1.x "
                    f"envs define def reset(self, *, seed=None, options=None)")
  seeded = _accepts(env.reset, "seed")
  run = functools.partial(_rollout, functools.partial(_gym_reset, env, seeded),
                          functools.partial(_gym_step, env), env.action_space, seed)
  trajectory, rollout_problems = run()
  problems += rollout_problems
  if seeded and trajectory and not rollout_problems:
    problems += _determinism_problems(run, seed, trajectory)
  return problems


def _gym_space_problems(env: Any) -> list[str]:
  problems = []
  for name in ("observation_space", "action_space"):
    space = getattr(env, name, None)
    if not isinstance(space, gym.Space):
      problems.append(f"{name} is {space!r}; set self.{name} to a gymnasium space in __init__")
      continue
    try:
      from_space(space)
    except SpecError as error:
      problems.append(f"{name}: {error}")
  return problems


def _gym_reset(env: Any, seeded: bool, seed: int):
  problems: list[str] = []
  if seeded:
    result = _call(problems, f"reset(seed={seed})", env.reset, seed=seed)
  else:
    result = _call(problems, "reset()", env.reset)
  if result is _FAILED:
    return _FAILED, problems
  if not isinstance(result, tuple) or len(result) != 2:
    problems.append(f"reset() returned {_describe(result)}; gymnasium 1.x needs a tuple "
                    f"(observation, info)")
    return _FAILED, problems
  observation, info = result
  problems += space_problems(observation, env.observation_space, "reset() observation")
  if not isinstance(info, dict):
    problems.append(f"reset() info is a {type(info).__name__}; return a dict")
  return observation, problems


def _gym_step(env: Any, action: Any):
  problems: list[str] = []
  result = _call(problems, f"step({action!r})", env.step, action)
  if result is _FAILED:
    return _FAILED, None, True, problems
  if not isinstance(result, tuple) or len(result) != 5:
    problems.append(
      f"step() returned {_describe(result)}; gymnasium 1.x needs 5 values (observation, "
      f"reward, terminated, truncated, info); split an old 'done' into terminated (a true "
      f"end) and truncated (a time limit)")
    return _FAILED, None, True, problems
  observation, reward, terminated, truncated, info = result
  problems += space_problems(observation, env.observation_space, "step() observation")
  problems += reward_problems(reward, "step() reward")
  problems += _flag_problems(terminated, "step() terminated")
  problems += _flag_problems(truncated, "step() truncated")
  if not isinstance(info, dict):
    problems.append(f"step() info is a {type(info).__name__}; return a dict")
  return observation, reward, bool(terminated) or bool(truncated), problems


def _describe(value: Any) -> str:
  if isinstance(value, tuple):
    return f"a tuple of {len(value)} values"
  return f"a {type(value).__name__}"


# --- batchrl Environments ---------------------------------------------------------------------

def _check_environment(env: Environment, seed: int) -> list[str]:
  problems: list[str] = []
  state_space = _spec_space(env, "states", problems)
  action_space = _spec_space(env, "actions", problems)
  if problems:
    return problems
  seeded = _accepts(env.reset, "seed")
  if not seeded:
    warnings.warn(f"{type(env).__name__}.reset() takes no seed, so determinism was not "
                  f"checked; add a seed parameter for reproducible runs", UserWarning,
                  stacklevel=3)
  run = functools.partial(_rollout, functools.partial(_tf_reset, env, state_space, seeded),
                          functools.partial(_tf_execute, env, state_space), action_space, seed)
  trajectory, problems = run()
  if seeded and trajectory and not problems:
    problems += _determinism_problems(run, seed, trajectory)
  return problems


def _spec_space(env: Environment, name: str, problems: list) -> gym.Space | None:
  try:
    return to_space(getattr(env, name))
  except (SpecError, AttributeError) as error:
    problems.append(f"{name}: {error}")
    return None


def _tf_reset(env: Environment, state_space: gym.Space, seeded: bool, seed: int):
  problems: list[str] = []
  if seeded:
    state = _call(problems, f"reset(seed={seed})", env.reset, seed=seed)
  else:
    state = _call(problems, "reset()", env.reset)
  if state is not _FAILED:
    problems += space_problems(state, state_space, "reset() state")
  return state, problems


def _tf_execute(env: Environment, state_space: gym.Space, action: Any):
  problems: list[str] = []
  result = _call(problems, f"execute({action!r})", env.execute, action)
  if result is _FAILED:
    return _FAILED, None, True, problems
  if not isinstance(result, tuple) or len(result) != 3:
    problems.append(f"execute() returned {_describe(result)}; it must return "
                    f"(state, terminal, reward)")
    return _FAILED, None, True, problems
  state, terminal, reward = result
  problems += space_problems(state, state_space, "execute() state")
  problems += _flag_problems(terminal, "execute() terminal")
  problems += reward_problems(reward, "execute() reward")
  return state, reward, bool(terminal), problems
