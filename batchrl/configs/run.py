"""What an experiment is: a ``RunConfig`` (environment, budget, cadence) plus the config of
its agent's family (``batchrl.agents.catalog``), and ``--set`` overrides of either.

Overrides (``--set key=value``) name a field of either; a name that exists in both must be
prefixed (``run.seed`` / ``agent.discount``); ``run.``, ``agent.`` and the agent's own name
(``ppo.``) are always accepted as prefixes. Changing the budget (``steps``, ``num_envs``,
``report_every``) or the update size re-derives the agent's schedules that count updates
(``total_updates`` of PPO and VPG: the learning rate reaches 0 at the end of the run).
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Iterable

from batchrl.agents.catalog import entry
from batchrl.configclass import ConfigError, configclass, from_dict, override, param, to_dict
from batchrl.errors import did_you_mean

BACKENDS = ("gymnax", "gymnasium", "envpool")


@configclass
class RunConfig:
  """How an experiment runs: environment, budget, phases, checkpoints."""

  env: str = param("Pendulum-v1", "Environment id (a Gymnasium id, or a gymnax id for the "
                   "'gymnax' backend).")
  env_kwargs: str | None = param(
      None, "gymnasium backend: keyword arguments of the env's constructor (gymnasium.make's "
      "kwargs), as JSON text of an object, e.g. {\"goal\": 5}; --set env_kwargs.NAME=VALUE "
      "sets one of them. None = none.")
  backend: str = param("gymnasium", "'gymnax': JAX-native envs, the whole training loop is "
                       "one compiled program; 'gymnasium': host envs in worker processes "
                       "(BatchEnv) stepped from the compiled loop through io_callback; "
                       "'envpool': EnvPool's C++ envs (pip install \"batchrl[envpool]\"; "
                       "its MuJoCo and classic-control ids, e.g. HalfCheetah-v5), stepped "
                       "inside the compiled loop (batchrl.envs.pool).")
  num_envs: int = param(30, "Environments stepped as one batch (the original's num_agents).")
  num_workers: int = param(2, "gymnasium backend: worker processes hosting the envs "
                           "(0 = step them in the main process).")
  max_length: int | None = param(None, "Episode step limit (LimitDuration, reported as "
                                 "truncation); None keeps the env's own limit.")
  normalize_ranges: bool = param(True, "gymnasium and envpool backends: map bounded "
                                 "observations and actions to [-1, 1] (RangeNormalize + "
                                 "ClipAction).")
  atari: bool = param(False, "gymnasium backend: wrap the env (an ALE id) in the standard "
                      "Atari wrappers (batchrl.envs.atari): no-op starts, frame skip 4 with "
                      "max-pooling, episodic life and clipped rewards for the agent; reported "
                      "scores stay the raw score of whole games. envpool backend: EnvPool's "
                      "own C++ versions of the same wrappers, episodic life done by "
                      "batchrl.envs.pool (ids <Game>NoFrameskip-v4 or ALE/<Game>-v5).")
  preprocessing: str | None = param(
      None, "Observation preprocessing inside the compiled loop (batchrl.envs.preprocessed), "
      "as JSON text: a list of batchrl.preprocessing dicts, e.g. [{\"type\": \"grayscale\"}, "
      "{\"type\": \"image_resize\", \"width\": 84, \"height\": 84}, {\"type\": "
      "\"sequence\", \"length\": 4}]; None = none.")
  steps: int = param(1_000_000, "Total training environment steps: trained exactly, rounded "
                      "up to whole updates (at most one update's worth over; the log says so).")
  report_every: int = param(20_000, "Training steps between reports (log line, metrics, "
                            "TensorBoard); rounded up to whole updates and clipped to the "
                            "budget. The last report lands at the end of the budget.")
  min_reports: int = param(10, "A run reports at least this many times: a report_every "
                           "longer than steps / min_reports is shortened, so a short run "
                           "still draws a curve (0 = keep report_every as it is; a "
                           "report_every given with --set keeps its value).")
  eval_every: int = param(100_000, "Training steps between evaluation phases (0 = only "
                          "at the end).")
  eval_episodes: int | None = param(None, "Episodes per evaluation, spread evenly over the "
                                    "envs (the first ones each env plays, so short "
                                    "episodes are not favoured); None = one per env. An "
                                    "evaluation ends when they are done or at eval_steps.")
  eval_steps: int | None = param(None, "Step cap per env of an evaluation. None: the "
                                 "episode limit (max_length or the env's own), and at most "
                                 "as many steps over all envs as the training before it, so "
                                 "a default evaluation never outlasts the training it "
                                 "measures (after a very short run it may end before any "
                                 "episode does: give eval_steps to evaluate whole ones).")
  checkpoint_every: int = param(100_000, "Training steps between checkpoints (always one "
                                "at the end).")
  keep_checkpoints: int = param(5, "How many recent checkpoints to keep.")
  seed: int = param(0, "Seed of everything: agent init, env seeds, sampling.")
  timeout: float = param(60.0, "gymnasium backend: seconds a worker may take for one step "
                         "before it is reported as hung.")
  track: bool = param(False, "Also log the config and every TensorBoard metric (same tags "
                      "and steps) to Weights & Biases (pip install \"batchrl[track]\"; "
                      "WANDB_MODE=offline keeps it on disk for `wandb sync`); as `batchrl "
                      "train --track`. TensorBoard is written either way.")
  track_project: str | None = param(None, "Weights & Biases project of a tracked run; None: "
                                    "'batchrl' (or WANDB_PROJECT when set).")
  track_entity: str | None = param(None, "Weights & Biases entity (user or team) of a "
                                   "tracked run; None: your default (or WANDB_ENTITY).")
  xla_threads: int | None = param(
      None, "Threads of XLA's CPU pool in a local run (set as the run starts JAX; no effect "
      "if JAX already runs, e.g. in a notebook). None: JAX's default, one per CPU. 1 keeps "
      "a program of small kernels around host envs stepped in this process on one thread "
      "(batchrl.train.cpu_threads: about 30% less CPU per step for a2c_cartpole). "
      "Deterministic per setting; another setting may change results by float rounding.")

  def iterations(self, steps_per_iteration: int) -> int:
    """Iterations (updates) the run trains for, ``steps_per_iteration`` env steps each: the
    budget rounded up to whole iterations."""
    return math.ceil(self.steps / steps_per_iteration)

  def report_iterations(self, steps_per_iteration: int) -> int:
    """Iterations between reports: ``report_every`` in whole iterations, clipped to the
    budget and shortened to give at least ``min_reports`` reports (at least one)."""
    total = self.iterations(steps_per_iteration)
    report = min(math.ceil(self.report_every / steps_per_iteration), total)
    if self.min_reports:
      report = min(report, total // self.min_reports)
    return max(1, report)

  def make_kwargs(self) -> dict[str, Any]:
    """``env_kwargs`` as a dict (``{}`` for None); text that is not a JSON object is a
    ``ConfigError``."""
    if self.env_kwargs is None:
      return {}
    try:
      values = json.loads(self.env_kwargs)
    except json.JSONDecodeError as e:
      values = e
    if not isinstance(values, dict):
      raise ConfigError(f"run.env_kwargs must be JSON text of an object, e.g. {{\"goal\": 5}}"
                        f", got {self.env_kwargs!r}; or set one with --set env_kwargs.NAME=VALUE.")
    return values

  def __post_init__(self):
    if self.backend not in BACKENDS:
      raise ConfigError(f"run.backend must be one of {BACKENDS}, got {self.backend!r}.")
    if self.env_kwargs is not None:
      self.make_kwargs()  # valid JSON of an object
      if self.backend != "gymnasium":
        raise ConfigError(f"run.env_kwargs are gymnasium.make's keyword arguments: they need "
                          f"run.backend='gymnasium', not {self.backend!r}.")
    if self.atari and self.backend == "gymnax":
      raise ConfigError("run.atari wraps host ALE envs and needs run.backend='gymnasium' "
                        "(or 'envpool').")
    for name in ("num_envs", "steps", "report_every", "keep_checkpoints"):
      if getattr(self, name) < 1:
        raise ConfigError(f"run.{name} must be >= 1, got {getattr(self, name)}.")
    for name in ("num_workers", "eval_every", "checkpoint_every", "min_reports"):
      if getattr(self, name) < 0:
        raise ConfigError(f"run.{name} must be >= 0, got {getattr(self, name)}.")
    for name in ("eval_episodes", "eval_steps"):
      if getattr(self, name) is not None and getattr(self, name) < 1:
        raise ConfigError(f"run.{name} must be None or an int >= 1, got "
                          f"{getattr(self, name)!r}.")
    if self.xla_threads is not None and self.xla_threads < 1:  # the type is checked already
      raise ConfigError(f"run.xla_threads must be None or an int >= 1, got "
                        f"{self.xla_threads!r}.")


@dataclasses.dataclass(frozen=True)
class Experiment:
  """A named config: the run plus the agent's hyper-parameters (``config``, of the config
  class of the agent's family in ``batchrl.agents.catalog``)."""

  name: str
  run: RunConfig
  config: Any
  agent: str = "ppo"

  def __post_init__(self):
    expected = entry(self.agent).config_class
    if not isinstance(self.config, expected):
      raise ConfigError(f"experiment {self.name!r}: agent {self.agent!r} takes a "
                        f"{expected.__name__}, got {type(self.config).__name__}.")

  def to_dict(self) -> dict[str, Any]:
    return {"config": self.name, "agent": self.agent, "run": to_dict(self.run),
            self.agent: to_dict(self.config)}

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> "Experiment":
    agent = values.get("agent", "ppo")
    config_class = entry(agent).config_class
    unknown = set(values) - {"config", "agent", "run", agent}
    if unknown:
      raise ConfigError(f"unknown top-level keys {sorted(unknown)} in experiment config; "
                        f"valid: config, agent, run, {agent}.")
    return cls(values["config"], from_dict(RunConfig, values["run"]),
               from_dict(config_class, values[agent]), agent)


def periodic_run(env: str, backend: str, num_envs: int, steps: int, **run) -> RunConfig:
  """A run of ``steps`` that reports and evaluates every tenth of them and checkpoints at
  half, its gymnax envs stepped in this process; ``run`` sets any other field or replaces
  these (the VPG and TRPO configs' runs)."""
  every = max(steps // 10, 1)
  defaults = dict(report_every=every, eval_every=every, checkpoint_every=steps // 2)
  if backend == "gymnax":
    defaults["num_workers"] = 0
  return RunConfig(env=env, backend=backend, num_envs=num_envs, steps=steps,
                   **{**defaults, **run})


def apply_overrides(exp: Experiment, items: Iterable[str]) -> Experiment:
  """``--set key=value`` for fields of ``run`` or the agent's config.

  The agent's section is written ``agent.`` or by the agent's name (``ppo.``); the prefix
  is optional when the field name is unique.
  """
  run_keys = {f.name for f in dataclasses.fields(RunConfig)}
  agent_keys = {f.name for f in dataclasses.fields(exp.config)}
  sections = ("run", "agent", exp.agent)
  run_items, agent_items, kwarg_items = [], [], []
  for item in items:
    key, sep, value = item.partition("=")
    if not sep:
      raise ConfigError(f"override {item!r} must look like key=value.")
    key = key.strip()
    if key.removeprefix("run.").startswith("env_kwargs."):
      kwarg_items.append((key.removeprefix("run.")[len("env_kwargs."):], value))
      continue
    section, _, field = key.rpartition(".")
    if section in sections:
      (run_items if section == "run" else agent_items).append(f"{field}={value}")
    elif section:
      raise ConfigError(f"unknown section {section!r} in {key!r}; valid: "
                        f"{', '.join(dict.fromkeys(sections))}.")
    elif field in run_keys and field in agent_keys:
      raise ConfigError(f"{field!r} is a field of both run and {exp.agent}; write "
                        f"run.{field} or {exp.agent}.{field}.")
    elif field in run_keys:
      run_items.append(f"{field}={value}")
    elif field in agent_keys:
      agent_items.append(f"{field}={value}")
    else:
      raise ConfigError(_unknown_key(field, run_keys, agent_keys, exp))
  run = _with_env_kwargs(override(exp.run, _keep_report_period(run_items)), kwarg_items)
  config = override(exp.config, agent_items)
  changed = dataclasses.replace(exp, run=run, config=config)
  if _iterations(exp.run, exp.config) != _iterations(run, config):
    # The budget or the update size changed: schedules counting updates follow the run,
    # unless the same --set gave their value.
    changed = dataclasses.replace(
        changed, config=override(fit_schedules(changed).config, agent_items))
  return changed


def _with_env_kwargs(run: RunConfig, items: list[tuple[str, str]]) -> RunConfig:
  """``run`` with ``--set env_kwargs.NAME=VALUE`` items added to its ``env_kwargs``; a
  value is read as JSON (``5``, ``1e-3``, ``true``, ``[1, 2]``, ``"text"``), else as text."""
  if not items:
    return run
  values = run.make_kwargs()
  for name, text in items:
    if not name.isidentifier():
      raise ConfigError(f"env_kwargs.{name}: {name!r} is not a keyword argument name.")
    try:
      values[name] = json.loads(text)
    except json.JSONDecodeError:
      values[name] = text.strip()
  return run.replace(env_kwargs=json.dumps(values))


def _keep_report_period(run_items: list[str]) -> list[str]:
  """A ``report_every`` the user gives is kept as given: ``min_reports=0`` with it, unless
  ``min_reports`` is given too."""
  keys = {item.partition("=")[0].strip() for item in run_items}
  if "report_every" in keys and "min_reports" not in keys:
    return [*run_items, "min_reports=0"]
  return run_items


def fit_schedules(exp: Experiment) -> Experiment:
  """``exp`` with the agent's schedules that count updates (``total_updates`` of PPO and
  VPG) set to the updates its run trains, so a learning rate annealed to 0 reaches 0 at the
  run's last update and not before."""
  fit = entry(exp.agent).fit_schedules
  if fit is None:
    return exp
  run = exp.run
  config = fit(exp.config, lambda period: run.iterations(period * run.num_envs))
  return exp if config == exp.config else dataclasses.replace(exp, config=config)


def _iterations(run: RunConfig, config) -> tuple[int, int] | None:
  """What the schedules fitted to a run count: the run's updates of the agent's period
  (``rollout_length``, else ``update_frequency`` stores) and the gradient steps of each
  (``repeat_update``); None for an agent with neither."""
  period = getattr(config, "rollout_length", None) or getattr(config, "update_frequency", None)
  if period is None:
    return None
  return run.iterations(period * run.num_envs), getattr(config, "repeat_update", 1)


def _unknown_key(key: str, run_keys: set[str], agent_keys: set[str], exp: Experiment) -> str:
  """The closest few keys, and where to see them all (a list of every key, 1,200 characters
  on one line, hid the hint)."""
  bare = sorted(run_keys | agent_keys)
  return (f"unknown config key {key!r}{did_you_mean(key, bare, n=3)}; every key of "
          f"{exp.name!r}, with its value and help: batchrl configs {exp.name}")


