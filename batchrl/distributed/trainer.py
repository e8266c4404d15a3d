"""``DistributedTrainer``: the learner's half of a run on Ray.

It is a ``batchrl.train.trainer.Trainer``, as the local ``LocalTrainer`` is, so the same
``batchrl.train.loop`` reports, evaluates and checkpoints both.

One *round* is K iterations (``RayOptions.rounds_of``): the learner puts the shared leaves
in Ray's object store once, each runner collects K·period steps of its M envs and returns
them as numpy arrays, and the learner runs K iterations of stores + update on the
concatenated ``[K, period, N·M]`` batch. On-policy agents (PPO, VPG, TRPO, A2C) use K = 1
and wait for every runner, so each update sees exactly the batch a local run with N×M envs
makes, collected with the current parameters (``param_lag`` 0). Replay agents (DQN, NAF,
DQFD, DDPG, TD3, SAC) overlap: runners collect round r+1 with the parameters from before
round r's updates while the learner learns on round r, so their experience is up to K
updates old.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from batchrl import compilation_cache, programs
from batchrl.configclass import ConfigError
from batchrl.configs import Experiment
from batchrl.distributed import cluster, learner
from batchrl.distributed.options import RayOptions
from batchrl.distributed.pool import RunnerPool
from batchrl.distributed.runner import EnvRunner
from batchrl.specs import EnvSpec
from batchrl.train.build import agent_spaces, build_model, chunk_kind, eval_cap
from batchrl.train.metrics import summarize
from batchrl.train.rundir import restore_checkpoint, save_checkpoint
from batchrl.train.schedule import schedule

log = logging.getLogger("batchrl")


def check(exp: Experiment, options: RayOptions, seeds: int | None) -> None:
  """What a distributed run needs, checked before anything starts."""
  if exp.run.backend == "gymnax":
    raise ConfigError(f"--ray runs host environments (run.backend='gymnasium' or 'envpool'); "
                      f"{exp.name!r} uses backend {exp.run.backend!r}, whose whole training "
                      "loop is one compiled program on one device: train it without --ray.")
  if seeds is not None:
    raise ConfigError("--seeds and --ray cannot be combined (--seeds trains its runs in one "
                      "program here; --ray spreads one run's envs over runners).")
  if exp.run.num_envs != options.runners * options.envs_per_runner:
    raise ConfigError(f"run.num_envs={exp.run.num_envs} must equal runners x envs_per_runner "
                      f"= {options.runners} x {options.envs_per_runner}.")


def _runner_seed(seed: int, index: int, incarnation: int) -> int:
  """Distinct seeds per runner and per replacement (a replacement must not replay the
  episodes its predecessor saw)."""
  return (seed * 1_000_003 + 7_919 * (index + 1) + 104_729 * incarnation) % (2**31 - 1)


class DistributedTrainer:
  """The learner of a run on Ray (see the module doc). Built without Ray (its update starts
  compiling in a thread at once); ``start`` needs Ray initialised and starts the runners."""

  def __init__(self, exp: Experiment, run_dir: Path, options: RayOptions):
    self._ray = cluster.import_ray()
    self.exp, self.run_dir, self.options = exp, Path(run_dir), options
    self.agent = build_model(exp)
    if self.agent.period is None:
      raise ConfigError(f"agent {exp.agent!r} has no fixed update period; --ray needs one.")
    self.spec = EnvSpec(*agent_spaces(exp.run), exp.run.num_envs)  # after preprocessing
    self.steps_per_iteration = exp.run.num_envs * self.agent.period
    self.plan = schedule(exp.run, self.steps_per_iteration)
    self.rounds_of = _round_size(options, self.agent, self.plan)
    self.axes = learner.env_axes(self.agent, self.spec)
    self.shared_index = learner.shared_index(self.agent, self.spec, self.axes)
    self.sim = learner.init_sim(self.agent, self.spec, jax.random.key(exp.run.seed))
    self._learn = learner.make_learn(self.agent, chunk_kind(exp.run))
    agent_summary = self.agent.summarize or (lambda state: {"scalars": {}, "histograms": {}})
    self._summarize = programs.jit(agent_summary, "once")
    self.iteration = 0
    self.pool: RunnerPool | None = None
    self._reported_restarts = 0
    # learn's compilation (seconds) overlaps Ray's and the runners' start-up
    self._compiling = programs.compile_ahead(lambda: self._learn.lower(
        self.sim, learner.batch_structs(self.agent, self.spec, self.sim, self.rounds_of)))

  def start(self) -> "DistributedTrainer":
    """Starts the runners (Ray must be initialised); returns self."""
    remote = self._ray.remote(num_cpus=self.options.runner_cpus)(EnvRunner)
    exp_dict = _runner_experiment(self.exp, self.options.runners).to_dict()
    compile_cache = compilation_cache.settings()
    options = self.options

    def spawn(index: int, incarnation: int):
      seed = _runner_seed(self.exp.run.seed, index, incarnation)
      state = learner.runner_state(self.sim.agent_state, self.axes, index,
                                   options.envs_per_runner)
      return remote.remote(exp_dict, index, options.envs_per_runner, seed, state,
                           self.shared_index, compile_cache)

    self.pool = RunnerPool(spawn, options.runners, timeout=options.runner_timeout,
                           start_timeout=options.start_timeout,
                           max_restarts=options.max_restarts)
    return self

  @property
  def step(self) -> int:
    return self.iteration * self.steps_per_iteration

  # ------------------------------------------------------------------------- checkpoints

  def restore(self) -> bool:
    return restore_checkpoint(self)

  def save(self) -> None:
    save_checkpoint(self)

  # ------------------------------------------------------------------------- phases

  def _shared(self):
    return self._ray.put(learner.shared_values(self.sim, self.shared_index))

  def _collect(self, version: int, rounds: int):
    """Starts a collect on every runner with the current leaves; ``pool.finish`` waits."""
    return self.pool.start("collect", self._shared(), version, rounds * self.agent.period)

  def train_phase(self, iterations: int, progress=None, stop=None) -> dict[str, Any]:
    """``iterations`` iterations (a multiple of ``rounds_of``) on the runners' experience;
    the caller advances ``iteration`` by ``metrics["iterations"]``, as with the local
    ``LocalTrainer``. ``progress`` hears the iterations done after each round; once
    ``stop()`` is true as a round is learned from, the phase ends after it."""
    start = time.perf_counter()
    k = self.rounds_of
    pending, infos, lags, runner_seconds = None, [], [], np.zeros(len(self.pool))
    trained = 0
    for done in range(0, iterations, k):
      version = self.iteration + done  # updates made so far
      answers = self.pool.finish(pending or self._collect(version, k))
      batch = learner.gather([a["rollout"] for a in answers], k)
      lags.append(version - answers[0]["version"])
      runner_seconds += [a["seconds"] for a in answers]
      # replay agents: the next round is collected while this one is learned from
      last = done + k >= iterations or (stop is not None and stop())
      pending = None if self.agent.on_policy or last else self._collect(version, k)
      self._compiling.join()  # learn must not be compiled twice at once
      self.sim, info = self._learn(self.sim, batch)
      infos.append(jax.device_get(info))
      trained = done + k
      if progress is not None:
        progress(trained)
      if last:
        break
    metrics = summarize(jax.tree.map(lambda *x: np.concatenate(x), *infos))
    seconds = max(time.perf_counter() - start, 1e-9)
    metrics["steps_per_second"] = trained * self.steps_per_iteration / seconds
    metrics["param_lag"] = float(np.mean(lags))
    per_runner = trained * self.options.envs_per_runner * self.agent.period
    for i, busy in enumerate(runner_seconds):
      metrics[f"runner{i}/steps_per_second"] = per_runner / max(busy, 1e-9)
    return {**metrics, **self._restart_metrics(), "iterations": trained}

  def _restart_metrics(self) -> dict[str, Any]:
    new = self.pool.restarts[self._reported_restarts:]
    self._reported_restarts = len(self.pool.restarts)
    out: dict[str, Any] = {"runner_restarts": len(self.pool.restarts)}
    if new:
      out["restart_reasons"] = "; ".join(f"runner {r.runner}: {r.reason}" for r in new)
    return out

  def eval_phase(self) -> dict[str, Any]:
    """The deterministic policy on every runner's envs, episodes pooled."""
    cap = eval_cap(self.exp.run, self.step)
    stats = self.pool.finish(self.pool.start("evaluate", self._shared(), cap))
    metrics = summarize({name: np.array([float(s[name]) for s in stats])
                         for name in ("episodes", "mean_score", "mean_length")})
    return {**metrics, "eval_steps": float(max(s["eval_steps"] for s in stats))}

  def summaries(self) -> dict:
    """The agent's TensorBoard material, from the learner's state."""
    return self._summarize(self.sim.agent_state)

  def close(self) -> None:
    if self.pool is not None:
      self.pool.close()


def _runner_experiment(exp: Experiment, runners: int) -> Experiment:
  """What each runner builds: the run's ``eval_episodes`` shared out over the runners."""
  episodes = exp.run.eval_episodes
  if episodes is None:
    return exp
  run = dataclasses.replace(exp.run, eval_episodes=math.ceil(episodes / runners))
  return dataclasses.replace(exp, run=run)


def _round_size(options: RayOptions, agent, plan: dict[str, int]) -> int:
  """K: 1 for on-policy agents; for replay agents ``refresh_every`` (or enough iterations
  for about ``min_round_steps`` env steps per runner call), a divisor of every train
  phase's length (``plan["report"]`` and the budget's last, shorter phase) so every round
  has the same length (one compiled program)."""
  if agent.on_policy:
    return 1
  want = options.refresh_every or max(1, math.ceil(
      options.min_round_steps / (options.envs_per_runner * agent.period)))
  phases = math.gcd(plan["report"], plan["total"] % plan["report"] or plan["report"])
  want = min(want, phases)
  return max(d for d in range(1, want + 1) if phases % d == 0)
