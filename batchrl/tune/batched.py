"""Trials side by side in ONE compiled program (``--batch-trials``), as ``--seeds`` trains
seeds side by side: the training run is ``vmap``-ed over the trials' values.

A value can be batched when it does not change the program's shapes: a float field of the
agent's config searched by ``uniform``/``loguniform`` (learning_rate, clip_range,
entropy_coef, discount...). The agent is built *inside* the vmapped function from a twin of
the config whose batched fields are traced values (``traced_config``); the agent's
arithmetic is the same code, so a trial trained in a group equals the same values trained
alone (same seed; up to float rounding where XLA folded a constant). Every other searched
value (``int``, ``choice``, run fields) is static: trials are grouped by those values and
each group is one program. Each trial still gets its own run directory (config.yaml,
metrics.jsonl, TensorBoard, checkpoints that ``batchrl train`` resumes); a pruned trial
stops logging, its lane of the group computes on until the group ends. An interrupted
group starts again from the beginning on resume.

On a CPU a group's lanes are split into equal parts, one per usable core, each part running
the same compiled program in its own thread (``batchrl.parts``).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import shutil
import time
from pathlib import Path

import jax
import jax.numpy as jnp

from batchrl import programs
from batchrl.agents.families import family
from batchrl.configs import Experiment, RunConfig
from batchrl.errors import UserInputError
from batchrl.logging import RunLogger
from batchrl.parts import PartRunner, Parts
from batchrl.simulation import init as init_simulation
from batchrl.train import fused
from batchrl.train.build import build_env, close_env, eval_steps
from batchrl.train.metrics import summarize
from batchrl.train.rundir import prepare_run, save_sim
from batchrl.train.schedule import due, schedule
from batchrl.tune.options import TuneOptions
from batchrl.tune.space import Param
from batchrl.tune.study import FAILED, RESUMES, RUN_DIR, TRIALS_DIR
from batchrl.tune.trial import TrialFailed, objective_of, trial_experiment

log = logging.getLogger("batchrl")


def batched_fields(exp: Experiment, params: tuple[Param, ...]) -> tuple[str, ...]:
  """The agent-config fields of ``params`` a group traces (continuous floats of the agent)."""
  run_fields = {f.name for f in dataclasses.fields(RunConfig)}
  fields = []
  for p in params:
    section, _, name = p.key.rpartition(".")
    if p.kind not in ("uniform", "loguniform") or section == "run":
      continue
    if not section and name in run_fields:
      continue
    if isinstance(getattr(exp.config, name, None), float):
      fields.append(name)
  return tuple(fields)


def check_batching(exp: Experiment, opts: TuneOptions, batch_trials: int) -> None:
  """``--batch-trials`` needs in-graph envs and one seed per trial (checked before anything
  runs)."""
  if batch_trials < 1:
    raise UserInputError(f"--batch-trials must be >= 1, got {batch_trials}.")
  if batch_trials > 1 and exp.run.backend != "gymnax":
    raise UserInputError("--batch-trials trains trials in one compiled program and needs "
                         f"in-graph environments (run.backend='gymnax'); {exp.name!r} uses "
                         f"{exp.run.backend!r}.")
  if batch_trials > 1 and opts.seeds_per_trial > 1:
    raise UserInputError("--batch-trials takes one seed per trial; leave out "
                         "--seeds-per-trial.")
  if batch_trials > 1 and family(exp.agent).make(exp.config).top_level_update:
    # its update is a host callback running programs of its own, built from the config's
    # values: traced (batched) values cannot reach it
    loop = getattr(exp.config, "update_loop", None)
    raise UserInputError(f"--batch-trials traces the searched values inside one program, "
                         f"but {exp.name!r} runs its update outside the program (PPO's "
                         f"update_loop={loop!r} on this backend); run without "
                         "--batch-trials, or with --set update_loop=scan.")


def traced_config(config, values: dict):
  """A twin of ``config`` whose fields in ``values`` hold traced arrays. It skips the
  config's checks (they need concrete values): every trial's concrete config passed them."""
  twin = object.__new__(type(config))
  for f in dataclasses.fields(config):
    object.__setattr__(twin, f.name, values.get(f.name, getattr(config, f.name)))
  return twin


class GroupPrograms:
  """The compiled init, training chunk and evaluation of one group, vmapped over values
  ``{field: [G]}``; every trial starts from the same key (the same seed as alone)."""

  def __init__(self, exp: Experiment, env):
    make = family(exp.agent).make
    num_steps = eval_steps(exp.run, env)

    def agent_of(values):
      return make(traced_config(exp.config, values))

    def init(values, key):
      return init_simulation(env, agent_of(values), key)

    def chunk(values, sim, num_iterations):
      iteration = fused.make_iteration(env, agent_of(values))
      return jax.lax.scan(lambda s, _: iteration(s), sim, None, length=num_iterations)

    def evaluate(values, sim):
      return fused.make_evaluate(env, agent_of(values), num_steps)(sim)

    self.init = programs.jit(jax.vmap(init, in_axes=(0, None)), "once")
    self.chunk = programs.jit(jax.vmap(chunk, in_axes=(0, 0, None)), "loop", static_argnums=2)
    self.evaluate = programs.jit(jax.vmap(evaluate), "once")
    self.model = make(exp.config)  # the group's static parts: its period, its scratch
    self.period = self.model.period


@dataclasses.dataclass
class Lane:
  """One trial of a group: its Optuna trial, experiment, run directory, logger, state."""

  trial: object
  exp: Experiment
  run_dir: Path
  logger: RunLogger | None = None
  stopped: str | None = None  # why the pruner stopped it
  stopped_at: int | None = None  # at which step


def run_groups(optuna, study, count: int, base: Experiment, overrides: list[str],
               params: tuple[Param, ...], opts: TuneOptions, tune_dir: Path,
               batch_trials: int, callback, stop=None) -> None:
  """Asks Optuna for ``count`` trials, ``batch_trials`` at a time, and trains each batch as
  groups of equal static values; tells Optuna each result."""
  while count > 0:
    lanes = []
    for _ in range(min(batch_trials, count)):
      trial = study.ask()
      try:
        exp = trial_experiment(trial, base, overrides, params)
      except TrialFailed as e:
        log.warning("%s", e)
        _tell(optuna, study, trial, optuna.trial.TrialState.FAIL, None, callback)
        continue
      lanes.append(Lane(trial, exp, Path(tune_dir) / TRIALS_DIR / str(trial.number)))
    count -= batch_trials
    fields = batched_fields(base, params)
    groups: dict[str, list[Lane]] = {}
    for lane in lanes:
      static = dataclasses.replace(lane.exp, config=lane.exp.config.replace(
          **{f: getattr(base.config, f) for f in fields}))
      groups.setdefault(repr(static), []).append(lane)
    for group in groups.values():
      _train_group(optuna, study, group, fields, opts, tune_dir, callback, stop)


def _train_group(optuna, study, lanes: list[Lane], fields: tuple[str, ...],
                 opts: TuneOptions, tune_dir: Path, callback, stop) -> None:
  exp = lanes[0].exp
  env = build_env(exp.run)
  try:
    group = GroupPrograms(exp, env)
    values = {f: jnp.asarray([getattr(l.exp.config, f) for l in lanes], jnp.float32)
              for f in fields}
    for lane in lanes:
      _start(lane, tune_dir, opts)
    log.info("Training trials %s in one program (%s batched)",
             ", ".join(str(l.trial.number) for l in lanes), ", ".join(fields) or "nothing")
    try:
      _drive(group, values, lanes, exp, opts, stop)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError) as e:
      raise UserInputError(f"--batch-trials: agent {exp.agent!r} uses one of "
                           f"{', '.join(fields)} as a Python value, so it cannot be batched "
                           f"({type(e).__name__}); run without --batch-trials.") from None
  finally:
    for lane in lanes:
      if lane.logger is not None:
        lane.logger.close()
    close_env(env)
  states = optuna.trial.TrialState
  for lane in lanes:
    if lane.stopped:
      _tell(optuna, study, lane.trial, states.PRUNED, None, callback)
      continue
    value = objective_of(lane.run_dir, opts)
    if math.isfinite(value):
      _tell(optuna, study, lane.trial, states.COMPLETE, value, callback)
    else:
      lane.trial.set_user_attr(FAILED, f"no evaluation gave a finite {opts.metric}")
      _tell(optuna, study, lane.trial, states.FAIL, None, callback)


def _start(lane: Lane, tune_dir: Path, opts: TuneOptions) -> None:
  """The lane's run directory, fresh: a group starts from the beginning, so what an
  interrupted trial it continues left behind is removed."""
  trial = lane.trial
  trial.set_user_attr(RUN_DIR, str(lane.run_dir.relative_to(tune_dir)))
  old = trial.user_attrs.get(RESUMES)
  if old is not None:
    shutil.rmtree(Path(tune_dir) / TRIALS_DIR / str(old), ignore_errors=True)
  shutil.rmtree(lane.run_dir, ignore_errors=True)
  prepare_run(lane.run_dir, lane.exp, [])
  lane.logger = RunLogger(lane.run_dir, opts.tensorboard)


def _drive(group: GroupPrograms, values: dict, lanes: list[Lane], exp: Experiment,
           opts: TuneOptions, stop) -> None:
  """The train / evaluate / checkpoint cadence of ``batchrl.train.loop`` for every lane."""
  steps_per_iteration = exp.run.num_envs * group.period
  plan = schedule(exp.run, steps_per_iteration)
  parts = Parts.for_backend(len(lanes))
  part_values = parts.split(values)
  with PartRunner(parts) as runner:
    key = jax.random.key(exp.run.seed)
    sims = runner.each(group.init, part_values, [key] * parts.count)
    eval_compiling = programs.compile_ahead(
        lambda: group.evaluate.lower(part_values[0], sims[0]))
    iteration = 0
    while iteration < plan["total"] and not all(l.stopped for l in lanes):
      before, start = iteration, time.perf_counter()
      outs = runner.each(lambda v, s: group.chunk(v, s, plan["report"]), part_values, sims)
      sims = [sim for sim, _ in outs]
      infos = parts.join_host(jax.device_get([info for _, info in outs]))
      iteration += plan["report"]
      step, final = iteration * steps_per_iteration, iteration >= plan["total"]
      rate = plan["report"] * steps_per_iteration / max(time.perf_counter() - start, 1e-9)
      for i, lane in enumerate(lanes):
        if not lane.stopped:
          metrics = {**summarize(_lane(infos, i)), "steps_per_second": rate}
          _log(lane.logger, step, "train", metrics)
      if due(before, iteration, plan["eval"], final):
        eval_compiling.join()
        stats = parts.join_host(jax.device_get(runner.each(group.evaluate, part_values,
                                                           sims)))
        for i, lane in enumerate(lanes):
          if not lane.stopped:
            _evaluated(lane, step, final, {k: float(v[i]) for k, v in stats.items()}, opts)
      if due(before, iteration, plan["checkpoint"], final):
        for i, lane in enumerate(lanes):
          if not lane.stopped or lane.stopped_at == step:  # a pruned lane: its last state
            part, index = parts.locate(i)
            _save(lane, group.model, _take_lane(sims[part], index), iteration, step)
      if not final and stop is not None and stop():
        raise KeyboardInterrupt  # the group starts again on resume


def _evaluated(lane: Lane, step: int, final: bool, metrics: dict, opts: TuneOptions) -> None:
  value = metrics.get(opts.metric)
  if value is not None and math.isfinite(value):
    lane.trial.report(value, step)
    if not final and lane.trial.should_prune():
      lane.stopped = (f"pruned by the {type(lane.trial.study.pruner).__name__} at step "
                      f"{step}: {opts.metric} {value:.6g}")
      lane.stopped_at = step
      metrics = {**metrics, "stopped": lane.stopped}
  _log(lane.logger, step, "eval", metrics)


def _save(lane: Lane, model, sim, iteration: int, step: int) -> None:
  save_sim(lane.run_dir / "checkpoints", step, sim, model,
           config=lane.exp.to_dict(), keep=lane.exp.run.keep_checkpoints,
           counters={"iteration": iteration, "steps": step})


def _log(logger: RunLogger, step: int, phase: str, metrics: dict) -> None:
  logger.report(step, phase, metrics)
  logger.scalars(phase, step, {k: v for k, v in metrics.items() if not isinstance(v, str)})


def _lane(tree, i: int):
  return jax.tree.map(lambda x: x[i], tree)


# a lane of a device tree in one compiled call (slicing each leaf was one dispatch per leaf:
# about 1.2 s of checkpoints for 16 cartpole_fused trials)
_take_lane = jax.jit(_lane)


def _tell(optuna, study, trial, state, value, callback) -> None:
  if state == optuna.trial.TrialState.COMPLETE:
    callback(study, study.tell(trial, value))
  else:
    callback(study, study.tell(trial, state=state))
