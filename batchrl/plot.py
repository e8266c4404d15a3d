"""``batchrl plot``: learning curves from the ``metrics.jsonl`` of one or more runs.

    batchrl plot runs/T0-cartpole_fused runs/T1-cartpole_fused --out curves.png
    batchrl plot runs --metric mean_score --x time

Each path is a run directory (it holds ``metrics.jsonl``) or a directory of runs. ``--x time``
is wall time in minutes since the run started (``run_start``: when ``batchrl train`` wrote its
``config.yaml``, before building envs and compiling), so start-up shows as the gap before the
first report. A resumed run keeps counting from its first start: the time it was stopped is
included, and shows as a jump. Every run
is one colour: evaluation solid, training dashed, with a marker on each report when a curve
has few (a run with one report is a point). A run trained with ``--seeds K`` logged
``seed<i>/<metric>`` per seed; it is drawn as the mean over seeds with a band from the lowest
to the highest seed (its training reports log each seed's ``episodes`` since 2026-11-30, so
that metric too is per seed; earlier runs logged only the seeds' total). matplotlib is the
optional extra ``batchrl[plot]``; figures are drawn headless (the Agg backend) and written
to a file.
"""
from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from batchrl.errors import UserInputError, missing_extra

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.yaml"  # written as a run starts (batchrl.train.rundir)
X_AXES = ("steps", "time")
_SEED_KEY = re.compile(r"^seed(\d+)/(.+)$")
FEW_POINTS = 20  # curves with at most this many reports get a marker on each


class Curve(NamedTuple):
  """One phase of one run: ``x`` and the metric's mean, low and high (equal for one seed)."""

  run: str
  phase: str
  x: np.ndarray
  mean: np.ndarray
  low: np.ndarray
  high: np.ndarray


def find_runs(paths: list[str]) -> list[Path]:
  """Run directories under ``paths`` (a path that is itself a run counts as one)."""
  runs = []
  for path in map(Path, paths):
    if (path / METRICS_FILE).is_file():
      runs.append(path)
    elif path.is_dir():
      found = sorted(p.parent for p in path.glob(f"*/{METRICS_FILE}"))
      if not found:
        raise UserInputError(f"{path} holds no run: neither {path / METRICS_FILE} nor "
                             f"*/{METRICS_FILE} exists (runs are written by `batchrl train`).")
      runs.extend(found)
    else:
      raise UserInputError(f"{path} does not exist; give run directories (LOGDIR/<T>-<config>) "
                           "or a directory of runs.")
  return runs


def read_records(run: Path) -> list[dict]:
  """The records of ``metrics.jsonl``; on resume a step logged twice keeps its last record."""
  latest: dict[tuple[str, int], dict] = {}
  with open(run / METRICS_FILE) as f:
    for number, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        raise UserInputError(f"{run / METRICS_FILE}:{number} is not a JSON line.") from None
      latest[(record.get("phase", "train"), int(record["step"]))] = record
  return sorted(latest.values(), key=lambda r: (r["wall_time"], r["step"]))


def run_start(run: Path, records: list[dict]) -> float:
  """When ``run`` first started, in seconds since the epoch: when ``batchrl train`` wrote its
  ``config.yaml`` (once, as a new run starts; a resume leaves it alone). Without one, or when
  its time is after the first report (a copy that did not keep file times), the first
  report's time."""
  first = min((r["wall_time"] for r in records), default=0.0)
  try:
    written = (run / CONFIG_FILE).stat().st_mtime
  except OSError:
    return first
  return written if written <= first else first


def _values(record: dict, metric: str) -> list[float]:
  """The metric of one record: every seed's value when it has per-seed values."""
  seeds = [v for k, v in record.items() if (m := _SEED_KEY.match(k)) and m.group(2) == metric]
  values = seeds or [record.get(metric)]
  return [math.nan if v is None else float(v) for v in values]


def curves(run: str, records: list[dict], metric: str, x: str,
           start: float | None = None) -> list[Curve]:
  """One curve per phase that logged ``metric``; ``x`` is 'steps' or 'time': minutes since
  ``start`` (seconds since the epoch; default: the first record's time)."""
  if x not in X_AXES:
    raise UserInputError(f"--x must be one of {X_AXES}, got {x!r}.")
  if start is None:
    start = min((r["wall_time"] for r in records), default=0.0)
  out = []
  for phase in ("eval", "train"):
    rows = [r for r in records if r.get("phase") == phase and _has(r, metric)]
    if not rows:
      continue
    xs = np.array([r["step"] if x == "steps" else (r["wall_time"] - start) / 60 for r in rows])
    values = [_values(r, metric) for r in rows]
    width = max(map(len, values))
    table = np.array([v + [math.nan] * (width - len(v)) for v in values])
    with warnings.catch_warnings():
      # a report whose metric is null (no episode ended in an evaluation) is a gap, not news
      warnings.filterwarnings("ignore", "Mean of empty slice|All-NaN slice encountered",
                              RuntimeWarning)
      out.append(Curve(run, phase, xs, np.nanmean(table, 1), np.nanmin(table, 1),
                       np.nanmax(table, 1)))
  return out


def _has(record: dict, metric: str) -> bool:
  return metric in record or any(
      (m := _SEED_KEY.match(k)) and m.group(2) == metric for k in record)


def plot(paths: list[str], out: str, metric: str = "mean_score", x: str = "steps") -> Path:
  """Draws the curves of every run under ``paths`` into ``out``; returns the file written."""
  drawn = figure(paths, metric, x)
  out_path = Path(out)
  out_path.parent.mkdir(parents=True, exist_ok=True)
  drawn.savefig(out_path, dpi=120, bbox_inches="tight")
  return out_path


def figure(paths: list[str], metric: str = "mean_score", x: str = "steps"):
  """The matplotlib figure ``plot`` writes: the curves of every run under ``paths``."""
  runs = find_runs(paths)
  drawn = []
  for run in runs:
    records = read_records(run)
    drawn += curves(run.name, records, metric, x, run_start(run, records))
  if not drawn:
    raise UserInputError(f"no run under {', '.join(paths)} logged {metric!r}; try "
                         "--metric mean_score.")
  return draw(drawn, metric, x)


def marker(points: int) -> str:
  """A curve of few reports gets a marker on each (a line through one point draws
  nothing); a long one is line only."""
  return "o" if points <= FEW_POINTS else ""


def draw(drawn: list[Curve], metric: str, x: str,
         references: tuple[tuple[str, float], ...] = ()):
  """The figure of ``drawn`` curves; ``references`` are ``(label, value)`` drawn as dotted
  horizontal lines (published scores, in ``batchrl bench``'s reports)."""
  try:
    import matplotlib
    matplotlib.use("Agg")  # headless: never needs a display
    import matplotlib.pyplot as plt
  except ImportError as e:
    raise missing_extra("batchrl plot", "plot", e) from e
  figure, axes = plt.subplots(figsize=(7, 4.2))
  colours = {}
  for curve in drawn:
    colour = colours.setdefault(curve.run, f"C{len(colours) % 10}")
    style = "-" if curve.phase == "eval" else "--"
    axes.plot(curve.x, curve.mean, style, color=colour, marker=marker(len(curve.x)),
              markersize=4, label=f"{curve.run} ({curve.phase})")
    if np.any(curve.high > curve.low):
      axes.fill_between(curve.x, curve.low, curve.high, color=colour, alpha=0.2, lw=0)
  for i, (label, value) in enumerate(references):
    axes.axhline(value, color="0.3", linestyle=(":", "-.")[i % 2], linewidth=1.2, label=label)
  axes.set_xlabel("environment steps" if x == "steps" else "minutes since the run started")
  axes.set_ylabel(metric)
  axes.grid(alpha=0.3)
  axes.legend(fontsize=8)
  return figure
