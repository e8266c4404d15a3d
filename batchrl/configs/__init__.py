"""Named experiment configs: ``batchrl train --config NAME`` (list them with ``batchrl configs``).

An experiment (``batchrl.configs.run``) is a ``RunConfig`` (environment, budget, cadence) plus
the config of its agent's family (``Experiment.agent``: ``ppo`` -> ``PPOConfig``...; the
families are listed in ``batchrl.agents.families``). Each module here holds one family's
named experiments (``NAMED``); this package gathers them in one registry.
"""
from __future__ import annotations

from batchrl.configclass import Registry
from batchrl.configs import a2c, actor_critic, naf_dqfd, pg, ppo, value_based
from batchrl.configs.run import BACKENDS, Experiment, RunConfig, apply_overrides

__all__ = ["BACKENDS", "Experiment", "REGISTRY", "RunConfig", "apply_overrides", "get", "names"]

REGISTRY = Registry("config")
for _module in (ppo, pg, a2c, value_based, naf_dqfd, actor_critic):
  for _name, (_factory, _description) in _module.NAMED.items():
    REGISTRY.register(_name, _factory, _description)


def get(name: str) -> Experiment:
  """The named experiment config; an unknown name is an error naming the closest ones."""
  return REGISTRY.get(name)


def names() -> list[str]:
  return REGISTRY.names()
