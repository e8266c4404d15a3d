"""benchmarks/keep_records.py: what a table is made of, kept without checkpoints, gives the
same table as the runs it was copied from."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import keep_records
from batchrl.bench import report, runs
from batchrl.bench.suites import Entry, Suite

SUITE = Suite("two", "", (Entry("cartpole_fused", steps=2000), Entry("pqn_cartpole_fused",
                                                                     steps=2000)), seeds=1)


def fake_suite(logdir: Path) -> None:
  """Two runs' records as ``batchrl bench`` leaves them, a checkpoint and events beside."""
  for k, run in enumerate(runs.plan(SUITE, 1)):
    folder = runs.run_dir(logdir, run)
    (folder / "checkpoints" / "2000").mkdir(parents=True)
    (folder / "checkpoints" / "2000" / "state.msgpack").write_bytes(b"\0" * 64)
    (folder / "events.out.tfevents.1.vm").write_bytes(b"\0" * 8)
    (folder / "config.yaml").write_text(f"config: {run.entry.config}\n")
    records = [dict(step=s, phase=p, mean_score=100.0 * k + s / 10, episodes=4,
                    wall_time=1000.0 + s) for s in (1000, 2000) for p in ("train", "eval")]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    state = dict(sittings=[dict(start=1.0, seconds=30.0 + k, exit=0)], finished=True,
                 running=dict(pid=4242, start=1.0))
    runs.state_path(logdir, run).parent.mkdir(parents=True, exist_ok=True)
    runs.state_path(logdir, run).write_text(json.dumps(state))


def test_a_suite_is_kept_without_checkpoints_and_reports_the_same(tmp_path):
  source, kept = tmp_path / "results" / "two", tmp_path / "records" / "two"
  fake_suite(source)
  assert keep_records.main([str(source), "--into", str(kept)]) == 0
  files = sorted(str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file())
  assert files == ["runs/CartPole-v1-s0-cartpole_fused/config.yaml",
                   "runs/CartPole-v1-s0-cartpole_fused/metrics.jsonl",
                   "runs/CartPole-v1-s0-pqn_cartpole_fused/config.yaml",
                   "runs/CartPole-v1-s0-pqn_cartpole_fused/metrics.jsonl",
                   "state/CartPole-v1-s0-cartpole_fused.json",
                   "state/CartPole-v1-s0-pqn_cartpole_fused.json"]
  assert "running" not in json.loads(next((kept / "state").glob("*.json")).read_text())
  assert report.rows(SUITE, kept, 1) == report.rows(SUITE, source, 1)
  assert report.rows(SUITE, kept, 1)[0]["final"] == [200.0]


def test_a_suite_run_not_yet_finished_is_left_out_unless_asked(tmp_path):
  source = tmp_path / "results" / "two"
  fake_suite(source)
  cut = runs.state_path(source, runs.plan(SUITE, 1)[1])
  cut.write_text(json.dumps(dict(json.loads(cut.read_text()), finished=False)))
  written = keep_records.keep(source, tmp_path / "kept")
  assert sorted(p.parent.name if p.parent.name != "state" else p.stem for p in written) == [
      "CartPole-v1-s0-cartpole_fused"] * 3
  written = keep_records.keep(source, tmp_path / "all", unfinished=True)
  assert len(written) == 6


def test_parity_results_are_kept_and_other_folders_refused(tmp_path):
  source = tmp_path / "parity"
  source.mkdir()
  (source / "sbx-td3-Walker2d-v5-s0.json").write_text('{"best_return": 700}')
  (source / "sbx-td3-Walker2d-v5-s0").mkdir()  # the peer's saved model and buffer
  (source / "sbx-td3-Walker2d-v5-s0" / "buffer.pkl").write_bytes(b"\0")
  written = keep_records.keep(source, tmp_path / "kept")
  assert [p.name for p in written] == ["sbx-td3-Walker2d-v5-s0.json"]
  with pytest.raises(SystemExit, match="holds neither a bench suite"):
    keep_records.keep(tmp_path / "kept" / "nothing", tmp_path / "x")
