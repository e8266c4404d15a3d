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
from batchrl.memories import MemoryState
from batchrl.simulation import init as init_simulation
from batchrl.train import fused
from batchrl.train.build import build_env, build_model
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
  trainer = experiment.Trainer(_exp(), run_dir)
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
    assert _bytes(ckpt.path) * 5 < _bytes(newest.path)  # the memory is most of a checkpoint
  # the memory file holds the memory and nothing else: params stay in every checkpoint
  assert any(".agent_state.params" in name for name in _manifest(older[0].path)["leaves"])
  assert not any(".agent_state.params" in name for name in memory)


@pytest.mark.gymnax
def test_resuming_from_the_newest_checkpoint_is_exact(replay_run):
  resumed = experiment.Trainer(_exp(), replay_run.run_dir)
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
  trainer = experiment.Trainer(_exp(), run_dir)
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
