"""The one list of agent families: ``FOLDERS``, the agent folders under ``batchrl/agents/``.

Everything that needs the families reads them from here: ``ENTRIES`` is each folder's
``FamilyEntry`` (its ``__init__.py``: name, ``Agent.create`` names, config class), free of JAX,
so that named configs, config files, ``--set`` and ``batchrl configs`` find a mistake in a
config before JAX is imported. ``batchrl.agents.families.FAMILIES`` adds what builds and runs
each family (its ``family.py``), and ``batchrl.configs`` takes each trainable family's named
configs from ``batchrl/configs/<name>.py``: both are derived from ``FOLDERS``. Adding an agent
is its folder, its name here and its named configs (``docs/adding-an-agent.md``).
"""
from __future__ import annotations

import importlib

from batchrl.agents.family import FamilyEntry
from batchrl.configclass import ConfigError
from batchrl.errors import did_you_mean

# In the order `batchrl configs` lists them. Each name is a folder under batchrl/agents/ and
# the name of its family (``ENTRY.name``) in named configs and run directories.
FOLDERS: tuple[str, ...] = (
    "ppo",
    "vpg",
    "trpo",
    "a2c",
    "dqn",
    "pqn",
    "naf",
    "dqfd",
    "ddpg",
    "td3",
    "sac",
    "tqc",
    "crossq",
    "simbav2",
    "simple",
)


def folder_entry(name: str) -> FamilyEntry:
  """The ``ENTRY`` of the agent folder ``name`` (``batchrl/agents/<name>/__init__.py``),
  checked to be a ``FamilyEntry`` called ``name``."""
  found = getattr(importlib.import_module(f"batchrl.agents.{name}"), "ENTRY", None)
  if not isinstance(found, FamilyEntry) or found.name != name:
    raise TypeError(f"batchrl/agents/{name}/__init__.py must define ENTRY, the FamilyEntry "
                    f"named {name!r} (batchrl.agents.family), got {found!r}")
  return found


ENTRIES: tuple[FamilyEntry, ...] = tuple(folder_entry(name) for name in FOLDERS)

_BY_NAME = {e.name: e for e in ENTRIES}
assert len(_BY_NAME) == len(ENTRIES), "FOLDERS names a folder twice"
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
