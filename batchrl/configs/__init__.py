"""Named experiment configs: ``batchrl train --config NAME`` (list them with ``batchrl configs``).

An experiment (``batchrl.configs.run``) is a ``RunConfig`` (environment, budget, cadence) plus
the config of its agent's family (``Experiment.agent``: ``ppo`` -> ``PPOConfig``...). The
families are the one list ``batchrl.agents.catalog.FOLDERS``; each trainable family's named
experiments are ``NAMED = {name: (factory, description)}`` in the module of its name here
(``batchrl/configs/ppo.py``...), and ``REGISTRY`` gathers them in the families' order. The
other modules (``run``, ``atari``, ``actor_critic``) hold what several families' configs share.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import yaml

from batchrl.agents import catalog
from batchrl.configclass import ConfigError, Registry
from batchrl.configs.run import BACKENDS, Experiment, RunConfig, apply_overrides, fit_schedules
from batchrl.errors import UserInputError

__all__ = ["ANY_ENV", "BACKENDS", "Experiment", "REGISTRY", "RunConfig", "apply_overrides",
           "family_configs", "fit_schedules", "get", "load", "names", "own_env"]

# configs meant for any env of a kind: their runs are always named for their env
ANY_ENV = ("ppo_discrete", "sac_continuous")



def family_configs(family: str) -> dict:
  """``NAMED`` of the trainable family ``family``: its module here,
  ``batchrl/configs/<family>.py``."""
  module = importlib.import_module(f"batchrl.configs.{family}")
  named = getattr(module, "NAMED", None)
  if not isinstance(named, dict) or not named:
    raise TypeError(f"batchrl/configs/{family}.py must define NAMED, the named configs of the "
                    f"{family} family as {{name: (factory, description)}}")
  return named


REGISTRY = Registry("config", listed_by="batchrl configs")
for _entry in catalog.ENTRIES:
  if _entry.config_class is not None:
    for _name, (_factory, _description) in family_configs(_entry.name).items():
      REGISTRY.register(_name, _factory, _description)


def get(name: str) -> Experiment:
  """The named experiment config, its schedules fitted to its budget (``fit_schedules``);
  an unknown name is an error naming the closest ones."""
  return fit_schedules(REGISTRY.get(name))


def own_env(exp: Experiment) -> str | None:
  """The env a named config (or config file) is made for; None for the ``ANY_ENV`` configs,
  meant for whichever env ``--set env=`` gives (``batchrl.train.rundir.run_name``)."""
  return None if exp.name in ANY_ENV else exp.run.env


def names() -> list[str]:
  return REGISTRY.names()


def load(config: str) -> Experiment:
  """``--config``: a named config, or a config file (a name ending in ``.yaml``/``.yml`` or
  holding a path separator), written like a run's ``config.yaml`` or a search's ``best.yaml``."""
  if not config.endswith((".yaml", ".yml")) and os.sep not in config and "/" not in config:
    return get(config)
  path = Path(config)
  if not path.is_file():
    raise ConfigError(f"config file {path} does not exist; --config takes a named config "
                      "(see `batchrl configs`) or a file such as a run's config.yaml.")
  try:
    values = yaml.safe_load(path.read_text(encoding="utf-8"))
  except (yaml.YAMLError, UnicodeDecodeError) as e:
    raise ConfigError(f"config file {path} is not valid YAML: "
                      f"{' '.join(str(e).split())}") from None
  if not isinstance(values, dict) or not isinstance(values.get("run"), dict) \
      or "config" not in values:
    raise ConfigError(f"config file {path} is not an experiment config: expected the keys "
                      "config, agent, run and the agent's section (as a run's config.yaml).")
  try:
    return Experiment.from_dict(values)
  except UserInputError as e:
    raise ConfigError(f"config file {path}: {e}") from None
