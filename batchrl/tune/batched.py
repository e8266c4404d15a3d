"""Trials side by side in ONE compiled program (``--batch-trials``), as ``--seeds`` trains
seeds side by side: the training run is ``vmap``-ed over the trials' values.

A value can be batched when it does not change the program's shapes: a float field of the
agent's config searched by ``uniform``/``loguniform`` (learning_rate, clip_range,
entropy_coef, discount...). The agent is built *inside* the vmapped function from a twin of
the config whose batched fields are traced values (``traced_config``); the agent's
arithmetic is the same code with the same keys, so a trial trained in a group is the same
values trained alone up to float rounding: XLA orders the vmapped (batched) arithmetic
differently (after one update the agent states differ by a relative 1e-6, while keys, env
states and observations are equal bit for bit; traced but not vmapped, the values give the
solo run exactly). Training amplifies that rounding: measured on cartpole_fused (learning
rates 2.5e-3 and 1e-3), the evaluations were equal through 20,480 steps, within 0.2% at
40,960 and within 2% at 102,400 (500.00 alone, 491.84 grouped). Every other searched
value (``int``, ``choice``, run fields) is static: trials are grouped by those values and
each group is one program. Each trial still gets its own run directory (config.yaml,
metrics.jsonl, TensorBoard, checkpoints that ``batchrl train`` resumes); a pruned trial
stops logging, its lane of the group computes on until the group ends. An interrupted
group starts again from the beginning on resume.

On a CPU a group's lanes are split into equal parts, one per usable core, each part running
the same compiled program in its own thread (``batchrl.parts``).

``--batch-trials`` auto (the default; ``batching``) trains trials side by side wherever
they can be: a gymnax config whose update runs inside the program, one seed per trial, and
searched values that are traced or take few combinations (grouped by). It takes as many
per program as fit in memory (one trial's state, traced with ``jax.eval_shape``, times
``STATE_COPIES``, in ``MEMORY_SHARE`` of the memory free), at most ``AUTO_LIMIT``, spread
evenly over the programs; elsewhere the trials run one at a time and the search says why.
A program's trials are asked from Optuna together: TPE draws its first ``n_startup_trials``
(10) at random anyway; a later program's trials are proposed from the trials finished
before it (constant liar: each counts the others under way as bad, ``study.make_sampler``).
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import shutil
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from batchrl import programs
from batchrl.agents.families import family
from batchrl.configclass import ConfigError
from batchrl.configs import Experiment, RunConfig, apply_overrides
from batchrl.errors import UserInputError
from batchrl.logging import RunLogger
from batchrl.memories import available_bytes
from batchrl.parts import LaneSplit, PartRunner
from batchrl.simulation import init as init_simulation
from batchrl.train import fused, host_update
from batchrl.train.build import build_env, close_env, eval_cap, eval_kind, eval_steps
from batchrl.train.metrics import summarize
from batchrl.train.rundir import prepare_run, save_sim
from batchrl.train.schedule import due, phase_length, run_in_calls, schedule
from batchrl.tune.options import TuneOptions
from batchrl.tune.space import Param
from batchrl.tune.study import FAILED, RESUMES, RUN_DIR, TRIALS_DIR
from batchrl.tune.trial import TrialFailed, objective_of, record_curve, trial_experiment

log = logging.getLogger("batchrl")


def batched_fields(exp: Experiment, params: tuple[Param, ...]) -> tuple[str, ...]:
  """The agent-config fields of ``params`` a group traces (continuous floats of the agent)."""
  return tuple(p.key.rpartition(".")[2] for p in params if _traced(exp, p))


def _traced(exp: Experiment, p: Param) -> bool:
  """Whether a group traces ``p``'s value (a ``uniform``/``loguniform`` float of the agent)
  rather than holding it fixed in its program (grouping trials by it)."""
  section, _, name = p.key.rpartition(".")
  if p.kind not in ("uniform", "loguniform") or section == "run":
    return False
  if not section and name in {f.name for f in dataclasses.fields(RunConfig)}:
    return False
  return isinstance(getattr(exp.config, name, None), float)


AUTO_LIMIT = 16  # trials per program at most when --batch-trials is auto (see ``Batching``)
# Of the memory free when a search starts, the share its programs may count on: XLA's own
# buffers, the host's other processes, a GPU's fragmentation.
MEMORY_SHARE = 0.5
# One trial's working memory, in units of its training state (``SimState``, the rollout
# storage of an on-policy agent included): the state a chunk is given, the state it
# returns, its update's temporaries, and an evaluation's copy.
STATE_COPIES = 4


def why_not_batched(exp: Experiment, opts: TuneOptions) -> str | None:
  """Why the trials of ``exp`` cannot train side by side in one compiled program (None:
  they can): host envs, several seeds per trial, an update that runs outside the program."""
  if exp.run.backend != "gymnax":
    return (f"{exp.name!r} steps host environments (run.backend={exp.run.backend!r}); side "
            "by side needs in-graph ones (run.backend='gymnax')")
  if opts.seeds_per_trial > 1:
    return (f"--seeds-per-trial {opts.seeds_per_trial} trains each trial's seeds side by "
            "side instead")
  if host_update.on_host(family(exp.agent).make(exp.config)):
    # its update is a host callback running programs of its own, built from the config's
    # values: traced (batched) values cannot reach it
    loop = getattr(exp.config, "update_loop", None)
    return (f"{exp.name!r} runs its update outside the compiled program (PPO's "
            f"update_loop={loop!r} on this backend), where searched values cannot be "
            "traced; --set update_loop=scan keeps it inside")
  return None


def check_batching(exp: Experiment, opts: TuneOptions, batch_trials: int | None) -> None:
  """An explicit ``--batch-trials`` above 1 needs what ``why_not_batched`` checks (checked
  before anything runs); None (auto) decides in ``batching``."""
  if batch_trials is None:
    return
  if isinstance(batch_trials, bool) or not isinstance(batch_trials, int) or batch_trials < 1:
    raise UserInputError(f"--batch-trials must be 'auto' or an integer >= 1, got "
                         f"{batch_trials!r}.")
  why = why_not_batched(exp, opts) if batch_trials > 1 else None
  if why is not None:
    raise UserInputError(f"--batch-trials {batch_trials} trains trials side by side in one "
                         f"compiled program, but {why}. Leave out --batch-trials: the trials "
                         "then run one at a time.")


@dataclasses.dataclass(frozen=True)
class Batching:
  """How many trials a compiled program trains side by side: ``limit`` (1: one at a time);
  ``why`` says why auto chose one at a time or fewer than it could."""

  limit: int
  auto: bool
  why: str = ""

  def size(self, remaining: int) -> int:
    """Trials per program for ``remaining`` trials: an explicit ``--batch-trials B`` is B;
    auto spreads them evenly over as few programs as ``limit`` allows (20 trials, limit 16:
    two programs of 10, which compile and train alike)."""
    if not self.auto:
      return self.limit
    programs = -(-remaining // self.limit)
    return -(-remaining // programs)

  def line(self, remaining: int) -> str:
    """The one line a search logs about how its ``remaining`` trials run."""
    trials = f"tune: {trials_text(remaining)}"
    size = self.size(remaining)
    if size > 1:
      side = f"{min(size, remaining)} side by side per program" if remaining > 1 else "alone"
      if not self.auto:
        return f"{trials}, {side} (--batch-trials {size})"
      # the other way reads as a choice, not as the setting in effect
      why = f" ({self.why})" if self.why else ""
      return f"{trials}, {side}{why}; --batch-trials 1 runs them one at a time"
    if not self.auto or remaining == 1:
      return f"{trials}, one at a time" + ("" if self.auto else " (--batch-trials 1)")
    return f"{trials}, one at a time: {self.why}"


def trials_text(count: int) -> str:
  return f"{count} trial{'s' if count != 1 else ''}"


def batching(exp: Experiment, opts: TuneOptions, params: tuple[Param, ...],
             batch_trials: int | None) -> Batching:
  """``--batch-trials``: B as given, or for auto (None) as many trials per program as fit
  in memory, at most ``AUTO_LIMIT`` (1, saying why, where they cannot train side by side)."""
  if batch_trials is not None:
    return Batching(batch_trials, auto=False)
  why = why_not_batched(exp, opts) or _static_too_varied(exp, params)
  if why is not None:
    return Batching(1, auto=True, why=why)
  fields = batched_fields(exp, params)
  try:
    per_trial = STATE_COPIES * max(_trial_bytes(variant, fields, check=i == 0)
                                   for i, variant in enumerate(_static_variants(exp, params)))
  except _UNTRACEABLE as e:
    return Batching(1, auto=True, why=f"agent {exp.agent!r} uses {', '.join(fields)} as a "
                    f"Python value, so it cannot be traced ({type(e).__name__})")
  free, where = available_bytes()
  if free is None:
    return Batching(AUTO_LIMIT, auto=True)
  fits = int(free * MEMORY_SHARE // max(per_trial, 1))
  if fits >= AUTO_LIMIT:
    return Batching(AUTO_LIMIT, auto=True)
  room = f"a trial needs about {_mib(per_trial)} and {_mib(free)} is free in {where}"
  if fits < 2:
    return Batching(1, auto=True, why=f"side by side would not fit: {room}")
  return Batching(fits, auto=True, why=f"as many as fit: {room}")


# what JAX raises where a traced value is used as a Python one (a branch, a shape, an int)
_UNTRACEABLE = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                jax.errors.TracerArrayConversionError)


def _static_too_varied(exp: Experiment, params: tuple[Param, ...]) -> str | None:
  """Why grouping trials by the values a program holds fixed (``int``, ``choice``, run
  fields: they may change its shapes or structure) would leave most of them alone in their
  group (None: their combinations are few, at most half of ``AUTO_LIMIT``, so groups share
  programs)."""
  combinations = 1
  for p in params:
    if _traced(exp, p):
      continue
    if p.kind in ("uniform", "loguniform"):
      return (f"--search {p.text!r} sets a value the compiled program holds fixed, so "
              "every trial would need a program of its own")
    combinations *= len(p.grid())
  if combinations * 2 > AUTO_LIMIT:
    return (f"the searched values a compiled program holds fixed (int, choice, run fields) "
            f"take {combinations} combinations, so most trials would need a program of their "
            "own")
  return None


def _static_variants(exp: Experiment, params: tuple[Param, ...]) -> list[Experiment]:
  """``exp`` with each combination of the untraced searched values (a few, by
  ``_static_too_varied``) that makes a valid config; ``[exp]`` when none is searched."""
  static = [p for p in params if not _traced(exp, p)]
  variants = []
  for values in itertools.product(*(p.grid() for p in static)):
    try:
      variants.append(apply_overrides(exp, [f"{p.key}={v}" for p, v in zip(static, values)]))
    except ConfigError:  # a combination every trial drawing it fails on
      continue
  return variants or [exp]


def _trial_bytes(exp: Experiment, fields: tuple[str, ...], check: bool) -> int:
  """Bytes of one trial's training state, traced with its ``fields`` as traced values
  (``jax.eval_shape``: nothing is compiled or run). With ``check``, its training iteration
  is traced too, raising JAX's concretization errors where the agent reads one of them as
  a Python value."""
  env = build_env(exp.run)
  try:
    make = family(exp.agent).make
    values = {f: jax.ShapeDtypeStruct((), jnp.float32) for f in fields}

    def init(values, key):
      return init_simulation(env, make(traced_config(exp.config, values)), key)

    def chunk(values, sim):  # traced only to find a searched value used as a Python one
      return fused.make_iteration(env, make(traced_config(exp.config, values)))(sim)

    sim = jax.eval_shape(init, values, jax.random.key(0))
    if check:
      jax.eval_shape(chunk, values, sim)
  finally:
    close_env(env)
  return sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(sim))


def _mib(nbytes: float) -> str:
  return f"{nbytes / 2**20:,.1f} MiB" if nbytes < 2**30 else f"{nbytes / 2**30:,.1f} GiB"


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

    def chunk(values, sim, count, length):
      iteration = fused.make_iteration(env, agent_of(values))
      return fused.loop_iterations(iteration)(sim, count, length)

    def evaluate(values, sim, cap):
      return fused.make_evaluate(env, agent_of(values), num_steps,
                                 exp.run.eval_episodes)(sim, cap)

    self.init = programs.jit(jax.vmap(init, in_axes=(0, None)), "once")
    # one program for every train phase, the budget's last shorter one included
    self.chunk = programs.jit(jax.vmap(chunk, in_axes=(0, 0, None, None)), "loop",
                              static_argnums=3)
    self.evaluate = programs.jit(jax.vmap(evaluate, in_axes=(0, 0, None)),
                                 eval_kind(env, exp.run))
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
    values = {f: jnp.asarray([getattr(lane.exp.config, f) for lane in lanes], jnp.float32)
              for f in fields}
    for lane in lanes:
      _start(lane, tune_dir, opts)
    log.info("Training trials %s in one program (%s batched)",
             ", ".join(str(lane.trial.number) for lane in lanes), ", ".join(fields) or "nothing")
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
      record_curve(lane.trial, [lane.run_dir], opts)
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
  lane.logger = TrialLogger(trial.number, lane.run_dir, opts.tensorboard)


class TrialLogger(RunLogger):
  """A lane's ``RunLogger`` whose ``Score`` lines say its trial (``trial 3: Score ...``):
  the lanes of a group report one after another, so their lines interleave."""

  def __init__(self, trial: int, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.trial = trial

  def report(self, step: int, phase: str, metrics) -> dict:
    mark = _MarkScore(f"trial {self.trial}: ")
    log.addFilter(mark)  # the ``batchrl`` logger, which RunLogger logs its Score lines to
    try:
      return super().report(step, phase, metrics)
    finally:
      log.removeFilter(mark)


class _MarkScore(logging.Filter):
  def __init__(self, prefix: str):
    super().__init__()
    self.prefix = prefix

  def filter(self, record: logging.LogRecord) -> bool:
    if isinstance(record.msg, str) and record.msg.startswith("Score "):
      record.msg = self.prefix + record.msg
    return True


def _drive(group: GroupPrograms, values: dict, lanes: list[Lane], exp: Experiment,
           opts: TuneOptions, stop) -> None:
  """The train / evaluate / checkpoint cadence of ``batchrl.train.loop`` for every lane."""
  steps_per_iteration = exp.run.num_envs * group.period
  plan = schedule(exp.run, steps_per_iteration)
  parts = LaneSplit.for_backend(len(lanes))
  part_values = parts.split(values)
  with PartRunner(parts) as runner:
    key = jax.random.key(exp.run.seed)
    sims = runner.each(group.init, part_values, [key] * parts.count)
    eval_compiling = programs.compile_ahead(
        lambda: group.evaluate.lower(part_values[0], sims[0], jnp.int32(1)))
    iteration, pace = 0, None
    while iteration < plan["total"] and not all(lane.stopped for lane in lanes):
      before, start = iteration, time.perf_counter()
      length = phase_length(plan, iteration)
      sims, infos, pace = _train_phase(group, runner, parts, part_values, sims, length,
                                       plan["report"], stop, pace)
      iteration += length
      step, final = iteration * steps_per_iteration, iteration >= plan["total"]
      rate = length * steps_per_iteration / max(time.perf_counter() - start, 1e-9)
      for i, lane in enumerate(lanes):
        if not lane.stopped:
          metrics = {**summarize(_lane(infos, i)), "steps_per_second": rate}
          _log(lane.logger, step, "train", metrics)
      if due(before, iteration, plan["eval"], final):
        eval_compiling.join()
        cap, start = jnp.int32(eval_cap(exp.run, step)), time.perf_counter()
        stats = parts.join_host(jax.device_get(runner.each(
            lambda v, s: group.evaluate(v, s, cap), part_values, sims)))
        seconds = time.perf_counter() - start
        for i, lane in enumerate(lanes):
          if not lane.stopped:
            _evaluated(lane, step, final, _eval_metrics(stats, i, seconds), opts)
      if due(before, iteration, plan["checkpoint"], final):
        for i, lane in enumerate(lanes):
          if not lane.stopped or lane.stopped_at == step:  # a pruned lane: its last state
            part, index = parts.locate(i)
            _save(lane, group.model, _take_lane(sims[part], index), iteration, step)
      if not final and stop is not None and stop():
        raise KeyboardInterrupt  # the group starts again on resume


def _train_phase(group: GroupPrograms, runner: PartRunner, parts: LaneSplit, part_values,
                 sims: list, length: int, program_length: int, stop, pace: float | None):
  """``length`` iterations of every part: ``(sims, infos [G, length], pace)``. With
  ``stop``, in calls of about ``schedule.CALL_SECONDS`` (``pace``: seconds per iteration of
  the last call), and a ``KeyboardInterrupt`` after the call at whose end ``stop()`` is true
  (the group starts again on resume: nothing is lost by not finishing the phase)."""
  infos = []

  def call(count: int, start: int) -> None:
    nonlocal sims
    outs = runner.each(lambda v, s: group.chunk(v, s, jnp.int32(count), program_length),
                       part_values, sims)
    sims = [sim for sim, _ in outs]
    part = parts.join_host(jax.device_get([info for _, info in outs]))
    infos.append(jax.tree.map(lambda x: x[:, :count], part))  # rows past it: unwritten

  _, pace, stopped = run_in_calls(length, call, stop, pace)
  if stopped:
    raise KeyboardInterrupt
  return sims, jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *infos), pace


def _eval_metrics(stats: dict, lane: int, seconds: float) -> dict:
  """One lane's evaluation as a local run reports it (``LocalTrainer.eval_phase``)."""
  return {**{k: float(v[lane]) for k, v in stats.items()}, "eval_seconds": seconds}


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
