"""Experiment tracking on Weights & Biases (``batchrl train --track``, ``run.track``).

W&B is an optional dependency (``pip install "batchrl[track]"``), imported here alone, when
a tracked run starts (as ``batchrl.tune.optuna_module`` imports Optuna): ``require_wandb``
checks it before anything runs. A tracked run logs its config, and everything its
``RunLogger`` writes to TensorBoard (scalars, texts, histograms) under the same tags, on the
same step axis: the W&B metric ``global_step``, the env steps TensorBoard plots against.
TensorBoard and ``metrics.jsonl`` are written as always.

Offline (``WANDB_MODE=offline``) the run is kept on disk and uploaded later with ``wandb
sync``; its files go to ``WANDB_DIR`` when set, else to the run directory. A resumed run
continues the same W&B run (its id is kept in the run directory).
"""
from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from batchrl.configs import Experiment
from batchrl.errors import missing_extra
from batchrl.files import write_atomic

log = logging.getLogger("batchrl")

STEP = "global_step"  # the step axis of every tracked metric (env steps, as in TensorBoard)
ID_FILE = "wandb-run-id"  # in the run directory: a resumed run logs to the same W&B run
DEFAULT_PROJECT = "batchrl"


def require_wandb():
  """The ``wandb`` module; without it installed, a ``UserInputError`` that says how to
  install it (``batchrl train --track`` checks this before anything runs)."""
  try:
    import wandb
  except ImportError as e:
    raise missing_extra("--track (Weights & Biases)", "track", e) from e
  return wandb


class Tracker:
  """A W&B run that mirrors a ``RunLogger`` (``RunLogger(..., tracker=...)``).

  Values logged at one step are sent as one row when the step changes (or at ``flush`` /
  ``close``), with the step as ``global_step``.
  """

  def __init__(self, run, histogram):
    self.run, self._histogram = run, histogram  # histogram: ``wandb.Histogram``
    self._step: int | None = None
    self._row: dict[str, Any] = {}

  def scalars(self, step: int, values: Mapping[str, float]) -> None:
    self._add(step, {tag: float(value) for tag, value in values.items()})

  def texts(self, step: int, values: Mapping[str, str]) -> None:
    self._add(step, {tag: str(text) for tag, text in values.items()})

  def histograms(self, step: int, values: Mapping[str, np.ndarray]) -> None:
    self._add(step, {tag: self._histogram(array) for tag, array in values.items()})

  def _add(self, step: int, values: dict[str, Any]) -> None:
    if self._step is not None and step != self._step:
      self.flush()
    self._step = int(step)
    self._row.update(values)

  def flush(self) -> None:
    """Sends the values of the current step as one row."""
    if self._row:
      self.run.log({**self._row, STEP: self._step})
    self._row = {}

  def close(self) -> None:
    """Sends what is left and ends the W&B run (an offline run is then complete on disk)."""
    self.flush()
    self.run.finish()


def start(exp: Experiment, run_dir: Path) -> Tracker:
  """Starts (or, for a resumed run, continues) the W&B run of ``run_dir`` and logs where
  it goes; ``exp.run.track_project`` / ``track_entity`` choose the W&B project."""
  wandb = require_wandb()
  run_dir = Path(run_dir)
  project = exp.run.track_project or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT
  run = wandb.init(project=project,
                   entity=exp.run.track_entity, name=run_dir.name, id=_run_id(run_dir),
                   resume="allow", config=exp.to_dict(),
                   dir=None if os.environ.get("WANDB_DIR") else str(run_dir))
  run.define_metric(STEP)
  run.define_metric("*", step_metric=STEP)
  log.info(_where(run))
  return Tracker(run, wandb.Histogram)


def _run_id(run_dir: Path) -> str:
  """The W&B run id of ``run_dir``: the one kept there, or a new one, kept (random:
  another run directory of the same name, elsewhere, is another W&B run)."""
  path = run_dir / ID_FILE
  if path.is_file():
    return path.read_text().strip()
  run_id = secrets.token_hex(6)  # W&B ids: letters and digits
  write_atomic(path, run_id + "\n")
  return run_id


def _where(run) -> str:
  """The log line saying where the tracked run goes."""
  if run.settings.mode == "offline":
    folder = Path(run.dir).parent  # run.dir is its files/ folder
    return (f"Tracking offline with Weights & Biases in {folder}; upload it with: "
            f"wandb sync {folder}")
  return f"Tracking with Weights & Biases: {run.url}"
