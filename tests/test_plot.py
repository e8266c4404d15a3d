"""`batchrl plot`: curves read from metrics.jsonl, seeds as mean and band, clear errors."""
import json
import os

import numpy as np
import pytest

from batchrl import plot
from batchrl.cli import main
from batchrl.errors import UserInputError


def _write_run(path, records):
  path.mkdir(parents=True)
  with open(path / "metrics.jsonl", "w") as f:
    for r in records:
      f.write(json.dumps(r) + "\n")
  return path


def _seeded(step, phase, scores, t):
  return {"step": step, "phase": phase, "wall_time": t, "mean_score": float(np.mean(scores)),
          **{f"seed{i}/mean_score": s for i, s in enumerate(scores)}}


def test_seeds_become_mean_and_band_and_resumed_steps_keep_the_last(tmp_path):
  run = _write_run(tmp_path / "T-a", [
      _seeded(100, "eval", [1.0, 3.0], 0.0),
      _seeded(200, "eval", [2.0, 6.0], 60.0),
      _seeded(200, "eval", [4.0, 8.0], 120.0),  # logged again after a resume
      {"step": 100, "phase": "train", "wall_time": 30.0, "mean_score": 5.0},
  ])
  eval_curve, train_curve = plot.curves("a", plot.read_records(run), "mean_score", "steps")
  assert eval_curve.phase == "eval" and list(eval_curve.x) == [100, 200]
  np.testing.assert_allclose(eval_curve.mean, [2.0, 6.0])
  np.testing.assert_allclose(eval_curve.low, [1.0, 4.0])
  np.testing.assert_allclose(eval_curve.high, [3.0, 8.0])
  np.testing.assert_allclose(train_curve.mean, [5.0])
  timed = plot.curves("a", plot.read_records(run), "mean_score", "time")[0]
  np.testing.assert_allclose(timed.x, [0.0, 2.0])  # minutes since the run's first record


def test_a_seeds_runs_episodes_are_drawn_per_seed_like_its_scores(tmp_path):
  run = _write_run(tmp_path / "T-a", [
      {"step": 100, "phase": "train", "wall_time": 0.0, "episodes": 4.0,
       "seed0/episodes": 1.0, "seed1/episodes": 3.0},
      {"step": 200, "phase": "train", "wall_time": 1.0, "episodes": 2.0},  # before per seed
  ])
  (train,) = plot.curves("a", plot.read_records(run), "episodes", "steps")
  np.testing.assert_allclose(train.mean, [2.0, 2.0])
  np.testing.assert_allclose(train.low, [1.0, 2.0])
  np.testing.assert_allclose(train.high, [3.0, 2.0])


def test_command_draws_several_runs_from_a_logdir(tmp_path, capsys):
  pytest.importorskip("matplotlib")  # the `plot` extra
  for name, offset in (("T0-x", 0.0), ("T1-x", 1.0)):
    _write_run(tmp_path / "logs" / name, [
        {"step": s, "phase": "eval", "wall_time": s / 10, "mean_score": s / 100 + offset}
        for s in (100, 200, 300)])
  out = tmp_path / "figs" / "curves.png"
  assert main(["plot", str(tmp_path / "logs"), "--out", str(out)]) == 0
  assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
  assert str(out) in capsys.readouterr().out


def test_errors_name_the_problem(tmp_path, capsys):
  with pytest.raises(UserInputError, match="does not exist"):
    plot.find_runs([str(tmp_path / "nothing")])
  (tmp_path / "empty").mkdir()
  assert main(["plot", str(tmp_path / "empty")]) == 2
  assert "holds no run" in capsys.readouterr().err
  run = _write_run(tmp_path / "r", [{"step": 1, "phase": "eval", "wall_time": 0.0,
                                     "mean_score": 1.0}])
  assert main(["plot", str(run), "--metric", "kl", "--out", str(tmp_path / "p.png")]) == 2
  assert "logged 'kl'" in capsys.readouterr().err


def test_a_run_with_one_report_draws_a_visible_point(tmp_path, capsys):
  pytest.importorskip("matplotlib")  # the `plot` extra
  run = _write_run(tmp_path / "T-one", [
      {"step": 1024, "phase": "eval", "wall_time": 0.0, "mean_score": 20.0}])
  (line,) = plot.figure([str(run)]).axes[0].lines
  assert line.get_marker() == "o" and len(line.get_xdata()) == 1
  long = _write_run(tmp_path / "T-long", [
      {"step": s, "phase": "eval", "wall_time": float(s), "mean_score": float(s)}
      for s in range(100)])
  (line,) = plot.figure([str(long)]).axes[0].lines
  assert line.get_marker() in ("", "None", None)  # many reports: a plain line

  # as the user sees it: the run's colour (C0) in the middle of the image, where the axes
  # centre a lone point (the legend's sample of the colour is in a corner)
  import matplotlib.image
  out = tmp_path / "one.png"
  assert main(["plot", str(run), "--out", str(out)]) == 0
  pixels = matplotlib.image.imread(out)[..., :3]
  blue = np.all(np.abs(pixels - np.array([0x1f, 0x77, 0xb4]) / 255) < 0.08, axis=-1)
  height, width = blue.shape
  assert blue[height // 3:2 * height // 3, width // 3:2 * width // 3].sum() > 10


def _run_started_at(path, name: str, started: float, report_seconds: list[float]):
  """A run whose config.yaml was written at ``started`` and whose evaluations (steps 100,
  200, ...) were reported ``report_seconds`` after it; its records."""
  run = _write_run(path, [
      {"step": 100 * (i + 1), "phase": "eval", "wall_time": started + t, "mean_score": i + 1.0}
      for i, t in enumerate(report_seconds)])
  (run / "config.yaml").write_text(f"config: {name}\n")
  os.utime(run / "config.yaml", (started, started))
  return run, plot.read_records(run)


def test_time_counts_from_the_runs_start_not_its_first_report(tmp_path):
  """config.yaml is written as the run starts; building envs and compiling before the first
  report (here 2 minutes) show on the time axis."""
  started = 1_000_000.0
  run, records = _run_started_at(tmp_path / "T-a", "a", started, [120, 180])
  assert plot.run_start(run, records) == started
  (curve,) = plot.curves("a", records, "mean_score", "time", plot.run_start(run, records))
  np.testing.assert_allclose(curve.x, [2.0, 3.0])
  # a copy that did not keep file times (config.yaml newer than the reports): the first report
  os.utime(run / "config.yaml", (started + 500, started + 500))
  assert plot.run_start(run, records) == started + 120
  (run / "config.yaml").unlink()  # metrics.jsonl alone: the first report
  assert plot.run_start(run, records) == started + 120


def test_a_resumed_run_keeps_counting_from_its_first_start(tmp_path):
  """Time since the first start, the stopped hour included: the curve jumps across it
  (stopped after step 100, resumed an hour later)."""
  started = 2_000_000.0
  run, records = _run_started_at(tmp_path / "T-r", "r", started, [60, 3720])
  (curve,) = plot.curves("r", records, "mean_score", "time", plot.run_start(run, records))
  np.testing.assert_allclose(curve.x, [1.0, 62.0])


def test_the_time_axis_of_the_command_starts_at_the_run_start(tmp_path):
  pytest.importorskip("matplotlib")  # the `plot` extra
  run = _write_run(tmp_path / "T-a", [
      {"step": s, "phase": "eval", "wall_time": 5000.0 + 60 * s, "mean_score": float(s)}
      for s in (1, 2, 3)])
  (run / "config.yaml").write_text("config: a\n")
  os.utime(run / "config.yaml", (5000.0, 5000.0))
  (axes,) = plot.figure([str(run)], x="time").axes
  np.testing.assert_allclose(axes.lines[0].get_xdata(), [1.0, 2.0, 3.0])
  assert axes.get_xlabel() == "minutes since the run started"


def test_runs_are_given_as_arguments_or_with_dash_dash_run(tmp_path, capsys):
  pytest.importorskip("matplotlib")  # the `plot` extra
  runs = [_write_run(tmp_path / name, [{"step": 1, "phase": "eval", "wall_time": 0.0,
                                        "mean_score": 1.0}]) for name in ("T0-a", "T1-a")]
  out = tmp_path / "p.png"
  assert main(["plot", "--run", str(runs[0]), "--run", str(runs[1]), "--out", str(out)]) == 0
  assert out.is_file() and capsys.readouterr().err == ""
  out.unlink()
  assert main(["plot", *map(str, runs), "--out", str(out)]) == 0
  assert out.is_file()


def test_reports_with_a_null_metric_are_gaps_without_warnings(tmp_path, recwarn):
  """An evaluation in which no episode ended logs mean_score null."""
  run = _write_run(tmp_path / "T-n", [
      {"step": 1, "phase": "eval", "wall_time": 0.0, "mean_score": None},
      {"step": 2, "phase": "eval", "wall_time": 1.0, "mean_score": 3.0}])
  (curve,) = plot.curves("n", plot.read_records(run), "mean_score", "steps")
  np.testing.assert_array_equal(curve.mean, [np.nan, 3.0])
  assert [str(w.message) for w in recwarn] == []
