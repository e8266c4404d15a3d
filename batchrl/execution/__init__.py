"""Runners that drive a ``batchrl.Agent`` through environments (TensorForce style).

- ``Runner``: one environment in a plain loop, or several stepped as one ``BatchEnv`` with one
  batched act/observe per step (the fastest way to feed simulators).
- ``ThreadedRunner``: one thread per environment, for environments that block on the outside
  world (real time, remote simulators).
"""
from __future__ import annotations

from batchrl.execution.runner import Runner, RunOptions
from batchrl.execution.threaded import ThreadedRunner

__all__ = ["Runner", "RunOptions", "ThreadedRunner"]
