"""Checkpoints: exact round trips, pruning, verification and loud fallback, atomic writes."""
from __future__ import annotations

import json
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from batchrl import checkpoint
from batchrl.checkpoint import CheckpointError, CheckpointWarning, NoCheckpointError
from batchrl.configclass import configclass, param


class Normalizer(NamedTuple):
  mean: jax.Array
  var: jax.Array
  count: jax.Array


@configclass
class SmallConfig:
  lr: float = param(1e-3, "Learning rate.")
  layers: tuple[int, ...] = param((4, 4), "Hidden sizes.")


def _state(seed: int = 0):
  """A nested training-state pytree: params, adam state, typed and raw keys, a normalizer."""
  key = jax.random.key(seed)
  params = {"policy": {"w": jax.random.normal(key, (3, 4)), "b": jnp.zeros(4)},
            "value": {"w": jnp.full((4, 1), seed, jnp.float32)}}
  tx = optax.adam(1e-3)
  opt_state = tx.init(params)
  grads = jax.tree.map(jnp.ones_like, params)
  _, opt_state = tx.update(grads, opt_state, params)
  return {
      "params": params, "opt_state": opt_state, "key": jax.random.fold_in(key, 7),
      "raw_key": jax.random.PRNGKey(seed + 1),
      "norm": Normalizer(jnp.arange(3.0), jnp.ones(3), jnp.int32(5 + seed)),
      "step": jnp.int32(seed), "counts": np.arange(3, dtype=np.int64), "beta": 1.5,
      "empty": None, "flags": (jnp.array([True, False]),),
  }


def _assert_identical(a, b):
  leaves_a, tree_a = jax.tree_util.tree_flatten(a)
  leaves_b, tree_b = jax.tree_util.tree_flatten(b)
  assert tree_a == tree_b
  for x, y in zip(leaves_a, leaves_b):
    if jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key):
      assert jax.dtypes.issubdtype(y.dtype, jax.dtypes.prng_key)
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    assert type(x) is type(y) or isinstance(x, jax.Array) and isinstance(y, jax.Array)
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert np.asarray(x).dtype == np.asarray(y).dtype


def test_round_trip_exact(tmp_path):
  state = _state(3)
  path = checkpoint.save(tmp_path, 10, state, config=SmallConfig(lr=0.5),
                         counters={"env_steps": np.int64(10), "episodes": 2})
  assert path.name == "ckpt-000000000010"
  assert sorted(p.name for p in path.iterdir()) == ["manifest.json", "state.msgpack"]
  restored, manifest = checkpoint.restore(tmp_path, _state(0))
  _assert_identical(restored, state)
  assert manifest["step"] == 10
  assert manifest["config"] == {"lr": 0.5, "layers": [4, 4]}
  assert manifest["config_class"].endswith("SmallConfig")
  assert manifest["counters"] == {"env_steps": 10, "episodes": 2}
  assert set(manifest["versions"]) >= {"batchrl", "jax", "flax", "numpy", "python"}
  assert manifest["files"]["state.msgpack"]["size"] == (path / "state.msgpack").stat().st_size
  assert len(manifest["files"]["state.msgpack"]["sha256"]) == 64
  assert manifest["leaves"]["state['key']"]["key_impl"] == "threefry2x32"


def test_restored_key_continues_the_same_stream(tmp_path):
  state = _state(1)
  checkpoint.save(tmp_path, 1, state)
  restored, _ = checkpoint.restore(tmp_path, _state(0))
  np.testing.assert_array_equal(jax.random.normal(restored["key"], (5,)),
                                jax.random.normal(state["key"], (5,)))


def test_abstract_template(tmp_path):
  state = _state(2)
  checkpoint.save(tmp_path, 5, state)
  template = jax.eval_shape(lambda: _state(0))
  template = dict(template, beta=0.0, counts=np.zeros(3, np.int64))  # host leaves stay concrete
  restored, _ = checkpoint.restore(tmp_path, template)
  _assert_identical(restored, state)


def test_no_pickle_in_files(tmp_path):
  path = checkpoint.save(tmp_path, 1, _state())
  json.loads((path / "manifest.json").read_text())  # plain JSON
  assert not (path / "state.msgpack").read_bytes().startswith(b"\x80")  # not a pickle stream


def test_keep_prunes_oldest(tmp_path):
  for step in range(0, 70, 10):
    checkpoint.save(tmp_path, step, {"x": jnp.float32(step)}, keep=3)
  assert [c.step for c in checkpoint.list_checkpoints(tmp_path)] == [40, 50, 60]
  assert checkpoint.latest_step(tmp_path) == 60
  restored, _ = checkpoint.restore(tmp_path, {"x": jnp.float32(0)}, step=50)
  assert float(restored["x"]) == 50.0


def test_same_step_is_replaced(tmp_path):
  checkpoint.save(tmp_path, 4, {"x": jnp.float32(1)})
  checkpoint.save(tmp_path, 4, {"x": jnp.float32(2)})
  assert [c.step for c in checkpoint.list_checkpoints(tmp_path)] == [4]
  assert float(checkpoint.restore(tmp_path, {"x": jnp.float32(0)})[0]["x"]) == 2.0
  assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000000004"]


def _flip_bytes(path):
  data = bytearray((path / "state.msgpack").read_bytes())
  data[len(data) // 2] ^= 0xFF
  (path / "state.msgpack").write_bytes(bytes(data))


def _truncate(path):
  data = (path / "state.msgpack").read_bytes()
  (path / "state.msgpack").write_bytes(data[: len(data) // 2])


def _delete_manifest(path):
  (path / "manifest.json").unlink()


def _delete_state(path):
  (path / "state.msgpack").unlink()


def _garble_manifest(path):
  text = (path / "manifest.json").read_text()
  (path / "manifest.json").write_text(text.replace('"step": 2', '"step": 3'))


@pytest.mark.parametrize("damage, bad_file", [
    (_flip_bytes, "state.msgpack"), (_truncate, "state.msgpack"),
    (_delete_manifest, "manifest.json"), (_delete_state, "state.msgpack"),
    (_garble_manifest, "manifest.json"),
])
def test_damaged_newest_falls_back_loudly(tmp_path, caplog, damage, bad_file):
  checkpoint.save(tmp_path, 1, {"x": jnp.float32(1)})
  newest = checkpoint.save(tmp_path, 2, {"x": jnp.float32(2)})
  damage(newest)
  with pytest.warns(CheckpointWarning) as record:
    restored, manifest = checkpoint.restore(tmp_path, {"x": jnp.float32(0)})
  assert float(restored["x"]) == 1.0 and manifest["step"] == 1
  message = str(record[0].message)
  assert newest.name in message and bad_file in message
  assert any(bad_file in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)


def test_all_damaged_raises_with_reasons(tmp_path):
  first = checkpoint.save(tmp_path, 1, {"x": jnp.float32(1)})
  second = checkpoint.save(tmp_path, 2, {"x": jnp.float32(2)})
  _truncate(first)
  _delete_manifest(second)
  with pytest.warns(CheckpointWarning), pytest.raises(CheckpointError) as info:
    checkpoint.restore(tmp_path, {"x": jnp.float32(0)})
  message = str(info.value)
  assert "ckpt-000000000001: state.msgpack" in message
  assert "ckpt-000000000002: manifest.json is missing" in message


def test_explicit_damaged_step_raises(tmp_path):
  checkpoint.save(tmp_path, 1, {"x": jnp.float32(1)})
  _flip_bytes(checkpoint.save(tmp_path, 2, {"x": jnp.float32(2)}))
  with pytest.raises(CheckpointError, match="state.msgpack SHA-256"):
    checkpoint.restore(tmp_path, {"x": jnp.float32(0)}, step=2)
  with pytest.raises(NoCheckpointError, match="steps: 1, 2"):
    checkpoint.restore(tmp_path, {"x": jnp.float32(0)}, step=7)


def test_no_checkpoints(tmp_path):
  with pytest.raises(NoCheckpointError, match="no checkpoints in") as info:
    checkpoint.restore(tmp_path / "missing", {"x": jnp.float32(0)})
  assert isinstance(info.value, FileNotFoundError)
  assert checkpoint.latest_step(tmp_path) is None and checkpoint.list_checkpoints(tmp_path) == []


def test_leftover_tmp_dir_ignored_then_cleaned(tmp_path):
  checkpoint.save(tmp_path, 1, {"x": jnp.float32(1)})
  leftover = tmp_path / ".tmp-ckpt-000000000002-123-deadbeef"
  leftover.mkdir()
  (leftover / "state.msgpack").write_bytes(b"half")
  assert checkpoint.latest_step(tmp_path) == 1
  assert float(checkpoint.restore(tmp_path, {"x": jnp.float32(0)})[0]["x"]) == 1.0
  checkpoint.save(tmp_path, 3, {"x": jnp.float32(3)})
  assert not leftover.exists()


def test_template_mismatch_names_leaf(tmp_path):
  checkpoint.save(tmp_path, 1, {"params": {"w": jnp.zeros((3, 4))}, "n": jnp.int32(0)})
  with pytest.raises(CheckpointError) as info:
    checkpoint.restore(tmp_path, {"params": {"w": jnp.zeros((3, 5))}, "n": jnp.int32(0)})
  assert "state['params']['w']" in str(info.value) and "(3, 5)" in str(info.value)
  with pytest.raises(CheckpointError, match=r"state\['n'\]: template has shape \(\) dtype float32"):
    checkpoint.restore(tmp_path, {"params": {"w": jnp.zeros((3, 4))}, "n": jnp.float32(0)})
  with pytest.raises(CheckpointError, match=r"state\['extra'\]: in the template but not"):
    checkpoint.restore(tmp_path, {"params": {"w": jnp.zeros((3, 4))}, "n": jnp.int32(0),
                                  "extra": jnp.zeros(2)})


def test_bad_arguments(tmp_path):
  with pytest.raises(CheckpointError, match="non-negative int"):
    checkpoint.save(tmp_path, -1, {"x": jnp.zeros(1)})
  with pytest.raises(CheckpointError, match="keep must be"):
    checkpoint.save(tmp_path, 1, {"x": jnp.zeros(1)}, keep=0)
  with pytest.raises(CheckpointError, match=r"leaf state\['f'\] is a str"):
    checkpoint.save(tmp_path, 1, {"f": "text"})
  assert list(tmp_path.iterdir()) == []


def test_restore_keeps_weak_types(tmp_path):
  """A weak-typed leaf (a Python number turned array) comes back weak, so a restored state
  has the signature of the live one and reuses its compiled programs."""
  state = {"weak": jnp.asarray(0.0) + 1.0, "strong": jnp.zeros(3, jnp.float32)}
  assert state["weak"].weak_type
  checkpoint.save(tmp_path, 1, state)
  restored, _ = checkpoint.restore(tmp_path, state)
  assert restored["weak"].weak_type and not restored["strong"].weak_type
  np.testing.assert_array_equal(restored["weak"], state["weak"])
