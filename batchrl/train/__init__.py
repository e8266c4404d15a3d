"""Training: ``fused`` (whole runs as compiled programs over in-graph envs), ``build`` (a
run's env and agent), ``host_update`` (an update's pure pieces run from the host),
``schedule``, ``metrics``, ``rundir`` (config, resume, checkpoints), the ``Trainer`` protocol
(``trainer``), ``LocalTrainer`` (``local``) and the driver loop (``loop``). The Ray trainer is
``batchrl.distributed``; ``batchrl train`` picks one."""
from batchrl.train.fused import (
  first_episode_stats,
  init_sim,
  make_evaluate,
  make_iteration,
  make_run_chunk,
  train,
)

__all__ = ["first_episode_stats", "init_sim", "make_evaluate", "make_iteration",
           "make_run_chunk", "train"]
