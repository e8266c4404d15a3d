"""Environments: the TensorForce interface, the Gymnasium adapter, wrappers and a checker.

Importing this package stays light (gymnasium and numpy, no jax): ``ExternalProcess``,
``BatchEnv``, ``InGraphBatchEnv`` and ``PoolEnv`` are imported from their modules on first access.
"""
from __future__ import annotations

import importlib

from batchrl.envs.checker import EnvCheckError, check_env
from batchrl.envs.core import Environment, GymEnvironment, make, make_gym
from batchrl.envs.wrappers import (
  ActionRepeat,
  AutoReset,
  CacheSpaces,
  ClipAction,
  ConvertTo32Bit,
  FrameDelta,
  FrameHistory,
  Guard,
  GuardError,
  GuardWarning,
  LimitDuration,
  RandomStart,
  RangeNormalize,
  Wrapper,
  batch_ppo_stack,
)
from batchrl.errors import did_you_mean

_LAZY = {
  "ExternalProcess": "batchrl.envs.process",
  "BatchEnv": "batchrl.envs.batch",
  "InGraphBatchEnv": "batchrl.envs.ingraph",
  "PoolEnv": "batchrl.envs.pool",
}

__all__ = [
  "ActionRepeat", "AutoReset", "CacheSpaces", "ClipAction", "ConvertTo32Bit", "EnvCheckError",
  "Environment", "FrameDelta", "FrameHistory", "Guard", "GuardError", "GuardWarning",
  "GymEnvironment", "LimitDuration", "RandomStart", "RangeNormalize", "Wrapper",
  "batch_ppo_stack", "check_env", "make", "make_gym", *_LAZY,
]


def __getattr__(name: str):
  # Heavy modules (multiprocessing, jax) load only when their class is first asked for.
  if name in _LAZY:
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
  raise AttributeError(f"module 'batchrl.envs' has no attribute {name!r}"
                       f"{did_you_mean(name, __all__)}")


def __dir__() -> list[str]:
  return sorted(set(globals()) | set(_LAZY))
