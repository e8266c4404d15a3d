"""The ``batchrl tune`` command line the tune tests share: a fixed timestamp, a seeded random
sampler, no pruner and no TensorBoard, so that repeats train the same values."""
from __future__ import annotations


def tune_argv(logdir, config: str, space, sets, *extra, trials: int = 2) -> list[str]:
  argv = ["tune", "--config", config, "--logdir", str(logdir), "--timestamp", "T",
          "--trials", str(trials), "--sampler", "random", "--pruner", "none", "--seed", "0",
          "--no-tensorboard"]
  for item in space:
    argv += ["--search", item]
  for item in sets:
    argv += ["--set", item]
  return argv + list(extra)
