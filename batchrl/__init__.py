"""batchrl: efficient batched reinforcement learning on JAX.

Importing ``batchrl`` is light: the public names below are loaded on first use, so
``import batchrl`` does not pull in JAX, gymnax or worker machinery until needed.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "ExternalProcess": "batchrl.envs.process",
    "BatchEnv": "batchrl.envs.batch",
    "RestartPolicy": "batchrl.envs.batch",
    "InGraphBatchEnv": "batchrl.envs.ingraph",
    "VecEnv": "batchrl.envs.jax_env",
    "make_vec": "batchrl.envs.jax_env",
    "simulate": "batchrl.simulation",
    "EnvSpec": "batchrl.specs",
    "Model": "batchrl.agents.core",
    "Agent": "batchrl.agent",
    "Transition": "batchrl.agents.core",
    "Runner": "batchrl.execution.runner",
    "ThreadedRunner": "batchrl.execution.threaded",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str):
  module = _LAZY.get(name)
  if module is None:
    raise AttributeError(f"module 'batchrl' has no attribute {name!r}")
  value = getattr(importlib.import_module(module), name)
  globals()[name] = value
  return value


def __dir__():
  return __all__
