"""JAX's persistent compilation cache, as batchrl's commands and worker processes use it.

The commands turn it on (``enable_from_environment``) so that re-runs and resumes skip most
of XLA's compile time. A worker process (a Ray runner, a trial worker) starts with JAX's
defaults, so the driver hands its settings (``settings()``) to each worker, which applies
them (``apply``) before it compiles anything: the workers then share the driver's cache.
"""
from __future__ import annotations

import os

import jax

from batchrl import measured

Settings = tuple  # (cache dir or None, minimum compile seconds worth caching)



def enable_from_environment() -> None:
  """Turns the cache on in ``~/.cache/batchrl/xla``; ``BATCHRL_COMPILATION_CACHE=0`` keeps it
  off, ``BATCHRL_CACHE_DIR`` moves it."""
  if os.environ.get("BATCHRL_COMPILATION_CACHE", "1") == "0":
    return
  default = os.path.join(os.path.expanduser("~"), ".cache", "batchrl", "xla")
  apply((os.environ.get("BATCHRL_CACHE_DIR", default), measured.MIN_COMPILE_SECONDS))


def settings() -> Settings:
  """This process's cache settings, to hand to its workers."""
  return (jax.config.jax_compilation_cache_dir,
          float(jax.config.jax_persistent_cache_min_compile_time_secs))


def apply(cache: Settings) -> None:
  """Uses the cache ``settings()`` described (nothing when it had no directory)."""
  cache_dir, min_seconds = cache
  if cache_dir:
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_seconds)
