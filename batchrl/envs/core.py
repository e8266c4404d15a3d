"""TensorForce's environment interface, and its adapter for Gymnasium environments.

``Environment`` speaks spec dicts (``batchrl.specs``)::

    env.states, env.actions                       # spec dicts
    state = env.reset(seed=None)
    state, terminal, reward = env.execute(action)
    env.close()

``GymEnvironment`` adapts any Gymnasium env to it and keeps what the old interface merges:
``terminal`` is ``terminated or truncated``, and ``last_terminated`` / ``last_truncated`` /
``last_info`` say which it was (agents bootstrap on truncation).

``make('CartPole-v1')`` builds one from a registered id; ``make_gym`` returns the raw
Gymnasium env with the same error for unknown ids (used by worker processes).
"""
from __future__ import annotations

import abc
import importlib
import inspect
from typing import Any

import gymnasium as gym

from batchrl.envs import ale
from batchrl.envs.mujoco_warnings import known_warnings_dropped
from batchrl.errors import UserInputError, close_matches, did_you_mean, missing_extra
from batchrl.specs import from_space, to_space, validate_spec

_UNKNOWN_ID_ERRORS = (gym.error.UnregisteredEnv, gym.error.DeprecatedEnv)


class Environment(abc.ABC):
  """Base class of a TensorForce-style environment.

  Writing a custom environment: subclass, give the specs, implement ``reset`` and ``execute``.
  Draw all randomness from a generator seeded in ``reset(seed)`` so runs are reproducible,
  and check the result with ``batchrl.envs.check_env(MyEnv())``::

      class Corridor(Environment):
        def __init__(self, length=5):
          super().__init__(states=dict(type='float', shape=(1,)),
                           actions=dict(type='int', num_values=2))
          self.length = length

        def reset(self, seed=None):
          self.rng = np.random.default_rng(seed)
          self.pos = 0
          return np.array([0.0], np.float32)

        def execute(self, actions):
          self.pos += 1 if actions == 1 else -1
          terminal = self.pos >= self.length
          return np.array([self.pos], np.float32), terminal, float(terminal)

  ``states`` / ``actions`` may also be set later (``self.states = ...``) or overridden as
  properties (TensorForce 0.3 style); either way they are validated spec dicts.
  """

  def __init__(self, states: dict | None = None, actions: dict | None = None):
    self._states = None
    self._actions = None
    if states is not None:
      self.states = states
    if actions is not None:
      self.actions = actions

  @property
  def states(self) -> dict:
    """Spec dict of the state ``reset`` and ``execute`` return."""
    return self._require_spec("_states", "states")

  @states.setter
  def states(self, spec: dict) -> None:
    validate_spec(spec)
    self._states = spec

  @property
  def actions(self) -> dict:
    """Spec dict of the action ``execute`` takes."""
    return self._require_spec("_actions", "actions")

  @actions.setter
  def actions(self, spec: dict) -> None:
    validate_spec(spec)
    self._actions = spec

  def _require_spec(self, attribute: str, name: str) -> dict:
    spec = getattr(self, attribute, None)
    if spec is None:
      raise AttributeError(
        f"{type(self).__name__} has no {name} spec: pass {name}=dict(...) to "
        f"Environment.__init__, assign self.{name}, or override the {name} property")
    return spec

  @property
  def observation_space(self) -> gym.Space:
    """The Gymnasium space of ``states``."""
    return to_space(self.states)

  @property
  def action_space(self) -> gym.Space:
    """The Gymnasium space of ``actions``."""
    return to_space(self.actions)

  @abc.abstractmethod
  def reset(self, seed: int | None = None) -> Any:
    """Starts an episode and returns its first state; ``seed`` reseeds the environment."""

  @abc.abstractmethod
  def execute(self, actions: Any) -> tuple[Any, bool, float]:
    """Applies ``actions``; returns ``(state, terminal, reward)``."""

  def close(self) -> None:
    """Releases resources (windows, processes); nothing to release by default."""

  def __enter__(self) -> "Environment":
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()


class GymEnvironment(Environment):
  """A Gymnasium env behind the ``Environment`` interface.

  Args:
    env_or_id: a ``gymnasium.Env`` or a registered id such as ``'CartPole-v1'``.
    seed: seeds the first ``reset`` (and the action space); later resets continue the
      env's random stream unless given their own seed.
    **make_kwargs: passed to ``gymnasium.make`` (only with an id).
  """

  def __init__(self, env_or_id: gym.Env | str, seed: int | None = None, **make_kwargs):
    self.env = _resolve_env(env_or_id, make_kwargs)
    super().__init__(from_space(self.env.observation_space), from_space(self.env.action_space))
    self._pending_seed = seed
    if seed is not None:
      self.env.action_space.seed(seed)
    self._phase = "new"  # new -> running <-> done; any -> closed
    self.last_terminated = False
    self.last_truncated = False
    self.last_info: dict = {}

  @property
  def observation_space(self) -> gym.Space:
    return self.env.observation_space

  @property
  def action_space(self) -> gym.Space:
    return self.env.action_space

  def reset(self, seed: int | None = None) -> Any:
    """Starts an episode; returns the first observation (its info is in ``last_info``)."""
    self._require_open("reset")
    if seed is None:
      seed, self._pending_seed = self._pending_seed, None
    observation, info = self.env.reset(seed=seed)
    self._phase = "running"
    self.last_terminated, self.last_truncated, self.last_info = False, False, info
    return observation

  def execute(self, actions: Any) -> tuple[Any, bool, float]:
    """Steps once; ``terminal`` is ``terminated or truncated`` (see ``last_truncated``)."""
    self._require_open("execute")
    if self._phase != "running":
      when = "before the first reset()" if self._phase == "new" else "after the episode ended"
      raise RuntimeError(f"execute() called {when}; call reset() to start an episode")
    observation, reward, terminated, truncated, info = self.env.step(actions)
    self.last_terminated, self.last_truncated = bool(terminated), bool(truncated)
    self.last_info = info
    terminal = self.last_terminated or self.last_truncated
    if terminal:
      self._phase = "done"
    return observation, terminal, float(reward)

  def close(self) -> None:
    """Closes the Gymnasium env; calling it again does nothing."""
    if self._phase != "closed":
      self._phase = "closed"
      self.env.close()

  def _require_open(self, method: str) -> None:
    if self._phase == "closed":
      raise RuntimeError(f"{method}() called after close(); create a new environment")

  def __repr__(self) -> str:
    return f"GymEnvironment({self.env})"


def _resolve_env(env_or_id: gym.Env | str, make_kwargs: dict) -> gym.Env:
  if isinstance(env_or_id, str):
    return make_gym(env_or_id, **make_kwargs)
  if make_kwargs:
    raise TypeError(f"keyword arguments {sorted(make_kwargs)} only apply when building from "
                    f"an id; got an env instance {env_or_id!r}")
  if not isinstance(env_or_id, gym.Env):
    raise TypeError(f"expected a gymnasium.Env or a registered id string, got "
                    f"{type(env_or_id).__name__} {env_or_id!r}")
  return env_or_id


def make_gym(env_id: str, **kwargs) -> gym.Env:
  """``gymnasium.make(env_id, **kwargs)``, ``env_id`` a registered id or Gymnasium's
  ``module:EnvId`` (the module is imported first: it registers the env). A module that
  cannot be imported, an unknown id (naming the closest registered ids) or a keyword the
  env does not take raises ``UserInputError``."""
  if not isinstance(env_id, str):
    raise TypeError(f"env_id must be a string such as 'CartPole-v1', got {env_id!r}")
  import_env_module(env_id)
  ale.ensure_registered(env_id)  # Atari ids need ale-py's registration (batchrl[atari])
  try:
    with known_warnings_dropped(env_id):  # MuJoCo 4 on Gymnasium's own models
      return gym.make(env_id, **kwargs)
  except _UNKNOWN_ID_ERRORS as error:
    raise UserInputError(_unknown_id_message(env_id, error)) from error
  except TypeError as error:
    unknown = _unknown_keyword(error, kwargs)
    if unknown is None:
      raise
    raise UserInputError(_unknown_keyword_message(env_id, unknown)) from error
  except gym.error.DependencyNotInstalled as error:
    raise _missing_dependency(env_id, error) from error
  except (RuntimeError, OSError) as error:
    rom = ale.rom_error(env_id, error) if ale.looks_like_atari(env_id) else None
    if rom is None:
      raise
    raise rom from error


def import_env_module(env_id: str) -> None:
  """Imports the module of a Gymnasium ``module:EnvId`` id, as ``gymnasium.make`` does (the
  import registers the env), so that a module that cannot be imported is a one-line
  ``UserInputError`` rather than Gymnasium's traceback; plain ids need nothing."""
  module, sep, _ = env_id.partition(":")
  if not sep:
    return
  try:
    importlib.import_module(module)
  except ModuleNotFoundError as error:
    if error.name is not None and f"{module}.".startswith(f"{error.name}."):
      raise UserInputError(
          f"environment {env_id!r}: no module named {error.name!r} (the part before ':' is "
          f"a module to import, which registers the env: put it on PYTHONPATH or in the "
          f"working directory, or install its package)") from None
    raise UserInputError(f"environment {env_id!r}: importing {module!r} failed: {error}") \
        from error


def _module_ids(module: str) -> list[str]:
  """The registered ids whose entry point is in ``module`` (or below it)."""
  ids = []
  for env_id, spec in gym.registry.items():
    entry = spec.entry_point
    where = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    if where == module or str(where).startswith(f"{module}."):
      ids.append(env_id)
  return ids


def _unknown_keyword(error: TypeError, kwargs: dict) -> str | None:
  """The keyword argument ``error`` (raised by ``gymnasium.make``) says the env's
  constructor does not take, when it is one of ``kwargs``; else None (a bug of the env)."""
  text = str(error)
  if "unexpected keyword argument" not in text:
    return None
  return next((key for key in kwargs if f"argument '{key}'" in text), None)


def _unknown_keyword_message(env_id: str, key: str) -> str:
  """What a keyword argument the env does not take is, and the ones it does."""
  spec = gym.registry.get(env_id.rpartition(":")[2])
  try:
    entry = spec.entry_point
    creator = entry if callable(entry) else gym.envs.registration.load_env_creator(entry)
    names = [name for name, p in inspect.signature(creator).parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
             and name not in ("self", "render_mode")]
  except (AttributeError, TypeError, ValueError, ImportError):
    names = []
  takes = f"; it takes: {', '.join(names)}" if names else ""
  return (f"environment {env_id!r} takes no keyword argument {key!r} (run.env_kwargs)"
          f"{did_you_mean(key, names)}{takes}")


def _missing_dependency(env_id: str, error: Exception) -> UserInputError:
  """MuJoCo envs name our extra; others keep Gymnasium's own install hint."""
  entry = str(getattr(gym.registry.get(env_id), "entry_point", "") or "")
  if "mujoco" in entry:
    return missing_extra(f"environment {env_id!r}", "mujoco", error)
  return UserInputError(f"environment {env_id!r} needs a package that is not installed: "
                        f"{error}")


def _unknown_id_message(env_id: str, error: Exception) -> str:
  module, sep, name = env_id.rpartition(":")
  if sep:  # the module was imported: it does not register this id
    ids = _module_ids(module)
    hint = (f"it registers {', '.join(map(repr, ids))}" if ids else
            f"closest registered ids: {', '.join(map(repr, close_matches(name, gym.registry)))}"
            if close_matches(name, gym.registry) else "no registered id is close")
    return f"unknown environment id {env_id!r}: module {module!r} registers no {name!r}; {hint}"
  registered = sorted(gym.registry)
  close = close_matches(env_id, registered, n=3)
  hint = (f"closest registered ids: {', '.join(map(repr, close))}" if close
          else f"no registered id is close; see sorted(gymnasium.registry) for all "
               f"{len(registered)}")
  return f"unknown environment id {env_id!r}; {hint} (gymnasium: {error})"


def make(id_or_env: gym.Env | str, seed: int | None = None, **make_kwargs) -> GymEnvironment:
  """A ``GymEnvironment`` from a registered id (``make_kwargs`` go to ``gymnasium.make``) or
  from a Gymnasium env instance."""
  return GymEnvironment(id_or_env, seed=seed, **make_kwargs)


class EnvironmentAsGym(gym.Env):
  """A TensorForce-style ``Environment`` behind the Gymnasium API (the reverse adapter).

  Lets runners and ``BatchEnv`` step any environment through one interface:
  ``reset(seed) -> (state, {})`` and ``step(action) -> (state, reward, terminated, truncated,
  {})``. ``execute``'s ``terminal`` maps to: ``2`` -> truncated (cut short: time limit,
  abort), ``True``/``1`` -> terminated, ``False``/``0`` -> neither. A ``GymEnvironment``
  keeps the split it recorded (``last_terminated`` / ``last_truncated``) and its info.

  An environment whose ``reset()`` takes no ``seed`` (TensorForce 0.3 style) is reset
  unseeded, with a warning the first time a seed is given.

  Args:
    environment: the ``Environment`` to wrap.
    close_environment: whether ``close()`` closes the wrapped environment (False when it is
      borrowed from a caller who closes it).
  """

  def __init__(self, environment: Environment, close_environment: bool = True):
    if not isinstance(environment, Environment):
      raise TypeError(f"EnvironmentAsGym wraps a batchrl.envs.Environment, got "
                      f"{type(environment).__name__} {environment!r}")
    self.environment = environment
    self.observation_space = environment.observation_space
    self.action_space = environment.action_space
    self.close_environment = close_environment
    self._reset_takes_seed = _accepts_keyword(environment.reset, "seed")
    self._warned_seed = False

  def reset(self, *, seed: int | None = None, options: dict | None = None):
    super().reset(seed=seed)
    if seed is None:
      state = self.environment.reset()
    elif self._reset_takes_seed:
      state = self.environment.reset(seed=seed)
    else:
      if not self._warned_seed:
        import warnings
        warnings.warn(f"{type(self.environment).__name__}.reset() takes no seed argument; it "
                      "is reset unseeded (add `seed=None` to its reset to make runs "
                      "reproducible)", RuntimeWarning, stacklevel=2)
        self._warned_seed = True
      state = self.environment.reset()
    info = getattr(self.environment, "last_info", None)
    return state, dict(info) if isinstance(info, dict) else {}

  def step(self, action):
    state, terminal, reward = self.environment.execute(action)
    if isinstance(self.environment, GymEnvironment):
      env = self.environment
      return state, float(reward), env.last_terminated, env.last_truncated, dict(env.last_info)
    terminated, truncated = _split_terminal(terminal)
    return state, float(reward), terminated, truncated, {}

  def render(self):
    render = getattr(self.environment, "render", None)
    return render() if callable(render) else None

  def close(self) -> None:
    if self.close_environment:
      self.environment.close()

  def __repr__(self) -> str:
    return f"EnvironmentAsGym({self.environment!r})"


def _split_terminal(terminal: Any) -> tuple[bool, bool]:
  """``execute``'s terminal (bool or 0/1/2, numpy scalars too) -> (terminated, truncated)."""
  try:
    code = int(terminal)
  except (TypeError, ValueError):
    raise ValueError(f"execute() returned terminal={terminal!r}; expected a bool or 0 "
                     "(running), 1 (ended) or 2 (cut short)") from None
  if code not in (0, 1, 2):
    raise ValueError(f"execute() returned terminal={terminal!r}; expected a bool or 0 "
                     "(running), 1 (ended) or 2 (cut short)")
  return code == 1, code == 2


def _accepts_keyword(function, name: str) -> bool:
  import inspect
  try:
    parameters = inspect.signature(function).parameters
  except (TypeError, ValueError):  # builtins without a signature: assume the modern form
    return True
  return name in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def as_gym_env(env: Environment | gym.Env | str, **make_kwargs) -> gym.Env:
  """A Gymnasium env from a registered id (``make_kwargs`` go to ``gymnasium.make``), a
  Gymnasium env (returned as is) or a TensorForce-style ``Environment`` (wrapped in
  ``EnvironmentAsGym``)."""
  if isinstance(env, str):
    return make_gym(env, **make_kwargs)
  if make_kwargs:
    raise TypeError(f"keyword arguments {sorted(make_kwargs)} only apply when building from "
                    f"an id; got {type(env).__name__} {env!r}")
  if isinstance(env, Environment):
    return EnvironmentAsGym(env)
  if isinstance(env, gym.Env):
    return env
  raise TypeError(f"expected a batchrl.envs.Environment, a gymnasium.Env or a registered id "
                  f"string such as 'CartPole-v1', got {type(env).__name__} {env!r}")
