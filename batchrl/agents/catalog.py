"""The agent families as what reads configs sees them: each family's ``FamilyEntry`` (its
name, its ``Agent.create`` names, its config class), free of JAX. Named configs, config files,
``--set`` and ``batchrl configs`` read this list, so that a mistake in a config is an error
before JAX is imported; ``batchrl.agents.families.FAMILIES`` is the same list with what
builds and runs each family, and checks on import that the two agree.
"""
from __future__ import annotations

from batchrl.agents import (
  a2c,
  crossq,
  ddpg,
  dqfd,
  dqn,
  naf,
  ppo,
  pqn,
  sac,
  simple,
  td3,
  tqc,
  trpo,
  vpg,
)
from batchrl.agents.family import FamilyEntry
from batchrl.configclass import ConfigError
from batchrl.errors import did_you_mean

ENTRIES: tuple[FamilyEntry, ...] = (
    ppo.ENTRY,
    vpg.ENTRY,
    trpo.ENTRY,
    a2c.ENTRY,
    dqn.ENTRY,
    pqn.ENTRY,
    naf.ENTRY,
    dqfd.ENTRY,
    ddpg.ENTRY,
    td3.ENTRY,
    sac.ENTRY,
    tqc.ENTRY,
    crossq.ENTRY,
    simple.ENTRY,
)

_BY_NAME = {e.name: e for e in ENTRIES}
assert len(_BY_NAME) == len(ENTRIES), "two families share a name"
assert len({a for e in ENTRIES for a in e.agents}) == sum(len(e.agents) for e in ENTRIES), \
    "two agent types share a name"


def trainable() -> list[str]:
  """Families ``batchrl train`` can run (those with a config class)."""
  return sorted(e.name for e in ENTRIES if e.config_class is not None)


def entry(name: str) -> FamilyEntry:
  """The trainable family ``name`` ('ppo', 'dqn', ...), as named configs and run
  directories give it; an unknown name is an error naming the closest ones."""
  found = _BY_NAME.get(name)
  if found is None or found.config_class is None:
    valid = trainable()
    raise ConfigError(f"unknown agent {name!r} in experiment config{did_you_mean(name, valid)}."
                      f" Valid: {', '.join(valid)}.")
  return found
