"""A replay run keeps its replay memory in its newest checkpoint only: older ones hold
everything else and say so in their manifest; resuming from the newest is exact, from an
older one (the newest damaged) it warns and goes on with an empty memory."""
from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import checkpoint, configs, experiment
from batchrl.checkpoint import NEWEST_ONLY_FILE, CheckpointError, CheckpointWarning
from batchrl.memories import MemoryState, TransitionItem, make_memory
from batchrl.simulation import init as init_simulation
from batchrl.train import fused
from batchrl.train.build import build_env, build_model
from batchrl.train.local import LocalTrainer
from conftest import leaves

# a tiny Double DQN on gymnax CartPole: 4 envs x update_frequency 32 = 128 steps an
# iteration; the memory (4096 transitions) is most of a checkpoint, as in a real run
TINY_DQN = ["num_envs=4", "steps=1024", "report_every=128", "eval_every=1024",
            "checkpoint_every=128", "keep_checkpoints=3", "memory_capacity=4096",
            "hidden_layers=[16]", "batch_size=16", "first_update=64", "repeat_update=2"]


def _exp():
  return configs.apply_overrides(configs.get("dqn_cartpole_fused"), TINY_DQN)


def _manifest(path: Path) -> dict:
  return json.loads((path / checkpoint.MANIFEST_FILE).read_text())


def _bytes(path: Path) -> int:
  return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def _assert_equal(a, b):
  for x, y in zip(leaves(a), leaves(b), strict=True):
    np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory):
  """Five checkpoints of one tiny DQN run (keep 3), one iteration apart."""
  run_dir = tmp_path_factory.mktemp("runs") / "dqn"
  trainer = LocalTrainer(_exp(), run_dir)
  for iteration in range(1, 6):
    trainer.train_phase(1)
    trainer.iteration = iteration
    trainer.save()
  return trainer


# ----------------------------------------------------------------------------- run level


@pytest.mark.gymnax
def test_only_the_newest_run_checkpoint_holds_the_replay_memory(replay_run):
  saved = checkpoint.list_checkpoints(replay_run.run_dir / "checkpoints")
  assert [c.step for c in saved] == [384, 512, 640]
  *older, newest = saved
  memory = _manifest(newest.path)["newest_only"]
  assert memory and all(".agent_state.memory." in name for name in memory)
  assert (newest.path / NEWEST_ONLY_FILE).is_file()
  for ckpt in older:
    manifest = _manifest(ckpt.path)
    assert not (ckpt.path / NEWEST_ONLY_FILE).exists()
    assert manifest["dropped"] == memory and manifest["dropped_by_step"] > ckpt.step
    assert NEWEST_ONLY_FILE not in manifest["files"]
    # the memory is most of a checkpoint, even as its written 160 of 1024 rows
    assert _bytes(ckpt.path) * 3 < _bytes(newest.path)
  # the memory file holds the memory and nothing else: params stay in every checkpoint
  assert any(".agent_state.params" in name for name in _manifest(older[0].path)["leaves"])
  assert not any(".agent_state.params" in name for name in memory)


@pytest.mark.gymnax
def test_resuming_from_the_newest_checkpoint_is_exact(replay_run):
  resumed = LocalTrainer(_exp(), replay_run.run_dir)
  with warnings.catch_warnings():
    warnings.simplefilter("error", CheckpointWarning)
    assert resumed.restore() and resumed.iteration == 5
  filled = int(replay_run.sim.agent_state.memory.filled)
  assert filled > 0 and int(resumed.sim.agent_state.memory.filled) == filled
  _assert_equal(resumed.sim, replay_run.sim)
  a, _ = replay_run.run_chunk(replay_run.sim, 2)
  b, _ = resumed.run_chunk(resumed.sim, 2)
  _assert_equal(a, b)


@pytest.mark.gymnax
def test_resuming_from_an_older_checkpoint_warns_and_goes_on_with_an_empty_memory(
    replay_run, tmp_path, caplog):
  """The newest checkpoint is damaged: the previous one, without memory, is restored."""
  run_dir = tmp_path / "dqn"
  (run_dir / "checkpoints").mkdir(parents=True)
  for ckpt in checkpoint.list_checkpoints(replay_run.run_dir / "checkpoints"):
    _copy(ckpt.path, run_dir / "checkpoints" / ckpt.path.name)
  newest = checkpoint.list_checkpoints(run_dir / "checkpoints")[-1].path
  (newest / checkpoint.STATE_FILE).write_bytes(b"damaged")
  trainer = LocalTrainer(_exp(), run_dir)
  fresh = trainer.sim.agent_state.memory
  with pytest.warns(CheckpointWarning) as record:
    assert trainer.restore() and trainer.iteration == 4
  messages = [str(r.message) for r in record]
  assert any("unusable" in m for m in messages)
  assert any("checkpoint 512" in m and "holds no replay memory" in m
             and "resuming with an empty memory" in m for m in messages)
  assert any("holds no replay memory" in r.getMessage() and r.levelname == "WARNING"
             for r in caplog.records)
  state = trainer.sim.agent_state
  _assert_equal(state.memory, fresh)  # fill counters included: head 0, filled 0
  assert int(state.memory.filled) == 0 and int(state.memory.head) == 0
  assert int(state.num_steps) == 512 and int(state.num_updates) > 0  # the rest is restored
  saved = experiment.restore_sim(run_dir / "checkpoints", trainer.sim, trainer.agent,
                                 step=512)[0].agent_state
  _assert_equal(saved.params, state.params)
  trainer.train_phase(2)  # learning waits for a batch, then goes on
  state = trainer.sim.agent_state
  assert int(state.memory.filled) == 64 and int(state.num_updates) > int(saved.num_updates)
  assert all(np.isfinite(x).all() for x in leaves(state.params))


@pytest.mark.gymnax
def test_the_newest_checkpoint_stores_the_filled_part_of_the_memory(replay_run):
  """640 steps of 4 envs wrote 160 of the memory's 1024 rows: only those are stored (the
  exact resume above restores the others, zeros, from the manifest's fill)."""
  newest = checkpoint.list_checkpoints(replay_run.run_dir / "checkpoints")[-1]
  manifest = _manifest(newest.path)
  memory = "state.agent_state.memory.items."
  big = {name[len(memory):]: entry for name, entry in manifest["leaves"].items()
         if name.startswith(memory)  # smaller leaves are stored whole
         and np.prod(entry["shape"]) * np.dtype(entry["dtype"]).itemsize >= 1 << 16}
  assert set(big) == {"obs", "next_obs"}
  assert manifest["format_version"] == 3 and newest.step == 640
  for entry in big.values():
    assert entry["shape"][0] == 1024 and entry["stored_shape"][0] <= 640 // 4
    assert entry["stored_shape"][1:] == entry["shape"][1:]


@pytest.mark.gymnax
def test_a_checkpoint_holding_the_whole_memory_still_loads(replay_run, tmp_path, monkeypatch):
  """Checkpoints written before the filled part was stored alone hold every row: they
  restore exactly as they were written."""
  template = LocalTrainer(_exp(), tmp_path / "fresh").sim
  sim, _ = experiment.restore_sim(replay_run.run_dir / "checkpoints", template,
                                  replay_run.agent)
  assert int(sim.agent_state.memory.filled) == 640 // 4
  with monkeypatch.context() as patch:  # what the writer did then: every leaf whole
    patch.setattr(checkpoint, "_PART_MIN_BYTES", 1 << 62)
    path = experiment.save_sim(tmp_path / "old", 640, sim, replay_run.agent)
  manifest = _manifest(path)
  assert manifest["format_version"] == 2
  assert not any("stored_shape" in entry for entry in manifest["leaves"].values())
  restored, _ = experiment.restore_sim(tmp_path / "old", template, replay_run.agent)
  _assert_equal(restored, sim)


def _copy(src: Path, dst: Path) -> None:
  dst.mkdir()
  for f in src.iterdir():
    (dst / f.name).write_bytes(f.read_bytes())


@pytest.mark.gymnax
def test_dqfd_checkpoints_drop_the_online_memory_and_keep_the_demonstrations(tmp_path):
  """DQFD's memory is nested (``dqn.memory``); its demonstrations stay in every checkpoint."""
  exp = configs.apply_overrides(configs.get("dqfd_cartpole"), [
      "num_envs=2", "pretrain_steps=0", "memory_capacity=64", "demo_memory_capacity=64",
      "hidden_layers=[8]"])
  env, agent = build_env(exp.run), build_model(exp)
  sim = fused.init_sim(env, agent, jax.random.key(0))
  assert int(sim.agent_state.demo.filled) > 0  # the controller's demonstrations, at init
  for step in (1, 2):
    experiment.save_sim(tmp_path, step, sim, agent, keep=2)
  memory = _manifest(tmp_path / "ckpt-000000000002")["newest_only"]
  assert memory and all(".agent_state.dqn.memory." in name for name in memory)
  assert _manifest(tmp_path / "ckpt-000000000001")["dropped"] == memory
  empty = sim._replace(agent_state=sim.agent_state._replace(demo=jax.tree.map(
      jnp.zeros_like, sim.agent_state.demo)))
  restored, manifest = experiment.restore_sim(tmp_path, empty, agent, step=1)
  assert manifest["dropped"] == memory
  _assert_equal(restored.agent_state.demo, sim.agent_state.demo)  # from the checkpoint


def _memory_fields(state, prefix: str = "") -> set[str]:
  """Dotted names of the ``MemoryState`` fields of a state of nested NamedTuples."""
  found = set()
  for name in getattr(state, "_fields", ()):
    value = getattr(state, name)
    if isinstance(value, MemoryState):
      found.add(prefix + name)
    else:
      found |= _memory_fields(value, f"{prefix}{name}.")
  return found


@pytest.mark.gymnax
def test_every_replay_agent_names_its_replay_memory():
  """``Model.memory`` names each replay memory of every family's state (the only one left
  out: DQFD's demonstrations, which every checkpoint keeps), and nothing else."""
  seen = set()
  for name in configs.names():
    exp = configs.get(name)
    if exp.run.backend != "gymnax" or exp.agent in seen:
      continue
    seen.add(exp.agent)
    if exp.agent == "dqfd":
      exp = configs.apply_overrides(exp, ["pretrain_steps=0"])
    env, model = build_env(exp.run), build_model(exp)
    sim = jax.eval_shape(functools.partial(init_simulation, env, model), jax.random.key(0))
    fields = _memory_fields(sim.agent_state) - ({"demo"} if exp.agent == "dqfd" else set())
    assert set(model.memory) == fields, exp.agent
  assert {"dqn", "dqfd", "naf", "ddpg", "td3", "sac", "ppo"} <= seen


# ---------------------------------------------------------------------------- file level


def _tree(step: int):
  return {"params": jnp.full((3,), step, jnp.float32),
          "memory": {"items": jnp.full((1000,), step, jnp.float32), "filled": jnp.int32(step)}}


MEMORY = frozenset({"state['memory']['items']", "state['memory']['filled']"})


def test_newest_only_leaves_live_in_the_newest_checkpoint_and_restore_from_the_template(
    tmp_path):
  for step in (1, 2, 3):
    checkpoint.save(tmp_path, step, _tree(step), newest_only=MEMORY, keep=None)
  first, second, third = checkpoint.list_checkpoints(tmp_path)
  assert sorted(p.name for p in third.path.iterdir()) == [
      checkpoint.MANIFEST_FILE, NEWEST_ONLY_FILE, checkpoint.STATE_FILE]
  for ckpt in (first, second):
    assert sorted(p.name for p in ckpt.path.iterdir()) == [checkpoint.MANIFEST_FILE,
                                                          checkpoint.STATE_FILE]
    assert _manifest(ckpt.path)["dropped"] == sorted(MEMORY)
  assert _manifest(first.path)["dropped_by_step"] == 2
  restored, manifest = checkpoint.restore(tmp_path, _tree(0))
  _assert_equal(restored, _tree(3))
  assert "dropped" not in manifest and manifest["format_version"] == 2
  restored, manifest = checkpoint.restore(tmp_path, _tree(0), step=1)
  expected = _tree(1)
  expected["memory"] = _tree(0)["memory"]
  _assert_equal(restored, expected)
  assert manifest["dropped"] == sorted(MEMORY)


def test_a_damaged_newest_only_file_makes_its_checkpoint_unusable(tmp_path):
  checkpoint.save(tmp_path, 1, _tree(1), newest_only=MEMORY)
  newest = checkpoint.save(tmp_path, 2, _tree(2), newest_only=MEMORY)
  data = bytearray((newest / NEWEST_ONLY_FILE).read_bytes())
  data[-1] ^= 0xFF
  (newest / NEWEST_ONLY_FILE).write_bytes(bytes(data))
  with pytest.warns(CheckpointWarning, match=f"{NEWEST_ONLY_FILE} SHA-256"):
    restored, manifest = checkpoint.restore(tmp_path, _tree(0))
  assert manifest["step"] == 1 and manifest["dropped"] == sorted(MEMORY)
  assert float(restored["params"][0]) == 1.0 and float(restored["memory"]["items"][0]) == 0.0


def test_a_drop_cut_short_is_finished_by_the_next_save(tmp_path):
  """A crash after the manifest was rewritten but before the file was removed leaves a
  whole checkpoint (its manifest no longer lists the file) and an orphan, removed later."""
  first = checkpoint.save(tmp_path, 1, _tree(1), newest_only=MEMORY)
  orphan = (first / NEWEST_ONLY_FILE).read_bytes()
  checkpoint.save(tmp_path, 2, _tree(2), newest_only=MEMORY)
  (first / NEWEST_ONLY_FILE).write_bytes(orphan)
  (first / ".manifest.json.abc.tmp").write_text("{half")
  restored, _ = checkpoint.restore(tmp_path, _tree(0), step=1)
  assert float(restored["memory"]["items"][0]) == 0.0
  checkpoint.save(tmp_path, 3, _tree(3), newest_only=MEMORY)
  assert sorted(p.name for p in first.iterdir()) == [checkpoint.MANIFEST_FILE,
                                                    checkpoint.STATE_FILE]


def test_a_later_checkpoint_keeps_its_file_when_an_earlier_step_is_saved(tmp_path):
  """A run that went back (its newest was damaged) and saves an earlier step does not
  take the later checkpoint's memory: that checkpoint stays as it was written."""
  later = checkpoint.save(tmp_path, 5, _tree(5), newest_only=MEMORY)
  checkpoint.save(tmp_path, 3, _tree(3), newest_only=MEMORY)
  assert (later / NEWEST_ONLY_FILE).is_file() and "dropped" not in _manifest(later)


def test_plain_checkpoints_keep_format_1_and_unknown_names_are_refused(tmp_path):
  path = checkpoint.save(tmp_path, 1, _tree(1))
  assert _manifest(path)["format_version"] == 1 and "newest_only" not in _manifest(path)
  with pytest.raises(CheckpointError, match=r"newest_only names leaves the state does not "
                     r"have: state\['nope'\]"):
    checkpoint.save(tmp_path, 2, _tree(2), newest_only={"state['nope']"})


# ------------------------------------------------------------- the filled part of a memory


def _memory_and_state(kind: str, rows_written: int):
  """A memory of 8192 items (2048 rows of 4), ``rows_written`` rows added, some priorities
  set from errors, as training leaves it."""
  memory = make_memory(kind, capacity=8192, width=4,
                       sequence_length=8 if kind == "sequential" else None)
  item = TransitionItem(jnp.zeros(4), jnp.int32(0), jnp.float32(0), jnp.bool_(False),
                        jnp.bool_(False), jnp.zeros(4))
  steps = jnp.arange(rows_written * 4, dtype=jnp.float32).reshape(rows_written, 4) + 1
  rows = TransitionItem(steps[..., None] * jnp.ones(4), (steps % 3).astype(jnp.int32),
                        steps / 7, steps % 11 == 0, steps % 13 == 0, steps[..., None] + 0.5)
  state = memory.add_rows(memory.init(item), rows)
  index = jnp.arange(0, min(rows_written * 4, 8192), 5, dtype=jnp.int32)
  state = memory.update_priorities(state, index, jnp.sin(index.astype(jnp.float32)))
  return memory, memory.init(item), state


@pytest.mark.parametrize("kind", ["replay", "sequential", "prioritized_replay",
                                  "naive_prioritized_replay"])
@pytest.mark.parametrize("rows_written", [100, 2048 + 37])  # part filled; full and wrapped
@pytest.mark.parametrize("seeds", [None, 2])
def test_a_memory_is_stored_as_its_filled_part_and_restored_bit_for_bit(
    tmp_path, kind, rows_written, seeds):
  memory, empty, state = _memory_and_state(kind, rows_written)
  if seeds:  # K runs stacked by vmap: the rows are the second axis
    state = jax.tree.map(lambda x: jnp.stack([x] * seeds), state)
    empty = jax.tree.map(lambda x: jnp.stack([x] * seeds), empty)
  path = checkpoint.save(tmp_path, 1, {"memory": state})
  entries = _manifest(path)["leaves"]
  items = {name: entry for name, entry in entries.items() if ".items." in name}
  rows = 1 if seeds else 0  # the axis of rows
  if rows_written < memory.rows:
    assert items["state['memory'].items.obs"]["stored_shape"][rows] == rows_written
    assert all(entry["stored_shape"][rows] <= rows_written for entry in items.values())
  else:  # every row holds a transition: all are stored (a flag that is False in the last
    # rows can still be cut there: its fill puts them back)
    assert "stored_shape" not in items["state['memory'].items.obs"]
  if kind == "prioritized_replay" and rows_written < memory.rows:
    assert entries["state['memory'].priorities.sums"]["stored_shape"][-1] < 2 * 8192
  restored, _ = checkpoint.restore(tmp_path, {"memory": empty})
  assert type(restored["memory"]) is type(state)
  _assert_same_bits(restored["memory"], state)


def _assert_same_bits(a, b):
  for x, y in zip(leaves(a), leaves(b), strict=True):
    assert x.dtype == y.dtype and x.shape == y.shape
    assert x.tobytes() == y.tobytes()


def test_a_leaf_is_cut_only_where_its_bits_equal_its_last_element(tmp_path):
  """-0.0 is not 0.0, a NaN is itself: what comes back has the bits that went in."""
  zeros = np.zeros((40_000,), np.float32)
  negative_tail = zeros.copy()
  negative_tail[-1] = -0.0
  nan_tail = zeros.copy()
  nan_tail[30_000:] = np.frombuffer(np.uint32(0x7FC01234).tobytes(), np.float32)[0]
  nan_tail[:5] = 3.0
  tree = {"negative": negative_tail, "nan": nan_tail, "empty": zeros}
  path = checkpoint.save(tmp_path, 1, tree)
  entries = _manifest(path)["leaves"]
  assert entries["state['negative']"]["stored_shape"] == [39_999]  # only -0.0 is -0.0
  assert entries["state['nan']"]["stored_shape"] == [30_000]
  assert entries["state['empty']"]["stored_shape"] == [0]
  restored, _ = checkpoint.restore(tmp_path, jax.tree.map(np.zeros_like, tree))
  _assert_same_bits(restored, tree)


def test_a_part_that_does_not_fit_its_entry_makes_the_checkpoint_unusable(tmp_path):
  checkpoint.save(tmp_path, 1, {"memory": np.zeros((40_000,), np.float32)})
  tree = {"memory": np.concatenate([np.ones(10, np.float32), np.zeros(39_990, np.float32)])}
  newest = checkpoint.save(tmp_path, 2, tree)
  manifest = _manifest(newest)
  manifest["leaves"]["state['memory']"]["stored_shape"] = [20]  # 10 are stored
  body = {k: v for k, v in manifest.items() if k != "checksum"}
  manifest["checksum"] = checkpoint._checksum(body)
  (newest / checkpoint.MANIFEST_FILE).write_text(json.dumps(manifest))
  with pytest.warns(CheckpointWarning, match="stored part of shape"):
    restored, manifest = checkpoint.restore(tmp_path, tree)
  assert manifest["step"] == 1 and not restored["memory"].any()
