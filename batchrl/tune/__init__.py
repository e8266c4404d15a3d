"""Hyperparameter search on Optuna: ``batchrl tune`` and ``batchrl.tune.search``.

    batchrl tune --config cartpole_fused --logdir runs --trials 16 \
        --search 'learning_rate=loguniform(1e-4,1e-2)' --set steps=200000

Pieces: ``space`` (the ``--search`` grammar, checked against the config before anything
runs), ``options`` (``TuneOptions``), ``study`` (the search directory, its SQLite study,
resume), ``trial`` (one trial as a normal run directory, trained by ``batchrl.train``, its
evaluations reported to the pruner) and ``optimize`` (``search``, the table of the best
trials, ``best.yaml``). Trials run side by side in one compiled program (``batched``,
``--batch-trials``; by default where the config allows it), one after another, P at a time
in worker processes (``parallel``, ``--parallel``) or as Ray Tune trials (``ray_tune``,
``--ray``). Optuna is the optional
extra ``batchrl[tune]``, imported only by ``optuna_module`` when a search starts; Ray Tune
is ``batchrl[tune-ray]``, imported only for ``--ray``.
"""
from batchrl.tune.optimize import completed, search, table, write_best
from batchrl.tune.options import EVAL_METRICS, TuneOptions
from batchrl.tune.space import GRAMMAR, Param, check_space, parse, parse_space
from batchrl.tune.study import BEST_FILE, STUDY_FILE, TRIALS_DIR, tune_directory

__all__ = ["BEST_FILE", "EVAL_METRICS", "GRAMMAR", "Param", "STUDY_FILE", "TRIALS_DIR",
           "TuneOptions", "check_space", "completed", "parse", "parse_space", "search", "table",
           "tune_directory", "write_best"]
