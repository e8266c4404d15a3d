"""``TuneOptions``: how a search runs (``batchrl tune`` flags, ``batchrl.tune.search`` keywords)."""
from __future__ import annotations

from typing import Literal

from batchrl.configclass import ConfigError, configclass, param

# What an evaluation reports (``batchrl.train.fused.first_episode_stats``): the metrics a
# trial can be judged by.
EVAL_METRICS = ("mean_score", "mean_length", "episodes")


@configclass
class TuneOptions:
  """How a hyperparameter search runs; the search space and the config are given apart."""

  trials: int = param(20, "Trials the study holds when the search is done: finished and "
                      "pruned ones count, so running the same search again runs only the rest.")
  metric: str = param("mean_score", "Evaluation metric a trial is judged by: "
                      f"{', '.join(EVAL_METRICS)}.")
  direction: Literal["maximize", "minimize"] = param("maximize", "Whether a larger or a "
                                                     "smaller metric is better.")
  objective: Literal["best", "last"] = param(
      "best", "Which evaluation of a trial counts (its value in the Optuna study): its best "
      "or its last. Tied trials are ranked by the mean of their evaluations.")
  sampler: Literal["tpe", "random", "grid"] = param(
      "tpe", "How values are picked: 'tpe' (Optuna's default), 'random', or 'grid' (every "
      "combination of int(...) and choice(...) values, at most trials of them).")
  pruner: Literal["median", "hyperband", "none"] = param(
      "median", "Stops a trial early whose intermediate evaluations are hopeless compared "
      "with earlier trials at the same step: 'median', 'hyperband' or 'none'.")
  seed: int | None = param(None, "Seeds the sampler and every trial's training (run.seed); "
                           "None: the config's run.seed. Every trial trains with the same "
                           "seeds, so trials differ only by their values.")
  seeds_per_trial: int = param(1, "Seeds each trial trains (in one compiled program on the "
                               "gymnax backend, one after another on host envs); the "
                               "objective is averaged over them.")
  tensorboard: bool = param(True, "Write TensorBoard events in every trial's run directory.")

  def __post_init__(self):
    if self.trials < 1:
      raise ConfigError(f"--trials must be >= 1, got {self.trials}.")
    if self.seeds_per_trial < 1:
      raise ConfigError(f"--seeds-per-trial must be >= 1, got {self.seeds_per_trial}.")
    if self.metric not in EVAL_METRICS:
      raise ConfigError(f"--metric {self.metric!r} is not an evaluation metric; valid: "
                        f"{', '.join(EVAL_METRICS)}.")
