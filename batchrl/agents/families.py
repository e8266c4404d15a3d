"""The agent families with what builds and runs each: ``FAMILIES``, read by ``Agent.create``,
``batchrl train``, ``batchrl run`` and Ray. It is derived from the one list of families,
``batchrl.agents.catalog.FOLDERS``: each folder's ``FAMILY`` (its ``family.py``, see
``batchrl.agents.family``), in that order.
"""
from __future__ import annotations

import importlib

from batchrl.agents import catalog
from batchrl.agents.family import AgentFamily, AgentType, FamilyEntry
from batchrl.configclass import ConfigError
from batchrl.errors import did_you_mean


def folder_family(entry: FamilyEntry) -> AgentFamily:
  """The ``FAMILY`` of the agent folder of ``entry`` (``batchrl/agents/<name>/family.py``),
  checked to be built from that folder's ``ENTRY``."""
  found = getattr(importlib.import_module(f"batchrl.agents.{entry.name}.family"), "FAMILY", None)
  if not isinstance(found, AgentFamily) or found.entry is not entry:
    raise TypeError(f"batchrl/agents/{entry.name}/family.py must define FAMILY, the "
                    f"AgentFamily built from batchrl.agents.{entry.name}.ENTRY, got {found!r}")
  return found


FAMILIES: tuple[AgentFamily, ...] = tuple(folder_family(e) for e in catalog.ENTRIES)
_BY_NAME = {f.name: f for f in FAMILIES}
_API_TYPES = {t.name: (t, f) for f in FAMILIES for t in f.api_types}


def trainable() -> list[str]:
  """Families ``batchrl train`` can run (those with a config class)."""
  return catalog.trainable()


def family(name: str) -> AgentFamily:
  """The trainable family ``name`` ('ppo', 'dqn', ...), as named configs and run
  directories give it; an unknown name is an error naming the closest ones."""
  return _BY_NAME[catalog.entry(name).name]


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
