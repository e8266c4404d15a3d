"""The env runner: one Ray actor holding M host environments and a compiled copy of the policy.

A runner keeps its own ``SimState`` for its M envs (environment state, observations, the
agent's per-env internals such as recurrent carries) and, before each call, takes the
learner's *shared* model leaves: those ``act`` reads that do not depend on the number of
envs (parameters, normalizer statistics, exploration counters). It then runs the same fused
``simulate`` the local host driver runs, in ``"track"`` mode (acting advances its internals;
storing and learning happen on the learner), and returns the rollout as numpy arrays.
One remote call per rollout, never one per step.

The class is plain Python; ``batchrl.distributed.pool`` makes it a Ray actor, so importing
this module needs no Ray.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any, Sequence

import jax
import numpy as np

from batchrl import compilation_cache, programs, simulation
from batchrl.configs import Experiment
from batchrl.distributed.learner import fill_placeholders
from batchrl.train import fused
from batchrl.train.build import build_env, build_model, close_env, eval_kind, eval_steps


def with_shared(agent_state, index: Sequence[int], shared: Sequence[Any]):
  """``agent_state`` with its leaves at ``index`` (flat order) replaced by ``shared``."""
  leaves, treedef = jax.tree.flatten(agent_state)
  for i, value in zip(index, shared):
    leaves[i] = value
  return jax.tree.unflatten(treedef, leaves)


class EnvRunner:
  """Collects rollouts of ``num_envs`` host envs for the learner (see the module doc).

  Args:
    exp: the experiment, as ``Experiment.to_dict()`` (plain data travels to any machine).
    index: which runner this is (for logs).
    num_envs: M, the envs this runner steps, in its own process.
    seed: seeds this runner's envs and sampling (distinct per runner and per replacement).
    agent_state: where this runner's agent starts (``learner.runner_state``: its slice of
      the per-env leaves, placeholders for the rest); the runner never calls ``init``.
    shared_index: flat indices of the model leaves the learner sends each round.
    compile_cache: the learner's ``compilation_cache.settings()``: a runner loads what earlier
      runs compiled (JAX persists no program that calls back into Python, so the rollout
      and evaluation programs are still compiled in every runner).
  """

  def __init__(self, exp: dict, index: int, num_envs: int, seed: int, agent_state,
               shared_index: Sequence[int],
               compile_cache: compilation_cache.Settings = (None, 0.0)):
    compilation_cache.apply(compile_cache)
    spec = Experiment.from_dict(exp)
    run = dataclasses.replace(spec.run, num_envs=num_envs, num_workers=0, seed=seed)
    self.index, self.num_envs = index, num_envs
    # an env that raises is recreated in place first (its episode cut); only what the
    # policy does not cover takes the runner down and gets it replaced
    self.env = build_env(run, restart=True)
    self.agent = build_model(spec)
    self.shared_index = tuple(shared_index)
    # compiled as a local run compiles the same programs (programs.jit's kinds: less XLA
    # optimization for what runs briefly), for the same start-up
    start = programs.jit(functools.partial(simulation.init, self.env, self.agent), "once")
    self.sim = start(jax.random.key(seed), fill_placeholders(agent_state, seed))
    self._collect = programs.jit(functools.partial(_collect, self.env, self.agent,
                                                   self.shared_index), "loop", static_argnums=2)
    evaluate = fused.make_evaluate(self.env, self.agent, eval_steps(run, self.env),
                                   run.eval_episodes)
    self._evaluate = programs.jit(lambda sim, shared, cap: evaluate(
        sim._replace(agent_state=with_shared(sim.agent_state, self.shared_index, shared)),
        cap), eval_kind(self.env, run))
    self._restart = programs.jit(functools.partial(simulation.restart, self.env), "once")

  def pid(self) -> int:
    return os.getpid()

  def collect(self, shared: list, version: int, length: int) -> dict:
    """``length`` steps of every env with the given leaves; the rollout ``[length, M]``."""
    start = time.perf_counter()
    self.sim, rollout = self._collect(self.sim, shared, length)
    rollout = jax.device_get(rollout)
    return {"rollout": rollout, "version": version, "seconds": time.perf_counter() - start}

  def evaluate(self, shared: list, cap: int) -> dict:
    """First-episodes stats of the deterministic policy on this runner's envs, at most
    ``cap`` steps each (``fused.make_evaluate``); the envs are restarted afterwards
    (evaluation used them), as in a local run."""
    stats = jax.device_get(self._evaluate(self.sim, shared, np.int32(cap)))
    self.sim = self._restart(self.sim)
    return {k: np.asarray(v) for k, v in stats.items()}

  def close(self) -> None:
    close_env(self.env)


def _collect(env, agent, shared_index, sim, shared, length: int):
  sim = sim._replace(agent_state=with_shared(sim.agent_state, shared_index, shared))
  return simulation.simulate(env, agent, sim, length, mode="track")
