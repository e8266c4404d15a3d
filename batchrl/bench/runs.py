"""Running a suite: every entry x seed as a ``batchrl train`` process, K at a time, each
pinned to its own cores; resumable.

Layout under ``--logdir DIR``:

    DIR/runs/<env>-s<seed>-<config>/   the run (``batchrl train --timestamp <env>-s<seed>``)
    DIR/runs/<env>-lanes<S>-<config>/  with ``--lanes``: seeds 0 to S-1 of an entry in one
                                       process (``batchrl train --seed 0 --seeds S``)
    DIR/logs/<env>-s<seed>-<config>.log   its console output, every sitting appended
    DIR/state/<env>-s<seed>-<config>.json its sittings (start, seconds, exit code; None for
                                          one whose bench was killed), finished, and the
                                          process training it now

(an entry with a ``label`` puts it in place of ``<env>``).

A run whose process exited 0 is finished and is skipped the next time; one that was stopped
(Ctrl-C, a killed machine) continues from its last checkpoint, because the same command
with the same ``--timestamp`` resumes a run exactly. A run that fails is reported with its
log; the others go on. Runs are started seed by seed (every entry's first seed, then the
second ...), so a suite cut short has one seed everywhere before it has three anywhere.

With ``lanes``, an entry's seeds are one run: ``batchrl train --seeds S``, the seeds' agents
in one compiled program and their environments stepped as lanes of one batch (one host
crossing a step for all of them). On a GPU that is what makes several seeds cheap: separate
processes sharing one add up to little (docs/gpu.md). Its seeds are the lanes of one key
(``--seed 0 --seeds S``), not the runs ``--seed 0``, ``--seed 1`` ... would train.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from batchrl import configs
from batchrl.bench.machine import machine
from batchrl.bench.suites import Entry, Suite
from batchrl.configclass import ConfigError
from batchrl.cpus import usable_cpu_ids
from batchrl.files import write_atomic
from batchrl.logging import METRICS_FILE, read_metrics
from batchrl.train import rundir
from batchrl.train.local import check_seeds

log = logging.getLogger("batchrl")

INTERRUPTED = 130  # ``batchrl train``'s exit code after Ctrl-C (it saved a checkpoint)
POLL_SECONDS = 0.5


@dataclasses.dataclass(frozen=True)
class Run:
  """One entry of a suite at one seed."""

  entry: Entry
  seed: int
  env: str  # the entry's environment (the config's own when the entry names none)
  steps: int  # its budget
  lanes: int | None = None  # seeds 0..lanes-1 in this one process (``--seeds``); None: one

  @property
  def stamp(self) -> str:
    where = self.entry.label or self.env
    return f"{where}-s{self.seed}" if self.lanes is None else f"{where}-lanes{self.lanes}"

  @property
  def name(self) -> str:
    return f"{self.stamp}-{self.entry.config}"

  @property
  def lane_indices(self) -> list[int | None]:
    """The seeds it trains, as the lanes its records name (``seed<i>/...``); [None]: a run of
    one seed, whose records name none."""
    return [None] if self.lanes is None else list(range(self.lanes))

  def _train_args(self, seed: str | None = None) -> list[str]:
    """``--seed`` (``seed``: the text shown for it instead of the run's own) and, for a
    lanes run, ``--seeds``."""
    return ["--seed", seed or str(self.seed)] + ([] if self.lanes is None else
                                                  ["--seeds", str(self.lanes)])

  def user_command(self, seed: str | None = None) -> str:
    """What a user types to train this run alone (``--logdir`` left to them)."""
    sets = " ".join(f"--set {shlex.quote(item)}" for item in self.entry.overrides())
    return shlex.join(["batchrl", "train", "--config", self.entry.config,
                       *self._train_args(seed)]) + (f" {sets}" if sets else "")

  def row_command(self) -> str:
    """The command a table shows for the entry: a run of one seed with ``--seed S`` (any
    seed); a lanes run as it is, since it trains every seed of the row."""
    return self.user_command("S" if self.lanes is None else None)

  def argv(self, logdir: Path) -> list[str]:
    argv = [sys.executable, "-m", "batchrl", "train", "--config", self.entry.config,
            "--logdir", str(logdir / "runs"), "--timestamp", self.stamp,
            *self._train_args(), "--no-progress"]
    for item in self.entry.overrides():
      argv += ["--set", item]
    return argv


def plan(suite: Suite, seeds: int, lanes: bool = False) -> list[Run]:
  """The suite's runs in the order they start: seed by seed, entries in order; with
  ``lanes``, one run per entry that trains all its seeds. Unknown configs, bad ``--set``
  items and, with ``lanes``, configs whose environments cannot step as lanes are errors
  here, before anything runs."""
  if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
    raise ConfigError(f"--seeds must be a positive number of seeds, got {seeds!r}.")
  entries = []
  for entry in suite.entries:
    exp = configs.apply_overrides(configs.get(entry.config), entry.overrides())
    if lanes:
      check_seeds(exp, seeds)
    entries.append((entry, exp.run.env, exp.run.steps))
  if lanes:
    return [Run(entry, 0, env, steps, lanes=seeds) for entry, env, steps in entries]
  return [Run(entry, seed, env, steps) for seed in range(seeds)
          for entry, env, steps in entries]


# ------------------------------------------------------------------ state of a run


def state_path(logdir: Path, run: Run) -> Path:
  return logdir / "state" / f"{run.name}.json"


def read_state(logdir: Path, run: Run) -> dict:
  """``{"sittings": [...], "finished": bool}``; a run never started has no sittings."""
  path = state_path(logdir, run)
  if not path.exists():
    return {"sittings": [], "finished": False}
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def mark_running(logdir: Path, run: Run, pid: int, start: float) -> None:
  """Records the process training ``run`` now, so that another bench of the same logdir
  leaves the run alone while it lives (two processes must never train one run)."""
  state = read_state(logdir, run)
  state["running"] = {"pid": pid, "start": round(start, 3)}
  write_atomic(state_path(logdir, run), json.dumps(state, indent=1))


def running_pid(state: dict) -> int | None:
  """The pid of the ``batchrl train`` process recorded as training the run, if it still
  lives (a bench that was killed leaves its runs going)."""
  pid = (state.get("running") or {}).get("pid")
  if pid is None:
    return None
  try:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
      argv = f.read().split(b"\0")
  except OSError:  # gone (or no /proc: then nothing can be told, and nothing is kept)
    return None
  return pid if b"batchrl" in argv and b"train" in argv else None


def record_cut_sitting(logdir: Path, run: Run) -> None:
  """Records the sitting of a bench that was killed (SIGKILL, a machine going down) before
  it could: its ``running`` entry is left, the process gone. Its length is read from the
  run's own records, the last one written since its start (up to a report interval short),
  so a resumed run's wall time and steps/s count every sitting; ``exit`` is None."""
  state = read_state(logdir, run)
  cut = state.get("running")
  if cut is None or running_pid(state) is not None:
    return
  start = float(cut["start"])
  directory = run_dir(logdir, run)
  records = read_metrics(directory) if (directory / METRICS_FILE).is_file() else []
  seconds = max((r["wall_time"] - start for r in records if r["wall_time"] >= start),
                default=0.0)
  record_sitting(logdir, run, start, seconds, None)


def record_sitting(logdir: Path, run: Run, start: float, seconds: float,
                   code: int | None) -> dict:
  """Appends a sitting (``code`` None: its bench was killed), with the machine it ran on, and
  drops ``running``."""
  state = read_state(logdir, run)
  state.pop("running", None)
  state["sittings"].append({"start": round(start, 3), "seconds": round(seconds, 3),
                            "exit": code, "machine": machine()})
  state["finished"] = code == 0
  state["command"] = run.user_command()
  write_atomic(state_path(logdir, run), json.dumps(state, indent=1))
  return state


def run_dir(logdir: Path, run: Run) -> Path:
  """Where ``batchrl train`` puts the run: ``<stamp>-<config>``, the env after it when the
  entry's is not the config's own (``batchrl.train.rundir.run_name``)."""
  own_env = configs.own_env(configs.get(run.entry.config))
  return rundir.named_run_directory(logdir / "runs", run.entry.config, run.env, own_env,
                                    run.stamp)


def log_path(logdir: Path, run: Run) -> Path:
  return logdir / "logs" / f"{run.name}.log"


# ------------------------------------------------------------------ cores


def core_sets(jobs: int, cpus: list[int]) -> list[list[int]]:
  """The cores of each of ``jobs`` slots: disjoint, as even as the count allows; with more
  jobs than cores, jobs share cores round-robin."""
  if jobs >= len(cpus):
    return [[cpus[i % len(cpus)]] for i in range(jobs)]
  per, extra = divmod(len(cpus), jobs)
  sets, at = [], 0
  for i in range(jobs):
    size = per + (i < extra)
    sets.append(cpus[at:at + size])
    at += size
  return sets


def _child_env(jobs: int) -> dict:
  """Several processes on one GPU each take a share of its memory, not JAX's default 75%."""
  env = dict(os.environ)
  if jobs > 1:
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{0.9 / jobs:.3f}")
  return env


# ------------------------------------------------------------------ running


@dataclasses.dataclass
class _Running:
  run: Run
  process: subprocess.Popen
  slot: int
  start: float
  log_file: object


def run_suite(suite: Suite, logdir, *, seeds: int | None = None, jobs: int = 1,
              lanes: bool = False) -> dict:
  """Trains the runs of ``suite`` not finished yet, ``jobs`` at a time (with ``lanes``,
  each entry's seeds as one run: see the module doc). Returns ``{"ran":
  [...], "skipped": [...], "busy": [...], "failed": [...], "stopped": bool}`` of run names
  (busy: still trained by a process an earlier bench started). Ctrl-C (or SIGTERM) stops
  the runs under way after their current update, with a checkpoint (they resume next time);
  a second one ends them at once."""
  if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
    raise ConfigError(f"--jobs must be a positive number of runs at once, got {jobs!r}.")
  logdir = Path(logdir)
  runs = plan(suite, suite.seeds if seeds is None else seeds, lanes)
  states = {r: read_state(logdir, r) for r in runs}
  busy = [r for r in runs if not states[r]["finished"] and running_pid(states[r])]
  todo = [r for r in runs if not states[r]["finished"] and r not in busy]
  result = {"ran": [], "skipped": [r.name for r in runs if states[r]["finished"]],
            "busy": [r.name for r in busy], "failed": [], "stopped": False}
  if result["skipped"]:
    log.info("bench %s: %d of %d runs finished earlier; %d to run", suite.name,
             len(result["skipped"]), len(runs), len(todo))
  for r in busy:
    log.warning("bench: %s is still being trained by process %d (started by an earlier "
                "bench); left alone", r.name, running_pid(states[r]))
  cores = core_sets(jobs, usable_cpu_ids())
  running: list[_Running] = []
  try:
    with _terminate_as_interrupt():
      while todo or running:
        while todo and len(running) < jobs and not result["stopped"]:
          running.append(_start(todo.pop(0), logdir, _free_slot(running, jobs), cores, jobs))
        time.sleep(POLL_SECONDS)
        running = _reap(running, logdir, result)
  except KeyboardInterrupt:
    result["stopped"] = True
    log.warning("bench %s: stopping: the runs under way stop after their current update "
                "with a checkpoint (Ctrl-C again ends them at once); the same command "
                "resumes the suite.", suite.name)
    _stop_all(running, logdir, result)
  return result


@contextlib.contextmanager
def _terminate_as_interrupt():
  """SIGTERM (a scheduler, ``kill``) stops the suite as Ctrl-C does: the runs under way
  stop with a checkpoint and their sittings are recorded, instead of being left running
  unrecorded. Only the main thread may set signal handlers; elsewhere nothing changes."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  def interrupt(signum, frame):
    raise KeyboardInterrupt

  before = signal.signal(signal.SIGTERM, interrupt)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, before)


def _free_slot(running: list[_Running], jobs: int) -> int:
  taken = {r.slot for r in running}
  return next(i for i in range(jobs) if i not in taken)


def _start(run: Run, logdir: Path, slot: int, cores: list[list[int]], jobs: int) -> _Running:
  path = log_path(logdir, run)
  path.parent.mkdir(parents=True, exist_ok=True)
  log_file = open(path, "a", encoding="utf-8")  # closed when reaped
  pinned = set(cores[slot])
  record_cut_sitting(logdir, run)  # before its process starts writing records again
  resumed = run_dir(logdir, run).exists()
  log.info("bench: %s %s (cores %s)", "resuming" if resumed else "starting", run.name,
           ",".join(map(str, sorted(pinned))))
  # its own session: a Ctrl-C in the terminal reaches only this process, which passes one
  # SIGINT on (two would make the run stop at once instead of after its update)
  process = subprocess.Popen(run.argv(logdir), stdout=log_file, stderr=subprocess.STDOUT,
                             env=_child_env(jobs), preexec_fn=_child_setup(pinned),
                             start_new_session=True)
  started = _Running(run, process, slot, time.time(), log_file)
  mark_running(logdir, run, process.pid, started.start)
  return started


def _child_setup(pinned: set[int]):
  """What a run's process does before it starts: hear SIGINT (a bench started in the
  background by a shell ignores it, and its runs would inherit that; SIGINT is how the
  bench asks a run to stop with a checkpoint), and run on its cores."""
  def setup() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(os, "sched_setaffinity"):
      os.sched_setaffinity(0, pinned)

  return setup


def _interrupt(running: list[_Running]) -> None:
  for r in running:
    if r.process.poll() is None:
      r.process.send_signal(signal.SIGINT)


def _reap(running: list[_Running], logdir: Path, result: dict) -> list[_Running]:
  """Records the runs that ended; returns those still running."""
  still = []
  for r in running:
    code = r.process.poll()
    if code is None:
      still.append(r)
      continue
    _finish(r, code, logdir, result)
  return still


def _finish(r: _Running, code: int, logdir: Path, result: dict) -> None:
  r.log_file.close()
  seconds = time.time() - r.start
  record_sitting(logdir, r.run, r.start, seconds, code)
  if code == 0:
    result["ran"].append(r.run.name)
    log.info("bench: finished %s in %.0f s", r.run.name, seconds)
  elif code == INTERRUPTED:
    result["stopped"] = True
    log.info("bench: stopped %s after %.0f s with a checkpoint", r.run.name, seconds)
  else:
    result["failed"].append(r.run.name)
    log.error("bench: %s failed (exit code %d); its output: %s", r.run.name, code,
              log_path(logdir, r.run))


def _stop_all(running: list[_Running], logdir: Path, result: dict) -> None:
  """After a Ctrl-C: each run gets one SIGINT and stops after its update with a checkpoint;
  a second Ctrl-C passes a second one on, which makes them stop at once."""
  _interrupt(running)
  try:
    for r in running:
      r.process.wait()
  except KeyboardInterrupt:
    _interrupt(running)
    for r in running:
      r.process.wait()
  for r in running:
    _finish(r, r.process.returncode, logdir, result)
