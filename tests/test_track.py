"""`batchrl train --track`: the config and every TensorBoard metric, on the same steps, to
Weights & Biases (offline here: the run is read back from the file `wandb sync` uploads);
without wandb installed, a one-line error before anything runs."""
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from batchrl.cli import main
from batchrl.logging import RunLogger, read_metrics

wandb = pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2  # noqa: E402  (after the importorskip above: wandb's own record type)

TINY = ["steps=1024", "report_every=512", "eval_every=1024", "checkpoint_every=1024",
        "num_envs=8", "rollout_length=64", "update_epochs=1", "eval_steps=50",
        "batch_size=256"]


@pytest.fixture
def offline(tmp_path, monkeypatch) -> Path:
  """W&B offline, quiet, writing under a test folder (returned)."""
  folder = tmp_path / "wandb-dir"
  folder.mkdir()
  for name, value in (("WANDB_MODE", "offline"), ("WANDB_DIR", str(folder)),
                      ("WANDB_SILENT", "true"), ("WANDB_CONFIG_DIR", str(folder)),
                      ("WANDB_CACHE_DIR", str(folder))):
    monkeypatch.setenv(name, value)
  monkeypatch.delenv("WANDB_PROJECT", raising=False)
  return folder


def _records(path: Path):
  """The records of a ``.wandb`` file: W&B's header, then LevelDB-log-style chunks (a
  7-byte header each: CRC, length, type) in 32 KiB blocks, each record a protobuf."""
  data, block = path.read_bytes(), 32768
  assert data[:4] == b":W&B", path
  pos, pending = 7, b""
  while pos + 7 <= len(data):
    if block - pos % block < 7:  # a block's tail too short for a header is padding
      pos += block - pos % block
      continue
    _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
    if kind == 0:
      break
    pending += data[pos + 7:pos + 7 + length]
    pos += 7 + length
    if kind in (1, 4):  # a full record, or the last chunk of one
      record = wandb_internal_pb2.Record()
      record.ParseFromString(pending)
      pending = b""
      yield record


def _row(items) -> dict:
  """A history row as logged: a value's key is ``key``, or its ``nested_key`` path (a
  histogram is ``{"_type": "histogram", "values": ..., "bins": ...}``)."""
  row = {}
  for item in items:
    *outer, last = list(item.nested_key) or [item.key]
    place = row
    for key in outer:
      place = place.setdefault(key, {})
    place[last] = json.loads(item.value_json)
  return row


def _offline_run(folder: Path):
  """(history rows, config) of the one offline run under ``folder``."""
  (path,) = folder.glob("wandb/offline-run-*/run-*.wandb")
  rows, config = [], {}
  for record in _records(path):
    kind = record.WhichOneof("record_type")
    if kind == "history":
      rows.append(_row(record.history.item))
    elif kind == "run":
      config.update({item.key: json.loads(item.value_json)
                     for item in record.run.config.update})
    elif kind == "config":
      config.update({item.key: json.loads(item.value_json) for item in record.config.update})
  return rows, config


@pytest.mark.gymnax
def test_a_tracked_run_logs_its_config_and_every_metric_on_the_same_steps(offline, tmp_path):
  logdir = tmp_path / "runs"
  argv = ["train", "--config", "cartpole_fused", "--logdir", str(logdir), "--timestamp", "T",
          "--no-progress", "--track", *[a for item in TINY for a in ("--set", item)]]
  assert main(argv) == 0
  run_dir = logdir / "T-cartpole_fused"
  assert list(run_dir.glob("events.out.tfevents.*"))  # TensorBoard as always
  rows, config = _offline_run(offline)
  run, ppo = (config[k].get("value", config[k]) for k in ("run", "ppo"))  # {"value": ..} or not
  assert config["config"] in ("cartpole_fused", {"value": "cartpole_fused"})
  assert run["steps"] == 1024 and run["env"] == "CartPole-v1" and ppo["update_epochs"] == 1
  tracked = {(row["global_step"], key): value for row in rows for key, value in row.items()
             if not key.startswith("_") and key != "global_step"}
  for record in read_metrics(run_dir):  # every reported number, at its step
    for key, value in record.items():
      if key not in ("step", "phase", "wall_time") and isinstance(value, float):
        assert tracked[(record["step"], f"{record['phase']}/{key}")] == pytest.approx(value)
  assert {step for step, _ in tracked} == {512, 1024}
  assert any(key.startswith("train/") and isinstance(value, dict) and
             value.get("_type") == "histogram" for (_, key), value in tracked.items())
  assert (run_dir / "wandb-run-id").read_text().strip() in str(next(offline.glob(
      "wandb/offline-run-*")))


def test_the_logger_sends_what_tensorboard_gets_even_without_tensorboard(offline, tmp_path):
  from batchrl.train import track
  sent = []

  class Run:  # what Tracker needs of a W&B run
    log = staticmethod(sent.append)
    finish = staticmethod(lambda: sent.append("finished"))

  with RunLogger(tmp_path, use_tensorboard=False,
                 tracker=track.Tracker(Run(), histogram=lambda a: ("hist", list(a)))) as logger:
    logger.scalars("train", 10, {"loss": np.float32(0.5), "episodes": 3})
    logger.texts("train", 10, {"restart_reasons": "runner 1: hung"})
    with pytest.warns(RuntimeWarning, match="left out 1 non-finite"):
      logger.histograms("train", 10, {"weights": np.array([1.0, np.nan, 2.0])})
    logger.scalars("eval", 20, {"mean_score": 7.0})
  assert sent == [{"train/loss": 0.5, "train/episodes": 3.0,
                   "train/restart_reasons": "runner 1: hung",
                   "train/weights": ("hist", [1.0, 2.0]), "global_step": 10},
                  {"eval/mean_score": 7.0, "global_step": 20}, "finished"]


@pytest.mark.parametrize("flag", [["--track"], ["--set", "track=true"]])
def test_track_without_wandb_is_one_line_before_anything_runs(flag, tmp_path, monkeypatch,
                                                               capsys):
  monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
  argv = ["train", "--config", "cartpole", "--logdir", str(tmp_path / "runs"), *flag]
  assert main(argv) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and 'pip install "batchrl[track]"' in err, err
  assert err.startswith("batchrl train: error: --track (Weights & Biases) needs an optional "
                        "dependency that is not installed")
  assert not (tmp_path / "runs").exists()
