"""The persistent compilation cache: turned on from the environment, handed to workers."""
from __future__ import annotations

import jax
import pytest

from batchrl import compilation_cache, measured


@pytest.fixture
def restore_jax_cache():
  saved = compilation_cache.settings()
  yield
  jax.config.update("jax_compilation_cache_dir", saved[0])
  jax.config.update("jax_persistent_cache_min_compile_time_secs", saved[1])


def test_the_environment_chooses_the_directory(tmp_path, monkeypatch, restore_jax_cache):
  monkeypatch.setenv("BATCHRL_CACHE_DIR", str(tmp_path / "xla"))
  monkeypatch.delenv("BATCHRL_COMPILATION_CACHE", raising=False)
  compilation_cache.enable_from_environment()
  assert compilation_cache.settings() == (str(tmp_path / "xla"),
                                          measured.MIN_COMPILE_SECONDS)


def test_zero_keeps_it_off(tmp_path, monkeypatch, restore_jax_cache):
  before = compilation_cache.settings()
  monkeypatch.setenv("BATCHRL_COMPILATION_CACHE", "0")
  monkeypatch.setenv("BATCHRL_CACHE_DIR", str(tmp_path / "xla"))
  compilation_cache.enable_from_environment()
  assert compilation_cache.settings() == before


def test_a_worker_applies_the_drivers_settings(tmp_path, restore_jax_cache):
  compilation_cache.apply((str(tmp_path), 2.5))
  assert compilation_cache.settings() == (str(tmp_path), 2.5)
  compilation_cache.apply((None, 0.0))  # a driver without a cache changes nothing
  assert compilation_cache.settings() == (str(tmp_path), 2.5)
