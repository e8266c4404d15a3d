"""Run logging: metrics.jsonl records, Score lines, TensorBoard files, progress bar."""
from __future__ import annotations

import io
import json
import logging

import jax.numpy as jnp
import numpy as np
import pytest
from rich.console import Console

from batchrl.logging import Progress, RunLogger, read_metrics


def test_report_writes_json_lines_and_logs_score(tmp_path, caplog):
  caplog.set_level(logging.INFO, logger="batchrl")
  with RunLogger(tmp_path, use_tensorboard=False) as log:
    record = log.report(100, "train", {"mean_score": np.float32(12.5),
                                       "mean_length": jnp.int32(200), "episodes": 3, "note": "ok"})
    log.report(200, "eval", {"mean_score": jnp.asarray(-3.25)})
  assert record["step"] == 100 and record["phase"] == "train" and record["mean_score"] == 12.5
  assert type(record["mean_length"]) is int and isinstance(record["wall_time"], float)
  lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
  assert [json.loads(line)["step"] for line in lines] == [100, 200]
  assert read_metrics(tmp_path)[1]["mean_score"] == -3.25
  scores = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Score ")]
  assert scores[0].startswith("Score 12.5") and scores[1].startswith("Score -3.25")


def test_non_finite_written_as_null_with_warning(tmp_path):
  with RunLogger(tmp_path, use_tensorboard=False) as log:
    with pytest.warns(RuntimeWarning, match="loss=nan"):
      record = log.report(1, "train", {"loss": float("nan"), "kl": np.float32(np.inf), "x": 1.0})
  assert record["loss"] is None and record["kl"] is None
  line = (tmp_path / "metrics.jsonl").read_text().strip()
  assert json.loads(line)["loss"] is None and "NaN" not in line and "Infinity" not in line


def test_a_report_in_which_no_episode_ended_says_so_once(tmp_path, caplog):
  """No episode ended in the report's window: one Score line says so, with no warning and no
  ``Score nan``; its episode statistics (the seeds' too) are null in ``metrics.jsonl``."""
  import warnings
  caplog.set_level(logging.INFO, logger="batchrl")
  nan = float("nan")
  with RunLogger(tmp_path, use_tensorboard=False) as log, warnings.catch_warnings():
    warnings.simplefilter("error")
    record = log.report(5000, "train", {
        "episodes": 0.0, "mean_score": nan, "mean_length": np.float32(nan), "loss": 0.5,
        "seed0/mean_score": nan, "seed0/episodes": 0.0})
    # one seed's window saw no episode end, the other's did
    log.report(6000, "train", {"episodes": 2.0, "mean_score": 3.0, "mean_length": 10.0,
                               "seed0/mean_score": nan, "seed0/episodes": 0.0,
                               "seed1/mean_score": 3.0, "seed1/episodes": 2.0})
  assert caplog.messages == ["Score - (train, step 5000): no episode ended in this report",
                             "Score 3 (train, step 6000)"]
  assert [record[k] for k in ("mean_score", "mean_length", "seed0/mean_score", "loss")] == [
      None, None, None, 0.5]
  assert [r["seed0/mean_score"] for r in read_metrics(tmp_path)] == [None, None]


def test_a_nan_that_is_not_a_missing_episode_still_warns(tmp_path, caplog):
  """A NaN loss, or a NaN score of episodes that did end (NaN rewards), or one with no episode
  count to tell, warns as a failure; the missing score beside a NaN loss is still said once."""
  caplog.set_level(logging.INFO, logger="batchrl")
  nan = float("nan")
  with RunLogger(tmp_path, use_tensorboard=False) as log:
    with pytest.warns(RuntimeWarning) as caught:
      log.report(1, "train", {"episodes": 0.0, "mean_score": nan, "loss": nan})
      log.report(2, "eval", {"episodes": 4.0, "mean_score": nan})
      log.report(3, "train", {"mean_score": nan})
  expected = ["train report at step 1 has non-finite metrics loss=nan; written as null",
              "eval report at step 2 has non-finite metrics mean_score=nan; written as null",
              "train report at step 3 has non-finite metrics mean_score=nan; written as null"]
  assert [str(w.message) for w in caught] == expected
  assert caplog.messages == [
      expected[0], "Score - (train, step 1): no episode ended in this report",
      expected[1], "Score nan (eval, step 2)", expected[2], "Score nan (train, step 3)"]


def test_bad_inputs(tmp_path):
  with RunLogger(tmp_path, use_tensorboard=False) as log:
    with pytest.raises(ValueError, match="phase must be one of train, eval"):
      log.report(1, "test", {})
    with pytest.raises(ValueError, match="metric 'obs'"):
      log.report(1, "train", {"obs": np.zeros(3)})
    with pytest.raises(ValueError, match="reserved"):
      log.report(1, "train", {"step": 1})


def test_read_metrics_tolerates_truncated_last_line(tmp_path):
  with RunLogger(tmp_path, use_tensorboard=False) as log:
    log.report(1, "train", {"mean_score": 1.0})
    log.report(2, "train", {"mean_score": 2.0})
  path = tmp_path / "metrics.jsonl"
  path.write_text(path.read_text() + '{"step": 3, "pha')
  assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2]
  with RunLogger(tmp_path, use_tensorboard=False) as log:  # appends after the crash
    log.report(3, "train", {"mean_score": 3.0})
  assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3]
  path.write_text('{"step": 1}\nnot json\n{"step": 2}\n')
  with pytest.raises(ValueError, match="line 2"):
    read_metrics(path)
  with pytest.raises(FileNotFoundError):
    read_metrics(tmp_path / "nowhere")


def test_resume_drops_stale_records(tmp_path):
  with RunLogger(tmp_path, use_tensorboard=False) as log:
    for step in (10, 20, 30):
      log.report(step, "train", {"mean_score": float(step)})
  with RunLogger(tmp_path, use_tensorboard=False, resume_step=20) as log:
    log.report(30, "train", {"mean_score": 99.0})
  assert [(r["step"], r["mean_score"]) for r in read_metrics(tmp_path)] == [
      (10, 10.0), (20, 20.0), (30, 99.0)]


def test_tensorboard_event_file(tmp_path):
  with RunLogger(tmp_path) as log:
    log.scalars("train", 5, {"mean_score": np.float32(1.5), "kl": jnp.asarray(0.01)})
    log.scalars("eval", 5, {"mean_score": 2.0})
    # no episode ended in this window: no score point (and no tensorboardX warning)
    log.scalars("train", 6, {"mean_score": float("nan"), "kl": np.float32(0.02)})
    with pytest.warns(RuntimeWarning, match="non-finite"):
      log.histograms("train", 5, {"action": np.array([0.1, -0.2, np.nan, 0.3])})
  events = list(tmp_path.glob("events.out.tfevents.*"))
  assert events and events[0].stat().st_size > 0
  from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
  accumulator = EventAccumulator(str(tmp_path))
  accumulator.Reload()
  tags = accumulator.Tags()
  assert {"train/mean_score", "train/kl", "eval/mean_score"} <= set(tags["scalars"])
  assert "train/action" in tags["histograms"]
  assert [e.value for e in accumulator.Scalars("train/mean_score")] == [pytest.approx(1.5)]
  assert [e.step for e in accumulator.Scalars("train/kl")] == [5, 6]


def test_progress_disabled_without_terminal():
  stream = io.StringIO()
  with Progress(100, console=Console(file=stream, force_terminal=False)) as bar:
    bar.update(50, phase="eval", score=3.0)
    assert not bar.enabled and bar.done == 50 and bar.phase == "eval" and bar.score == 3.0
  assert stream.getvalue() == ""
  with Progress(100, enabled=False) as bar:
    bar.update(10)
    assert not bar.enabled


def test_progress_renders_on_a_terminal():
  stream = io.StringIO()
  console = Console(file=stream, force_terminal=True, width=120)
  with Progress(1000, initial=100, console=console) as bar:
    bar.update(600, phase="train", score=-12.25)
  text = stream.getvalue()
  assert "600/1000" in text and "steps/s" in text and "-12.25" in text
  stream = io.StringIO()
  with Progress(1000, console=Console(file=stream, force_terminal=True, width=120)) as bar:
    bar.update(600, phase="train", score=float("nan"))  # no episode ended in the report
  assert "score -" in stream.getvalue() and "nan" not in stream.getvalue()


def test_report_means_skip_nans_and_stay_quiet_when_nothing_finished():
  """A report window where no episode finished gives NaN, not numpy's empty-slice warning;
  a metric not computed in the latest iterations shows the latest computed value."""
  import warnings

  from batchrl.experiment import nan_mean, summarize
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert nan_mean([1.0, np.nan, 3.0]) == 2.0
    assert np.isnan(nan_mean([np.nan, np.nan]))
    assert np.isnan(nan_mean(np.zeros((0,))))
    report = summarize({"mean_score": np.full((2, 4), np.nan), "episodes": np.zeros((2, 4)),
                        "mean_length": np.full((2, 4), np.nan),
                        "kl": np.array([[0.1, 0.2, np.nan, np.nan]] * 2),
                        "loss": np.full((2, 4), np.nan)})
  assert report["episodes"] == 0.0 and np.isnan(report["mean_score"])
  # an update metric shows the latest value computed (a held actor step, an iteration
  # without an update, reports NaN), the mean over seeds; NaN when none was
  assert report["kl"] == pytest.approx(0.2) and np.isnan(report["loss"])
  seeds = summarize({"actor_loss": np.array([[1.0, 2.0, np.nan], [3.0, np.nan, np.nan]])})
  assert seeds["actor_loss"] == pytest.approx((2.0 + 3.0) / 2)
