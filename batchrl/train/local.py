"""``LocalTrainer``: a run trained in this process (a ``Trainer``, see ``batchrl.train.trainer``).

Environments are in-graph (gymnax: the whole train phase is one compiled program, and with
``seeds`` several independent runs are ``vmap``-ed in it) or host Gymnasium envs stepped by
worker processes through an ``InGraphBatchEnv`` (with ``seeds``, one host batch of every
run's envs, stepped as lanes: one crossing a step for all the runs). Resume is exact for
the ``gymnax`` backend (the environment state is part of the checkpoint); with host
environments the agent state is restored exactly and the environments start new episodes.
"""
from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from batchrl import programs, simulation
from batchrl.configclass import ConfigError
from batchrl.configs import Experiment
from batchrl.parts import LaneSplit, PartRunner
from batchrl.train import fused, host_update
from batchrl.train.build import (
  build_env,
  build_model,
  chunk_kind,
  close_env,
  eval_cap,
  eval_kind,
  eval_steps,
)
from batchrl.train.cpu_threads import start_cpu_backend
from batchrl.train.metrics import (
  nan_mean,
  per_seed_episodes,
  per_seed_metrics,
  per_seed_scores,
  summarize,
)
from batchrl.train.rundir import restore_checkpoint, save_checkpoint
from batchrl.train.schedule import run_in_calls, schedule

# --seeds: gymnax envs are vmap-ed with the agents; host envs step as lanes of one batch
# (``InGraphBatchEnv``), every seed's envs in one crossing. EnvPool's XLA step has no lanes.
SEEDED_BACKENDS = ("gymnax", "gymnasium")


def check_seeds(exp: Experiment, seeds: int | None) -> None:
  """``--seeds`` needs gymnax or host environments: checked before a run directory is made."""
  if seeds is None:
    return
  if not isinstance(seeds, int) or seeds < 1:
    raise ConfigError(f"--seeds must be a positive int, got {seeds!r}.")
  if exp.run.backend not in SEEDED_BACKENDS:
    raise ConfigError("--seeds trains several agents in one compiled program, with gymnax "
                      "environments or host ones (run.backend 'gymnax' or 'gymnasium'); "
                      f"{exp.name!r} uses backend {exp.run.backend!r}.")


class LocalTrainer:
  """Compiled pieces of one run in this process: train, eval, save (see the module doc)."""

  def __init__(self, exp: Experiment, run_dir: Path, *, seeds: int | None = None):
    check_seeds(exp, seeds)
    # before anything compiles: XLA's pool is sized when JAX's backend starts
    start_cpu_backend(exp.run.xla_threads)
    self.exp, self.run_dir, self.seeds = exp, Path(run_dir), seeds
    host = exp.run.backend == "gymnasium"
    self.env = build_env(exp.run, lanes=seeds if host else None)
    self.agent = build_model(exp)
    self.steps_per_iteration = exp.run.num_envs * self.agent.period
    self.plan = schedule(exp.run, self.steps_per_iteration)
    self._progress = None  # the train phase's listener (``train_phase``'s ``progress``)
    self._heard = 0  # the last count it heard
    self._call_start = 0  # iterations of the phase done before the call under way
    self._seconds_per_iteration = None  # the last call's pace (``schedule.run_in_calls``)
    # progress from inside the chunk only where its program steps host envs already: a host
    # callback keeps a program out of JAX's persistent cache, and a gymnax run's chunk
    # compiled again costs every later run ~2.3 s of start-up (fused CartPole, 2 cores)
    tick = self._tick if exp.run.backend != "gymnax" else None
    # donated: a call writes the new sim over the old, so the replay memory of an off-policy
    # agent is not copied on every call (``batchrl train`` calls every ~0.5 s)
    self.run_chunk = fused.make_run_chunk(self.env, self.agent, num_seeds=seeds,
                                          on_iteration=tick, donate=True,
                                          kind=chunk_kind(exp.run))
    evaluate = fused.make_evaluate(self.env, self.agent, eval_steps(exp.run, self.env),
                                   exp.run.eval_episodes, num_seeds=seeds)
    self.evaluate = programs.jit(evaluate, eval_kind(self.env, exp.run))
    # restarts and summaries run for a moment: compiled without optimization
    restart = functools.partial(simulation.restart, self.env)
    self.restart = programs.jit(jax.vmap(restart) if seeds else restart, "once")
    agent_summary = self.agent.summarize or (lambda state: {"scalars": {}, "histograms": {}})
    first = (lambda state: jax.tree.map(lambda x: x[0], state)) if seeds else (lambda s: s)
    self._summarize = programs.jit(lambda state: agent_summary(first(state)), "once")
    self.sim = fused.init_sim(self.env, self.agent, jax.random.key(exp.run.seed), seeds)
    self.iteration = 0
    # seeds are independent lanes: on a CPU, one part of them per core, side by side. Not
    # for an update run from the host (``host_update``): it spreads itself over the cores,
    # and two parts' updates at once hung (each one's host callback dispatches programs of
    # its own). Nor for host envs: their lanes step in one host batch
    split = seeds and not host_update.on_host(self.agent) and not host
    self._parts = LaneSplit.for_backend(seeds) if split else LaneSplit(seeds or 1, 1)
    self._runner = PartRunner(self._parts)
    # evaluation compiles on another core while the first chunk compiles and runs
    # its shapes only: the first chunk takes over (donates) the sim's arrays meanwhile. No
    # sharding in them: with one, JAX keys the program apart from the call's (committed
    # arrays on the same device) and the first evaluation compiled it again (0.5 s, CartPole)
    first_part = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                              self._parts.split(self.sim)[0])
    self._eval_compiling = programs.compile_ahead(
        lambda: self.evaluate.lower(first_part, jnp.int32(1)))

  @property
  def step(self) -> int:
    return self.iteration * self.steps_per_iteration

  def restore(self) -> bool:
    """Loads the latest good checkpoint, if any; returns whether one was loaded."""
    if not restore_checkpoint(self):
      return False
    if self.exp.run.backend != "gymnax":
      self.sim = self.restart(self.sim)  # host envs restarted: their state is not saved
    return True

  def save(self) -> None:
    save_checkpoint(self)

  def _tick(self, done) -> None:
    """From the compiled chunk: ``done`` iterations of the call (per part)."""
    self._hear(self._call_start + int(np.max(done)))

  def _hear(self, done: int) -> None:
    """Tells the phase's listener ``done`` once: a host run's chunk ticks from inside, and
    the count after each call must not repeat its last tick."""
    listener = self._progress
    if listener is not None and done > self._heard:
      self._heard = done
      listener(done)

  def train_phase(self, iterations: int, progress=None, stop=None) -> dict[str, Any]:
    """``iterations`` iterations; with ``stop``, in compiled calls of about
    ``schedule.CALL_SECONDS`` each, ending the phase early after the first call at whose
    end ``stop()`` is true: ``metrics["iterations"]`` says how many were trained."""
    self._progress, self._heard = progress, 0
    try:
      return self._train(iterations, stop)
    finally:
      self._progress = None

  def _train(self, iterations: int, stop=None) -> dict[str, Any]:
    start = time.perf_counter()
    # one program for every call: a shorter one runs in the program of a full phase
    length = max(iterations, self.plan["report"])
    sims, infos = self._parts.split(self.sim), []  # joined once, at the end

    def call(count: int, start: int) -> None:
      nonlocal sims
      sims, call_infos = self._call(sims, count, length, start)
      if len(sims) == 1:  # self.sim itself went into the call (donated): the new one
        self.sim = sims[0]
      infos.append(call_infos)
      self._hear(start + count)

    done, self._seconds_per_iteration, _ = run_in_calls(iterations, call, stop,
                                                        self._seconds_per_iteration)
    self.sim = self._parts.join(sims)
    axis = int(bool(self.seeds))  # infos are [N] per iteration, [S, N] with seeds
    infos = jax.tree.map(lambda *xs: np.concatenate(xs, axis=axis), *infos)
    metrics = summarize(infos)
    metrics["steps_per_second"] = done * self.steps_per_iteration / max(
        time.perf_counter() - start, 1e-9) * (self.seeds or 1)
    if self.seeds:
      metrics.update(per_seed_metrics(per_seed_scores(infos), per_seed_episodes(infos)))
    return {**metrics, "iterations": done}

  def _call(self, sims: list, count: int, length: int, start: int) -> tuple[list, dict]:
    """One compiled call of ``count`` iterations on every part's sim (waited for): the new
    sims and the infos on the host."""
    self._call_start = start
    outs = self._runner.each(lambda sim: self.run_chunk(sim, count, length), sims)
    infos = self._parts.join_host([info for _, info in outs])  # on the host already
    return [sim for sim, _ in outs], infos

  def eval_phase(self) -> dict[str, Any]:
    self._eval_compiling.join()
    cap = jnp.int32(eval_cap(self.exp.run, self.step))
    stats = self._parts.join_host(jax.device_get(
        self._runner.each(lambda sim: self.evaluate(sim, cap), self._parts.split(self.sim))))
    if self.exp.run.backend != "gymnax":
      self.sim = self.restart(self.sim)  # evaluation used the same host envs
    metrics = {k: nan_mean(v) for k, v in stats.items()}
    if self.seeds:
      metrics.update(per_seed_metrics(np.asarray(stats["mean_score"])))
    return metrics

  def summaries(self) -> dict:
    """The agent's TensorBoard material (the first seed's when training several)."""
    return self._summarize(self.sim.agent_state)

  def close(self) -> None:
    self._runner.close()
    close_env(self.env)
