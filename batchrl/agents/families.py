"""The one list of agent families, read by ``Agent.create``, ``batchrl train``, ``batchrl run``
and Ray. Adding an agent is its folder under ``batchrl/agents/`` (an ``ENTRY`` in its
``__init__.py``, a ``FAMILY`` in its ``family.py``, see ``batchrl.agents.family``) plus one
line here and one in ``batchrl.agents.catalog``, the same list free of JAX (checked below);
``docs/adding-an-agent.md`` walks through it.
"""
from __future__ import annotations

from batchrl.agents import catalog
from batchrl.agents.a2c.family import FAMILY as A2C
from batchrl.agents.crossq.family import FAMILY as CROSSQ
from batchrl.agents.ddpg.family import FAMILY as DDPG
from batchrl.agents.dqfd.family import FAMILY as DQFD
from batchrl.agents.dqn.family import FAMILY as DQN
from batchrl.agents.family import AgentFamily, AgentType, FamilyEntry
from batchrl.agents.naf.family import FAMILY as NAF
from batchrl.agents.ppo.family import FAMILY as PPO
from batchrl.agents.pqn.family import FAMILY as PQN
from batchrl.agents.sac.family import FAMILY as SAC
from batchrl.agents.simple.family import FAMILY as SIMPLE
from batchrl.agents.td3.family import FAMILY as TD3
from batchrl.agents.tqc.family import FAMILY as TQC
from batchrl.agents.trpo.family import FAMILY as TRPO
from batchrl.agents.vpg.family import FAMILY as VPG
from batchrl.configclass import ConfigError
from batchrl.errors import did_you_mean

FAMILIES: tuple[AgentFamily, ...] = (
    PPO,
    VPG,
    TRPO,
    A2C,
    DQN,
    PQN,
    NAF,
    DQFD,
    DDPG,
    TD3,
    SAC,
    TQC,
    CROSSQ,
    SIMPLE,
)


def catalog_mismatch(families: tuple[AgentFamily, ...],
                     entries: tuple[FamilyEntry, ...]) -> str | None:
  """What differs between ``families`` and the catalog's ``entries`` (each family's entry
  must be the catalog's, in the same order), or None when they agree."""
  built = [f.entry.name for f in families]
  listed = [e.name for e in entries]
  missing = [name for name in built if name not in listed]
  if missing:
    return f"batchrl.agents.catalog.ENTRIES lacks {', '.join(missing)}: add its ENTRY there"
  missing = [name for name in listed if name not in built]
  if missing:
    return f"batchrl.agents.families.FAMILIES lacks {', '.join(missing)}: add its FAMILY there"
  if built != listed:
    return f"FAMILIES lists {built} and ENTRIES {listed}: give them one order"
  stale = [f.name for f, e in zip(families, entries) if f.entry is not e]
  if stale:
    return f"the FAMILY of {', '.join(stale)} is not built from its folder's ENTRY"
  return None


_MISMATCH = catalog_mismatch(FAMILIES, catalog.ENTRIES)
assert _MISMATCH is None, _MISMATCH
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
