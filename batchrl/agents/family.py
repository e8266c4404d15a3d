"""What an agent folder offers the rest of batchrl: a ``FamilyEntry`` and an ``AgentFamily``.

A family is one learning algorithm with one config class (``PPOConfig``, ``DQNConfig``...).
It comes in two parts, so that what reads configs never needs JAX:

- ``FamilyEntry`` (the folder's ``__init__.py``, ``ENTRY``): its name, what it is, the
  ``Agent.create`` names it offers with their descriptions, its config class and how its
  schedules fit a run. Named configs, config files, ``--set`` and ``batchrl configs`` read it
  (``batchrl.agents.catalog``) without importing a model.
- ``AgentFamily`` (the folder's ``family.py``, ``FAMILY``): the entry plus how to build and run
  it. ``make(config) -> Model`` builds its pure-function core, which ``batchrl train``, the
  fused driver, checkpoints and Ray all use. ``api_types`` build the ``Agent.create`` names
  (DQN's family offers ``dqn``, ``ddqn`` and ``dqn_nstep``); each turns TensorForce's keys into
  the family's config. ``host_methods`` are the ``Agent`` methods that change the model state
  on the host (DQFD's ``import_demonstrations``...).

The one list of families is ``batchrl.agents.catalog.FOLDERS``; ``catalog.ENTRIES`` and
``batchrl.agents.families.FAMILIES`` are its folders' entries and families. This module holds
what every family's ``keys.py`` uses to read TensorForce keys, so that it sits below all of
them; it imports no JAX.
"""
from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Callable, Mapping

from batchrl.configclass import ConfigError
from batchrl.errors import did_you_mean

if TYPE_CHECKING:  # an annotation only: the entries of the families stay free of JAX
  from batchrl.agents.core import Model

IGNORED_KEYS = ("type", "log_level")  # accepted for compatibility with TensorForce files


@dataclasses.dataclass(frozen=True)
class BuildContext:
  """What an agent type needs besides its own keys."""

  num_streams: int  # parallel_interactions
  network: Any  # JSON-able network spec ('auto', a layer list, a branches dict)
  action_space: Any  # gymnasium space of the actions
  max_episode_timesteps: int | None = None  # the environment's episode limit, if known


@dataclasses.dataclass(frozen=True)
class AgentType:
  """A name of ``Agent.create``: ``build(kwargs, context) -> Model``; ``keys`` lists the
  valid keys (empty: the builder checks them itself)."""

  name: str
  description: str
  build: Callable[[dict, BuildContext], Model]
  keys: tuple[str, ...] = ()


# ``host_method(model_state, argument) -> (model_state, result)``
HostMethod = Callable[[Any, Any], tuple[Any, Any]]


# ``fit_schedules(config, iterations) -> config``: schedules that count updates set to the
# run's length; ``iterations(period)`` is the number of updates of that period.
FitSchedules = Callable[[Any, Callable[[int], int]], Any]


@dataclasses.dataclass(frozen=True)
class FamilyEntry:
  """What a family is, without JAX: one agent folder's entry in
  ``batchrl.agents.catalog.ENTRIES``, from its ``__init__.py``.

  ``agents`` maps each ``Agent.create`` name the family offers to its description.
  ``config_class`` (and ``fit_schedules``) are None for agents that only exist in the object
  API (``random``, ``constant``): they have no config of their own to train with.
  """

  name: str
  description: str
  agents: Mapping[str, str]
  config_class: type | None = None
  fit_schedules: FitSchedules | None = None

  def api_type(self, name: str, build: Callable[[dict, BuildContext], Model],
               keys: tuple[str, ...] = ()) -> AgentType:
    """The ``Agent.create`` name ``name`` of this family (one of ``agents``, whose
    description it takes), built by ``build``."""
    if name not in self.agents:
      raise ValueError(f"family {self.name!r} offers no agent {name!r}; its entry lists "
                       f"{', '.join(self.agents)}")
    return AgentType(name, self.agents[name], build, keys)


@dataclasses.dataclass(frozen=True)
class AgentFamily:
  """One agent folder's entry in ``batchrl.agents.families.FAMILIES``, from its
  ``family.py``: its ``FamilyEntry`` and how to build and run it.

  ``api_types`` are the entry's ``agents``, in its order (``FamilyEntry.api_type``); ``make``
  is None for agents that only exist in the object API.
  """

  entry: FamilyEntry
  api_types: tuple[AgentType, ...]
  make: Callable[[Any], Model] | None = None
  host_methods: Mapping[str, HostMethod] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    built = [t.name for t in self.api_types]
    if built != list(self.entry.agents):
      raise ValueError(f"family {self.entry.name!r} builds the agents {built}; its entry "
                       f"lists {list(self.entry.agents)}")
    if (self.make is None) != (self.entry.config_class is None):
      raise ValueError(f"family {self.entry.name!r}: a config class and make go together")

  @property
  def name(self) -> str:
    return self.entry.name

  @property
  def description(self) -> str:
    return self.entry.description

  @property
  def config_class(self) -> type | None:
    return self.entry.config_class

  @property
  def fit_schedules(self) -> FitSchedules | None:
    return self.entry.fit_schedules


# ------------------------------------------------------------- reading TensorForce keys


def check_keys(kwargs: dict, valid: tuple[str, ...], agent: str) -> None:
  """Every key must be valid for ``agent``; the error names the closest valid key."""
  for key in kwargs:
    if key in valid or key in IGNORED_KEYS:
      continue
    listed = f"Valid keys: {', '.join(sorted(valid))}." if valid else "It takes no keys."
    raise ConfigError(f"unknown key {key!r} for agent {agent!r}{did_you_mean(key, valid)}. "
                      f"{listed}")


def take_aliases(kwargs: dict, target: str, aliases: tuple[str, ...]) -> Any:
  """Pops ``target`` and its aliases; giving two of them with different values is an error.
  Returns ``dataclasses.MISSING`` when none is given."""
  given = {name: kwargs.pop(name) for name in (target, *aliases) if name in kwargs}
  values = {json.dumps(v, sort_keys=True, default=str) for v in given.values()}
  if len(values) > 1:
    raise ConfigError(f"{' and '.join(given)} mean the same thing; give one of them "
                      f"(got {given}).")
  return next(iter(given.values())) if given else dataclasses.MISSING


def adam_learning_rate(spec, key: str):
  """TensorForce's optimizer ``key``: ``'adam'`` or ``{'type': 'adam', 'learning_rate': x}``
  -> x (None when not given). Other optimizers are errors: the updates use Adam."""
  if spec == "adam":
    return None
  if not isinstance(spec, dict) or spec.get("type", "adam") != "adam":
    raise ConfigError(f"{key} must be 'adam' or {{'type': 'adam', 'learning_rate': x}} (the "
                      f"update is Adam), got {spec!r}.")
  unknown = set(spec) - {"type", "learning_rate"}
  if unknown:
    raise ConfigError(f"unknown {key} keys {sorted(unknown)}; valid: type, learning_rate.")
  return spec.get("learning_rate")


def merge_learning_rate(values: dict, spec, key: str) -> None:
  """The rate of the optimizer dict ``key`` (None: not given) into ``values['learning_rate']``;
  the rate given twice with different values is an error."""
  rate = None if spec is None else adam_learning_rate(spec, key)
  if rate is None:
    return
  if "learning_rate" in values and values["learning_rate"] != rate:
    raise ConfigError(f"learning_rate is given twice (also in {key}) with different values; "
                      "give one.")
  values["learning_rate"] = rate


def build_config(config_class: type, values: dict, agent: str):
  """``config_class(**values)``; a wrong type or value is a ConfigError naming ``agent``."""
  try:
    return config_class(**values)
  except ConfigError:
    raise
  except (TypeError, ValueError) as e:
    raise ConfigError(f"invalid {agent} setting: {e}") from None


def replaces_state(change: Callable[[Any, Any], Any]) -> HostMethod:
  """A host method that only changes the model state (``change(state, argument) -> state``)."""
  return lambda state, argument: (change(state, argument), None)


def anneal_over_run(config, iterations: Callable[[int], int]):
  """For configs that anneal the learning rate to 0 over ``total_updates`` updates of
  ``rollout_length`` steps per env (PPO, VPG): ``total_updates`` = the run's updates.
  ``None`` (a constant rate) stays None."""
  if config.total_updates is None:
    return config
  return dataclasses.replace(config, total_updates=iterations(config.rollout_length))
