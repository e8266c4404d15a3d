"""The run directory: its name, its ``config.yaml`` (new run or resume), its checkpoints.

A run directory holds ``config.yaml`` (written before training starts), ``metrics.jsonl``,
TensorBoard events and ``checkpoints/``. Starting a run whose directory already has a config
resumes it from its latest good checkpoint, whichever trainer made it.
"""
from __future__ import annotations

import logging
import shutil
import time
import warnings
from pathlib import Path

import yaml

from batchrl import checkpoint
from batchrl.agents.core import Model, with_scratch, without_memory, without_scratch
from batchrl.configclass import ConfigError
from batchrl.configs import Experiment
from batchrl.errors import UserInputError
from batchrl.files import write_atomic
from batchrl.train.trainer import Trainer

log = logging.getLogger("batchrl")

CONFIG_FILE = "config.yaml"


def run_directory(logdir, name: str, timestamp: str | None) -> Path:
  """``logdir/<timestamp>-<name>``; the timestamp is now's when not given."""
  stamp = timestamp or time.strftime("%Y%m%dT%H%M%S")
  return Path(logdir) / f"{stamp}-{name}"


def run_name(config: str, env: str, own_env: str | None) -> str:
  """What a run directory is named for: the config, then the env when it is not the
  config's own (``--set env=...``; ``own_env`` None: a config meant for any env), so that
  ``cartpole`` trained on LunarLander is ``cartpole-LunarLander-v3``. A ``module:EnvId``
  id is named by ``EnvId``, a ``/`` becomes ``-``."""
  if env == own_env:
    return config
  return f"{config}-{env.rpartition(':')[2].replace('/', '-')}"


def named_run_directory(logdir, config: str, env: str, own_env: str | None,
                        timestamp: str | None) -> Path:
  """``run_directory`` named by ``run_name``; with a ``timestamp``, a run an earlier
  release made under the config's name alone (``<T>-<config>``, whatever its env) is found
  there, so that its command resumes it."""
  run_dir = run_directory(logdir, run_name(config, env, own_env), timestamp)
  legacy = run_directory(logdir, config, timestamp)
  if timestamp and not run_dir.exists() and (legacy / CONFIG_FILE).is_file():
    saved = yaml.safe_load((legacy / CONFIG_FILE).read_text())
    if isinstance(saved, dict) and (saved.get("run") or {}).get("env") == env:
      return legacy
  return run_dir


def prepare_run(run_dir: Path, exp: Experiment, overrides: list[str]) -> tuple[Experiment, bool]:
  """Writes the config of a new run, or loads the one of an existing run (resume).

  Returns the experiment to run and whether this is a resume. Resuming with overrides that
  change the saved config is refused: the run would no longer be the one it says it is.
  """
  from batchrl.configs import apply_overrides

  path = run_dir / CONFIG_FILE
  if run_dir.exists() and not run_dir.is_dir():
    raise UserInputError(f"{run_dir} exists and is not a directory.")
  if path.exists():
    saved = Experiment.from_dict(yaml.safe_load(path.read_text()))
    if overrides and apply_overrides(saved, overrides) != saved:
      raise ConfigError(f"{run_dir} is an existing run; its config cannot be changed on "
                        f"resume (got --set {' '.join(overrides)}). Start a new run "
                        "(another --timestamp) instead.")
    return saved, True
  try:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(path, yaml.safe_dump(exp.to_dict(), sort_keys=False))
  except OSError as e:
    raise UserInputError(f"cannot write the run directory {run_dir}: {e.strerror}; give a "
                         "--logdir you can write to.") from None
  return exp, False


def remove_new_run(run_dir: Path) -> bool:
  """Deletes a run directory this invocation created if it holds no checkpoint yet (a run
  that failed on bad input leaves nothing behind); returns whether it did."""
  if checkpoint.latest_step(Path(run_dir) / "checkpoints") is not None:
    return False
  shutil.rmtree(run_dir, ignore_errors=True)
  return True


def start_message(run_dir: Path, resumed: bool) -> str:
  """What ``batchrl train`` says as a run starts: new, resumed from a step, or an existing
  run with no checkpoint (stopped before its first), which starts over."""
  if not resumed:
    return f"Starting run {run_dir}"
  step = kept_step(run_dir)
  if step is None:
    return f"Run {run_dir} has no checkpoint; starting from step 0"
  return f"Resuming run {run_dir} from step {step}"


def kept_step(run_dir: Path) -> int | None:
  """Step of the run's newest checkpoint (what a resume starts from), or None."""
  return checkpoint.latest_step(Path(run_dir) / "checkpoints")


def save_sim(directory: Path, step: int, sim, agent: Model, **options) -> Path:
  """``checkpoint.save`` of a run's ``SimState``, written between updates: without the
  agent's scratch (``Model.scratch``: PPO's rollout buffer, most of a ``ppo_atari``
  checkpoint), its replay memory (``Model.memory``, most of a replay run's checkpoint) kept
  by the newest checkpoint only; ``options`` go to ``checkpoint.save``."""
  kept = sim._replace(agent_state=without_scratch(agent, sim.agent_state))
  return checkpoint.save(directory, step, kept, newest_only=memory_leaves(agent, kept),
                         **options)


def memory_leaves(agent: Model, sim) -> frozenset[str]:
  """Names (``checkpoint.leaf_names``) of the leaves of ``sim`` that hold the agent's
  replay memory."""
  if not agent.memory:
    return frozenset()
  bare = sim._replace(agent_state=without_memory(agent, sim.agent_state))
  return frozenset(checkpoint.leaf_names(sim) - checkpoint.leaf_names(bare))


def restore_sim(directory: Path, template, agent: Model, *, step: int | None = None):
  """``(sim, manifest)`` of a checkpoint ``save_sim`` wrote, the scratch taken from
  ``template``; checkpoints written with the scratch (before it was left out) load too.
  A checkpoint older than the newest holds no replay memory: it is ``template``'s then,
  and ``manifest["dropped"]`` names its leaves."""
  view = template._replace(agent_state=without_scratch(agent, template.agent_state))
  unused = checkpoint.leaf_names(template) - checkpoint.leaf_names(view)
  sim, manifest = checkpoint.restore(directory, view, step=step, unused=unused)
  return sim._replace(agent_state=with_scratch(agent, sim.agent_state,
                                               template.agent_state)), manifest


def restore_checkpoint(trainer: Trainer) -> bool:
  """Loads the latest good checkpoint of ``trainer.run_dir`` into ``trainer.sim`` and
  ``trainer.iteration`` (any trainer: local or distributed); whether there was one. A
  checkpoint without the replay memory (an older one, restored because the newest is
  damaged) keeps ``trainer.sim``'s fresh, empty one, with a warning."""
  ckpt_dir = trainer.run_dir / "checkpoints"
  if checkpoint.latest_step(ckpt_dir) is None:
    return False
  trainer.sim, manifest = restore_sim(ckpt_dir, trainer.sim, trainer.agent)
  if manifest.get("dropped"):
    _warn_no_memory(ckpt_dir, manifest)
  trainer.iteration = int(manifest["counters"]["iteration"])
  log.info("Resumed %s at step %d (iteration %d).", trainer.run_dir, trainer.step,
           trainer.iteration)
  return True


def _warn_no_memory(ckpt_dir: Path, manifest: dict) -> None:
  """Loud: the run goes on, but its updates wait for the memory to fill again."""
  message = (f"checkpoint {manifest['step']} in {ckpt_dir} holds no replay memory (only a "
             "run's newest checkpoint keeps it; it was dropped when checkpoint "
             f"{manifest.get('dropped_by_step')} was written); resuming with an empty memory")
  log.warning(message)
  warnings.warn(message, checkpoint.CheckpointWarning, stacklevel=3)


def save_checkpoint(trainer: Trainer) -> None:
  """Checkpoints ``trainer.sim`` at ``trainer.step`` with the config and counters."""
  save_sim(trainer.run_dir / "checkpoints", trainer.step, trainer.sim, trainer.agent,
           config=trainer.exp.to_dict(), keep=trainer.exp.run.keep_checkpoints,
           counters={"iteration": trainer.iteration, "steps": trainer.step})
