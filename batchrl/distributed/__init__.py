"""Distributed training on Ray: N env-runner actors, one learner, fault tolerant.

    batchrl train --config pendulum --logdir runs --ray [--runners 2] [--envs-per-runner 8]
    batchrl train --config pendulum --logdir runs --ray --address HEAD:6379

or from Python::

    from batchrl import configs, experiment
    from batchrl.distributed import RayOptions
    experiment.train(configs.get("pendulum"), run_dir, ray=RayOptions(runners=2))

Each runner (``runner.EnvRunner``) holds a ``BatchEnv`` of M Gymnasium envs and a compiled
copy of the policy; this process is the learner (``trainer.DistributedTrainer``). Parameters
travel once per round through Ray's object store, rollouts come back as numpy arrays, and no
call is made per step. Runners that die, raise or hang are replaced (``pool.RunnerPool``).
"""
from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Iterator

from batchrl.distributed.options import RayOptions
from batchrl.distributed.pool import RunnerFailure

__all__ = ["RayOptions", "RunnerFailure", "preflight", "trainer_on_ray"]


def preflight(exp, options: RayOptions, seeds: int | None = None) -> RayOptions:
  """Checks made before a run directory exists: Ray installed, the address reachable, the
  experiment fit for runners. Returns ``options`` with ``envs_per_runner`` resolved."""
  from batchrl.distributed import cluster, trainer
  options = options.resolve(exp.run.num_envs)
  trainer.check(exp, options, seeds)
  cluster.import_ray()
  if options.address is not None:
    cluster.check_address(options.address)
  return options


@contextlib.contextmanager
def trainer_on_ray(exp, run_dir, options: RayOptions, seeds: int | None = None) -> Iterator:
  """A ``DistributedTrainer`` for ``exp`` while connected to Ray; runners and (for a local
  instance) Ray itself are stopped on exit."""
  from batchrl.distributed import cluster, trainer

  options = preflight(exp, options, seeds)
  # a local instance must fit every runner, even on a machine with fewer cores
  cpus = options.local_cpus or max(os.cpu_count() or 1,
                                   math.ceil(options.runners * options.runner_cpus))
  with cluster.connect(options.address, Path(run_dir) / "ray", cpus):
    learner = trainer.DistributedTrainer(exp, Path(run_dir), options)
    try:
      yield learner
    finally:
      learner.close()
