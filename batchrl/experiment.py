"""Runs a named experiment in this process: builds env and agent, alternates train/eval
phases, logs, checkpoints.

The pieces live in ``batchrl.train``: ``build`` (env and agent), ``schedule`` (budget and
cadence), ``metrics`` (reports), ``rundir`` (config.yaml, resume, checkpoints), ``trainer``
(the ``Trainer`` protocol), ``local`` (``LocalTrainer``) and ``loop`` (the driver). They are
re-exported here, the names scripts and notebooks use. Training on Ray is
``batchrl.distributed.train``; ``batchrl train`` picks one or the other (``--ray``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from batchrl.configs import Experiment
from batchrl.errors import UserInputError
from batchrl.train import loop
from batchrl.train.build import (
  build_env,
  build_model,
  check_env,
  close_env,
  eval_steps,
  make_host_env,
)
from batchrl.train.local import LocalTrainer, check_seeds
from batchrl.train.metrics import nan_mean, per_seed_scores, summarize
from batchrl.train.rundir import (
  CONFIG_FILE,
  prepare_run,
  remove_new_run,
  restore_checkpoint,
  restore_sim,
  run_directory,
  save_checkpoint,
  save_sim,
)
from batchrl.train.schedule import schedule

__all__ = ["CONFIG_FILE", "LocalTrainer", "build_env", "build_model", "check_env", "check_seeds",
           "close_env", "eval_steps", "make_host_env", "nan_mean", "per_seed_scores", "prepare_run",
           "remove_new_run", "restore_checkpoint", "restore_sim", "run_directory",
           "save_checkpoint", "save_sim", "schedule", "summarize", "train"]


def train(exp: Experiment, run_dir: Path, *, seeds: int | None = None,
          progress: bool = True, use_tensorboard: bool = True,
          ray: Any = None) -> dict[str, Any]:
  """Trains (or resumes) the run in ``run_dir`` in this process; returns the last eval
  metrics. ``seeds``: train that many independent agents in one compiled program (gymnax
  or host gymnasium envs). ``ray`` is no longer taken here: Ray training is
  ``batchrl.distributed.train(exp, run_dir, RayOptions(...))``."""
  if ray is not None:
    raise UserInputError("experiment.train(..., ray=...) moved: call batchrl.distributed."
                         "train(exp, run_dir, batchrl.distributed.RayOptions(...)) (this "
                         "module runs in-process training only).")
  trainer = LocalTrainer(exp, run_dir, seeds=seeds)
  try:
    return loop.run(trainer, progress=progress, use_tensorboard=use_tensorboard)
  finally:
    trainer.close()
