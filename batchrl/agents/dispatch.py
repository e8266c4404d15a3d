"""Where ``batchrl.Agent``'s compiled calls run: inline on the calling thread, or handed to
JAX's CPU async dispatch (``prefer_inline_dispatch``)."""
from __future__ import annotations

import os

import jax

from batchrl import jax_internals

ASYNC_DISPATCH_ENV = "BATCHRL_ASYNC_DISPATCH"  # "1": leave JAX's CPU async dispatch on


def prefer_inline_dispatch() -> None:
  """Turns JAX's CPU async dispatch off, unless the user chose (``BATCHRL_ASYNC_DISPATCH=1``
  or ``JAX_CPU_ENABLE_ASYNC_DISPATCH``) or the CPU backend already exists.

  With async dispatch each compiled call is handed to a JAX thread and the caller waits for
  it: for an act that computes for a few microseconds that hand-over is most of the cost
  (measured on 2 cores: act + observe ~60 µs of CPU inline, ~90 µs of CPU and several
  times the wall time async). Large compiled programs (the fused training loops) run as
  fast either way. JAX reads the setting when it creates the CPU backend, once per process,
  so it is left alone when the backend exists.
  """
  chosen = "JAX_CPU_ENABLE_ASYNC_DISPATCH" in os.environ
  if chosen or os.environ.get(ASYNC_DISPATCH_ENV) == "1":
    return
  # unknown (None): the update below changes nothing already running
  if not jax_internals.backends_started():
    jax.config.update("jax_cpu_enable_async_dispatch", False)
