"""How ``batchrl.Agent``'s programs are compiled and run: their calls inline on the calling
thread or handed to JAX's CPU async dispatch (``prefer_inline_dispatch``); compiled programs
kept on disk for the next process (``prefer_compilation_cache``)."""
from __future__ import annotations

import os

import jax

from batchrl import compilation_cache, jax_internals

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


def prefer_compilation_cache() -> None:
  """Keeps compiled programs in JAX's persistent compilation cache, as ``batchrl train``
  does (``batchrl.compilation_cache``: ``~/.cache/batchrl/xla``; ``BATCHRL_COMPILATION_CACHE=0``
  keeps it off, ``BATCHRL_CACHE_DIR`` moves it), unless a cache directory is set already
  (the user's choice, or an earlier agent's).

  An agent's first programs take seconds to compile (SAC on Pendulum: its initial state
  about 3 s, the act that stores and updates about 5 s, on 2 lightly loaded CPU cores); a
  later process running the same agent reads them back. JAX reads the setting before its
  first compilation in a process: set after that, it changes nothing in that process.
  """
  if not jax.config.jax_compilation_cache_dir:
    compilation_cache.enable_from_environment()
