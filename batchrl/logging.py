"""Run logging: TensorBoard summaries, a ``metrics.jsonl`` record per report, a progress bar.

A run directory receives TensorBoard event files (tags ``train/mean_score``,
``eval/mean_length``, ...) and ``metrics.jsonl``: one JSON object per report, flushed as it is
written, so a crashed run keeps everything reported before the crash. Every report that has a
``mean_score`` logs ``Score X`` through the ``batchrl`` logger, like Batch PPO did, or
``Score - (...): no episode ended in this report`` where its window saw no episode end (its
``mean_score`` and ``mean_length`` are then null, without a warning: a NaN anywhere else, such
as a loss, is a failure and warns).
"""
from __future__ import annotations

import json
import logging
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from batchrl.files import write_atomic

PHASES = ("train", "eval")
EPISODE_STATS = ("mean_score", "mean_length")  # means over the episodes that ended
NO_EPISODE = "no episode ended in this report"
METRICS_FILE = "metrics.jsonl"
_RESERVED = ("step", "phase", "wall_time")
_LOG = logging.getLogger("batchrl")


def _check_phase(phase: str) -> None:
  if phase not in PHASES:
    raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")


def _scalar(key: str, value) -> Any:
  """A JSON-ready Python scalar from a Python/numpy/jax scalar (or size-1 array)."""
  if value is None or isinstance(value, (str, bool, int, float)):
    return value
  if hasattr(value, "__array__") or isinstance(value, np.generic):
    array = np.asarray(value)
    if array.size == 1 and array.dtype.kind in "biuf":
      return array.reshape(()).item()
  raise ValueError(f"metric {key!r} is {type(value).__name__} "
                   f"{getattr(value, 'shape', '')}; metrics are numbers or strings "
                   "(log arrays with histograms)")


def _json_record(metrics: Mapping[str, Any]) -> tuple[dict, dict[str, float]]:
  """Metrics as JSON values, and the non-finite floats, which become None (JSON has no NaN)."""
  record, bad = {}, {}
  for key, value in metrics.items():
    if key in _RESERVED:
      raise ValueError(f"metric name {key!r} is reserved; reserved: {', '.join(_RESERVED)}")
    value = _scalar(key, value)
    if isinstance(value, float) and not math.isfinite(value):
      bad[key] = value
      value = None
    record[key] = value
  return record, bad


def _no_episode_ended(key: str, record: Mapping[str, Any]) -> bool:
  """Whether ``key`` is an episode statistic (``mean_score``, ``seed1/mean_length``...) of a
  report in which no episode ended: its episode count (``seed1/episodes``, else
  ``episodes``) is 0. Such a NaN is news of nothing; any other is a failure."""
  prefix, _, name = key.rpartition("/")
  if name not in EPISODE_STATS:
    return False
  count = record.get(f"{prefix}/episodes" if prefix else "episodes")
  count = record.get("episodes") if count is None else count
  return count == 0


def _drop_after(path: Path, step: int) -> int:
  """Rewrite ``path`` without records after ``step`` (written by a run that then crashed)."""
  records = read_metrics(path)
  kept = [r for r in records if not isinstance(r.get("step"), int) or r["step"] <= step]
  write_atomic(path, "".join(json.dumps(r) + "\n" for r in kept))
  return len(records) - len(kept)


def _drop_partial_line(path: Path) -> None:
  """Cut a last line left unfinished by a crash, so appended records stay on their own lines."""
  with open(path, "r+b") as f:
    data = f.read()
    if not data or data.endswith(b"\n"):
      return
    f.truncate(data.rfind(b"\n") + 1)
  _LOG.warning("%s ended in a partial line (crash?); it was removed", path)


class RunLogger:
  """Writes a run's TensorBoard summaries and ``metrics.jsonl``; use as a context manager.

  Args:
    run_dir: the run directory (created if needed).
    use_tensorboard: write TensorBoard event files (tensorboardX) under ``run_dir``.
    resume_step: when a run resumes from a checkpoint at this step, what the crashed run
      reported after it is dropped (from ``metrics.jsonl``, and purged in TensorBoard), so the
      resumed run's records are not mixed with stale ones.
    tracker: receives what goes to TensorBoard too, with the same tags and steps (whether
      or not TensorBoard is written): an object with ``scalars``, ``texts`` and
      ``histograms(step, {tag: value})``, ``flush()`` and ``close()`` (closed with the
      logger), such as ``batchrl.train.track.Tracker`` (Weights & Biases).
  """

  def __init__(self, run_dir, use_tensorboard: bool = True, *, resume_step: int | None = None,
               tracker=None):
    self.run_dir = Path(run_dir)
    self.run_dir.mkdir(parents=True, exist_ok=True)
    self.metrics_path = self.run_dir / METRICS_FILE
    if self.metrics_path.exists():
      _drop_partial_line(self.metrics_path)
      if resume_step is not None and _drop_after(self.metrics_path, resume_step):
        _LOG.info("dropped records after step %d from %s", resume_step, self.metrics_path)
    self._file = open(self.metrics_path, "a", encoding="utf-8")
    self._writer = None
    self._tracker = tracker
    if use_tensorboard:
      from tensorboardX import SummaryWriter  # heavy import, only when wanted
      purge = None if resume_step is None else resume_step + 1
      self._writer = SummaryWriter(logdir=str(self.run_dir), purge_step=purge)

  def scalars(self, phase: str, step: int, values: Mapping[str, Any]) -> None:
    """TensorBoard scalars tagged ``phase/name``. NaN and infinite values are left out (a
    gap in the curve, as TensorBoard draws them anyway): a report window in which no
    episode ended has no score, and tensorboardX would print a warning for each (a loss
    that turned NaN is warned about once, by ``report``)."""
    _check_phase(phase)
    tagged = {}
    for name, value in values.items():
      value = _scalar(name, value)
      if not isinstance(value, (bool, int, float)):
        raise ValueError(f"scalar {name!r} must be a number, got {value!r}")
      if math.isfinite(value):
        tagged[f"{phase}/{name}"] = float(value)
    if self._writer is not None:
      for tag, value in tagged.items():
        self._writer.add_scalar(tag, value, int(step))
    if self._tracker is not None:
      self._tracker.scalars(int(step), tagged)

  def texts(self, phase: str, step: int, values: Mapping[str, str]) -> None:
    """TensorBoard text entries tagged ``phase/name`` (events such as runner restarts)."""
    _check_phase(phase)
    tagged = {f"{phase}/{name}": str(text) for name, text in values.items()}
    if self._writer is not None:
      for tag, text in tagged.items():
        self._writer.add_text(tag, text, int(step))
    if self._tracker is not None and tagged:
      self._tracker.texts(int(step), tagged)

  def histograms(self, phase: str, step: int, values: Mapping[str, Any]) -> None:
    """TensorBoard histograms tagged ``phase/name``; non-finite entries are left out."""
    _check_phase(phase)
    if self._writer is None and self._tracker is None:
      return
    tagged = {}
    for name, array in values.items():
      array = np.asarray(array, dtype=np.float64).ravel()
      finite = array[np.isfinite(array)]
      if finite.size < array.size:
        _warn(f"histogram {phase}/{name} at step {step}: left out "
              f"{array.size - finite.size} non-finite value(s)")
      if finite.size:
        tagged[f"{phase}/{name}"] = finite
    if self._writer is not None:
      for tag, finite in tagged.items():
        self._writer.add_histogram(tag, finite, int(step))
    if self._tracker is not None and tagged:
      self._tracker.histograms(int(step), tagged)

  def report(self, step: int, phase: str, metrics: Mapping[str, Any]) -> dict:
    """Append one record to ``metrics.jsonl`` and log its ``Score`` line; returns the record.

    A non-finite metric is written as null; it warns (a ``RuntimeWarning`` and a log line)
    unless it is an episode statistic of a report in which no episode ended."""
    _check_phase(phase)
    values, bad = _json_record(metrics)
    record = {"step": int(step), "phase": phase, "wall_time": time.time(), **values}
    # no score where no episode ended is said once, in the Score line; any other NaN warns
    quiet = {key for key in bad if _no_episode_ended(key, values)}
    failed = [f"{key}={value}" for key, value in bad.items() if key not in quiet]
    if failed:
      _warn(f"{phase} report at step {step} has non-finite metrics {', '.join(failed)}; "
            "written as null")
    self._file.write(json.dumps(record, allow_nan=False) + "\n")
    self._file.flush()
    if "mean_score" in quiet:
      _LOG.info("Score - (%s, step %d): %s", phase, int(step), NO_EPISODE)
    elif "mean_score" in metrics:
      score = _scalar("mean_score", metrics["mean_score"])
      _LOG.info("Score %s (%s, step %d)", _format(score), phase, int(step))
    return record

  def flush(self) -> None:
    self._file.flush()
    if self._writer is not None:
      self._writer.flush()
    if self._tracker is not None:
      self._tracker.flush()

  def close(self) -> None:
    """Flush and close the files (and the tracker); safe to call twice."""
    if not self._file.closed:
      self._file.close()
    if self._writer is not None:
      self._writer.close()
      self._writer = None
    if self._tracker is not None:
      tracker, self._tracker = self._tracker, None
      tracker.close()

  def __enter__(self) -> "RunLogger":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def _format(value) -> str:
  return f"{value:.6g}" if isinstance(value, float) else str(value)


def _warn(message: str) -> None:
  _LOG.warning(message)
  warnings.warn(message, RuntimeWarning, stacklevel=3)


def read_metrics(run_dir) -> list[dict]:
  """Records of ``run_dir/metrics.jsonl`` (or of that file itself), in order.

  A damaged last line (a crash mid-write) is skipped; damage elsewhere is an error.
  """
  path = Path(run_dir)
  if path.is_dir():
    path = path / METRICS_FILE
  if not path.is_file():
    raise FileNotFoundError(f"no metrics file at {path} (RunLogger.report writes it)")
  lines = path.read_text(encoding="utf-8").splitlines()
  records = []
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    try:
      records.append(json.loads(line))
    except ValueError as e:
      if number == len(lines):
        _LOG.warning("%s: skipped a damaged last line (crash mid-write?)", path)
        break
      raise ValueError(f"{path} line {number} is not valid JSON: {e}") from e
  return records


class _StderrHandler(logging.StreamHandler):
  """Writes to whatever ``sys.stderr`` is now (test runners and notebooks swap it)."""

  @property
  def stream(self):
    return sys.stderr

  @stream.setter
  def stream(self, value):
    del value


def setup_console_logging(level: int | str = logging.INFO) -> None:
  """Send the ``batchrl`` logger's records (``Score X`` lines...) to stderr, once."""
  _LOG.setLevel(level)
  if not any(getattr(h, "_batchrl_console", False) for h in _LOG.handlers):
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler._batchrl_console = True
    _LOG.addHandler(handler)


class Progress:
  """A terminal progress bar: steps done/total, steps/s, phase and latest mean score.

  Disabled (every method a no-op) when ``enabled`` is False or the console is not a
  terminal, so logs and tests never see control codes. ``initial`` is where a resumed run
  starts; steps/s counts only the steps of this process.
  """

  def __init__(self, total: int, *, initial: int = 0, phase: str = "train",
               enabled: bool = True, console=None):
    from rich.console import Console  # import here: a headless run never needs rich
    self.total, self.done, self.phase, self.score = int(total), int(initial), phase, None
    self._initial, self._start = int(initial), time.monotonic()
    console = console or Console(stderr=True)
    self.enabled = bool(enabled) and console.is_terminal
    self._bar = self._task = None
    if self.enabled:
      self._bar = _make_bar(console)
      self._task = self._bar.add_task(phase, total=self.total, completed=self.done,
                                      rate="-", score="-")
      self._bar.start()

  @property
  def steps_per_second(self) -> float:
    elapsed = time.monotonic() - self._start
    return (self.done - self._initial) / elapsed if elapsed > 0 else 0.0

  def update(self, done: int, *, phase: str | None = None, score: float | None = None) -> None:
    """Set the steps done so far, and optionally the current phase and latest mean score."""
    self.done = int(done)
    self.phase = phase or self.phase
    self.score = self.score if score is None else float(score)
    if self._bar is None:
      return
    # NaN: the latest report saw no episode end (its Score line says so)
    shown = "-" if self.score is None or not math.isfinite(self.score) else _format(self.score)
    self._bar.update(self._task, completed=self.done, description=self.phase,
                     rate=f"{self.steps_per_second:,.0f}", score=shown)

  def close(self) -> None:
    if self._bar is not None:
      self._bar.stop()
      self._bar = None

  def __enter__(self) -> "Progress":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def _make_bar(console):
  from rich import progress as rp
  return rp.Progress(
      rp.TextColumn("[bold]{task.description:>5}"), rp.BarColumn(), rp.MofNCompleteColumn(),
      rp.TextColumn("{task.fields[rate]} steps/s"), rp.TextColumn("score {task.fields[score]}"),
      rp.TimeElapsedColumn(), rp.TimeRemainingColumn(), console=console)
