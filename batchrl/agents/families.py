"""The one list of agent families, read by ``Agent.create``, ``batchrl train`` (named
configs), ``batchrl run``, ``batchrl configs`` and Ray. Adding an agent is its folder under
``batchrl/agents/`` (with a ``FAMILY``, see ``batchrl.agents.family``) plus one line here;
``docs/adding-an-agent.md`` walks through it.
"""
from __future__ import annotations

from batchrl.agents import a2c, ddpg, dqfd, dqn, naf, ppo, pqn, sac, simple, td3, tqc, trpo, vpg
from batchrl.agents.family import AgentFamily, AgentType
from batchrl.configclass import ConfigError
from batchrl.errors import did_you_mean

FAMILIES: tuple[AgentFamily, ...] = (
    ppo.FAMILY,
    vpg.FAMILY,
    trpo.FAMILY,
    a2c.FAMILY,
    dqn.FAMILY,
    pqn.FAMILY,
    naf.FAMILY,
    dqfd.FAMILY,
    ddpg.FAMILY,
    td3.FAMILY,
    sac.FAMILY,
    tqc.FAMILY,
    simple.FAMILY,
)

_BY_NAME = {f.name: f for f in FAMILIES}
_API_TYPES = {t.name: (t, f) for f in FAMILIES for t in f.api_types}
assert len(_BY_NAME) == len(FAMILIES), "two families share a name"
assert len(_API_TYPES) == sum(len(f.api_types) for f in FAMILIES), "two agent types share a name"


def trainable() -> list[str]:
  """Families ``batchrl train`` can run (those with a config class)."""
  return sorted(f.name for f in FAMILIES if f.config_class is not None)


def family(name: str) -> AgentFamily:
  """The trainable family ``name`` ('ppo', 'dqn', ...), as named configs and run
  directories give it; an unknown name is an error naming the closest ones."""
  found = _BY_NAME.get(name)
  if found is None or found.config_class is None:
    valid = trainable()
    raise ConfigError(f"unknown agent {name!r} in experiment config{did_you_mean(name, valid)}."
                      f" Valid: {', '.join(valid)}.")
  return found


def api_names() -> list[str]:
  """Every name ``Agent.create(agent=...)`` accepts."""
  return sorted(_API_TYPES)


def api_type(name: str) -> AgentType:
  """The agent type called ``name`` (TensorForce's ``ppo_agent`` spelling also works)."""
  return _api_entry(name)[0]


def family_of_type(name: str) -> AgentFamily:
  """The family of the agent type called ``name`` (``ddqn`` -> DQN's)."""
  return _api_entry(name)[1]


def _api_entry(name: str) -> tuple[AgentType, AgentFamily]:
  if not isinstance(name, str):
    raise ConfigError(f"agent type must be a string, one of {api_names()}, got {name!r}.")
  key = name[:-len("_agent")] if name.endswith("_agent") else name
  key = key.lower()
  if key not in _API_TYPES:
    raise ConfigError(f"unknown agent type {name!r}{did_you_mean(key, api_names())}. Valid "
                      f"types: {', '.join(api_names())}.")
  return _API_TYPES[key]
