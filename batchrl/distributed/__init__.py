"""Distributed training on Ray: N env-runner actors, one learner, fault tolerant.

    batchrl train --config pendulum --logdir runs --ray [--runners 2] [--envs-per-runner 8]
    batchrl train --config pendulum --logdir runs --ray --address HEAD:6379

or from Python::

    from batchrl import configs, distributed
    distributed.train(configs.get("pendulum"), run_dir, distributed.RayOptions(runners=2))

Each runner (``runner.EnvRunner``) holds a ``BatchEnv`` of M Gymnasium envs and a compiled
copy of the policy; this process is the learner (``trainer.DistributedTrainer``, a
``batchrl.train.trainer.Trainer`` like the local one, driven by the same
``batchrl.train.loop``). Parameters travel once per round through Ray's object store,
rollouts come back as numpy arrays, and no call is made per step. Runners that die, raise or
hang are replaced (``pool.RunnerPool``). Ray itself is imported only when a run starts
(``cluster.import_ray``): it is an optional extra.
"""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from batchrl.configs import Experiment
from batchrl.distributed import cluster
from batchrl.distributed.options import RayOptions
from batchrl.distributed.pool import RunnerFailure
from batchrl.distributed.trainer import DistributedTrainer, check
from batchrl.train import loop

__all__ = ["DistributedTrainer", "RayOptions", "RunnerFailure", "preflight", "train",
           "trainer_on_ray"]


def preflight(exp: Experiment, options: RayOptions, seeds: int | None = None) -> RayOptions:
  """Checks made before a run directory exists: Ray installed, the address reachable, the
  experiment fit for runners. Returns ``options`` with ``envs_per_runner`` resolved."""
  options = options.resolve(exp.run.num_envs)
  check(exp, options, seeds)
  cluster.import_ray()
  if options.address is not None:
    cluster.check_address(options.address)
  return options


@contextlib.contextmanager
def trainer_on_ray(exp: Experiment, run_dir, options: RayOptions,
                   seeds: int | None = None) -> Iterator[DistributedTrainer]:
  """A ``DistributedTrainer`` for ``exp`` while connected to Ray; runners and (for a local
  instance) Ray itself are stopped on exit."""
  options = preflight(exp, options, seeds)
  # the learner is built (and its update compiled) while Ray starts
  with ThreadPoolExecutor(1, thread_name_prefix="batchrl-learner") as executor:
    local = executor.submit(DistributedTrainer, exp, Path(run_dir), options)
    with cluster.connect(options.address, Path(run_dir) / "ray", options.instance_cpus()):
      learner = local.result()
      try:
        yield learner.start()
      finally:
        learner.close()


def train(exp: Experiment, run_dir, options: RayOptions, *, seeds: int | None = None,
          progress: bool = True, use_tensorboard: bool = True) -> dict[str, Any]:
  """Trains (or resumes) the run in ``run_dir`` with its envs in Ray actors; returns the last
  eval metrics. Reports, evaluations and checkpoints are those of a local run
  (``batchrl.experiment.train``), and either kind of run resumes the other's checkpoints."""
  with trainer_on_ray(exp, run_dir, options, seeds) as trainer:
    return loop.run(trainer, progress=progress, use_tensorboard=use_tensorboard)
