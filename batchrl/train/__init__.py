"""Training drivers. ``fused``: whole runs as compiled programs over in-graph envs."""
from batchrl.train.fused import (first_episode_stats, init_sim, make_evaluate, make_iteration,
                                 make_run_chunk, train)

__all__ = ["first_episode_stats", "init_sim", "make_evaluate", "make_iteration",
           "make_run_chunk", "train"]
