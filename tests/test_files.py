"""The one atomic writer: whole files or the old ones, never half, no temporary left."""
from __future__ import annotations

import os

import pytest

from batchrl import files


def test_write_atomic_writes_text_and_bytes_and_makes_parents(tmp_path):
  path = files.write_atomic(tmp_path / "a" / "b" / "config.yaml", "lr: 0.1\n")
  assert path.read_text(encoding="utf-8") == "lr: 0.1\n"
  files.write_atomic(path, b"\x00\x01")
  assert path.read_bytes() == b"\x00\x01"
  assert [p.name for p in path.parent.iterdir()] == ["config.yaml"]  # no temporary left


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
  path = files.write_atomic(tmp_path / "spec.json", "old")

  def crash(*_):
    raise OSError("disk full")
  monkeypatch.setattr(os, "replace", crash)
  with pytest.raises(OSError, match="disk full"):
    files.write_atomic(path, "new")
  assert path.read_text() == "old"
  assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]
