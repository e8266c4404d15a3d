"""Ctrl-C on `batchrl train`, as a user meets it: the first keeps the work (a checkpoint and
the command that resumes it), the second stops at once and says what was kept."""
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from batchrl import checkpoint, configs
from batchrl.logging import read_metrics
from batchrl.train import interrupt, loop, schedule
from batchrl.train.local import LocalTrainer

# a long budget, reports every 2 updates, the first scheduled checkpoint only at the end
LONG = ["--set", "steps=50000000", "--set", "report_every=8192", "--set", "num_envs=32",
        "--set", "checkpoint_every=50000000", "--set", "eval_every=50000000",
        "--no-tensorboard"]
HANG_GUARD = 300  # seconds; not a timing assertion: a run left alone would take far longer


def _start(argv: list[str]) -> subprocess.Popen:
  """``batchrl`` in its own process group (a terminal's Ctrl-C reaches a whole group)."""
  return subprocess.Popen([sys.executable, "-m", "batchrl", *argv], stderr=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(proc: subprocess.Popen, pattern: str) -> tuple[re.Match, str]:
  """Reads stderr until a line matches ``pattern``; the match and what was read."""
  seen = ""
  for line in proc.stderr:
    seen += line
    match = re.search(pattern, line)
    if match:
      return match, seen
  proc.wait()
  pytest.fail(f"no line matching {pattern!r}; exit {proc.returncode}; stderr:\n{seen}")


def _ctrl_c(proc: subprocess.Popen) -> None:
  os.killpg(proc.pid, signal.SIGINT)


def _finish(proc: subprocess.Popen) -> str:
  try:
    _, err = proc.communicate(timeout=HANG_GUARD)
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    pytest.fail(f"batchrl did not stop after Ctrl-C; stderr:\n{err}")
  return err


def _resume_argv(err: str) -> list[str]:
  """The printed resume command, as argv for ``python -m batchrl``."""
  command = re.search(r"^  (batchrl train .*)$", err, re.M)
  assert command, err
  argv = shlex.split(command.group(1))
  assert argv[:2] == ["batchrl", "train"] and "--timestamp" in argv
  return argv[1:]


@pytest.mark.gymnax
@pytest.mark.slow
def test_ctrl_c_checkpoints_and_prints_the_command_that_resumes(tmp_path):
  argv = ["train", "--config", "cartpole_fused", "--logdir", str(tmp_path), *LONG]
  proc = _start(argv)
  _wait_for(proc, r"Starting run")
  _wait_for(proc, r"Score .* \(train, step \d+\)")  # training, well before any checkpoint
  _ctrl_c(proc)
  err = _finish(proc)
  assert proc.returncode == 130, err
  assert "Ctrl-C: stopping after the update under way" in err
  (run_dir,) = tmp_path.iterdir()
  kept = checkpoint.latest_step(run_dir / "checkpoints")
  assert kept is not None and 0 < kept < 50_000_000
  assert f"the checkpoint at step {kept} is kept" in err and "Traceback" not in err

  resume = _resume_argv(err)
  assert resume[resume.index("--timestamp") + 1] + "-cartpole_fused" == run_dir.name
  assert all(flag in resume for flag in LONG)  # the same --set flags: the same run
  proc = _start(resume)
  match, _ = _wait_for(proc, r"Resuming run .* from step (\d+)")
  assert int(match.group(1)) == kept
  _wait_for(proc, rf"Resumed .* at step {kept} ")
  _wait_for(proc, r"Score .* \(train, step \d+\)")
  _ctrl_c(proc)
  err = _finish(proc)
  assert proc.returncode == 130, err
  assert checkpoint.latest_step(run_dir / "checkpoints") > kept


@pytest.mark.gymnax
@pytest.mark.slow
def test_second_ctrl_c_stops_at_once_and_a_resume_says_there_is_no_checkpoint(tmp_path):
  # one report phase is the whole budget: the first Ctrl-C alone would wait for all of it
  argv = ["train", "--config", "cartpole_fused", "--logdir", str(tmp_path), "--timestamp",
          "T", "--set", "steps=50000000", "--set", "report_every=50000000", "--no-tensorboard"]
  proc = _start(argv)
  _wait_for(proc, r"Starting run")
  _ctrl_c(proc)
  _wait_for(proc, r"Ctrl-C: stopping after the update under way")
  _ctrl_c(proc)
  err = _finish(proc)
  assert proc.returncode == 130, err
  assert "Stopped at once: no checkpoint was written" in err and "Traceback" not in err
  assert checkpoint.latest_step(tmp_path / "T-cartpole_fused" / "checkpoints") is None

  proc = _start(_resume_argv(err))
  _, seen = _wait_for(proc, r"no checkpoint; starting from step 0")
  os.killpg(proc.pid, signal.SIGKILL)
  proc.communicate()
  assert "Resuming" not in seen


def _leaves(sim) -> list[np.ndarray]:
  return [np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
                     else x) for x in jax.tree.leaves(sim)]


@pytest.mark.gymnax
def test_a_stop_ends_the_phase_after_the_update_under_way_and_resuming_is_exact(tmp_path,
                                                                                 monkeypatch):
  """Asked to stop, the loop stops after the compiled call under way (the first call of a
  phase is one update), checkpoints there and returns; the resumed run (here in calls of
  one update each) reports, evaluates and checkpoints at the steps of a run never stopped,
  and ends in the same state, bit for bit."""
  exp = configs.apply_overrides(configs.get("cartpole_fused"), [
      "num_envs=8", "rollout_length=32", "update_epochs=1", "steps=2048", "report_every=1024",
      "checkpoint_every=2048", "eval_every=2048", "batch_size=128", "eval_steps=50"])
  straight = LocalTrainer(exp, tmp_path / "straight")  # updates of 256 steps
  loop.run(straight, progress=False, use_tensorboard=False)  # a phase: one call of 4

  stopped = LocalTrainer(exp, tmp_path / "stopped")
  asked = []
  result = loop.run(stopped, progress=False, use_tensorboard=False,
                    stop=lambda: asked.append(1) or True)
  assert result == {} and stopped.step == 256  # no evaluation: it was not due
  assert [c.step for c in checkpoint.list_checkpoints(tmp_path / "stopped" / "checkpoints")
          ] == [256]
  monkeypatch.setattr(schedule, "CALL_SECONDS", 0.0)  # every call one update
  resumed = LocalTrainer(exp, tmp_path / "stopped")
  loop.run(resumed, progress=False, use_tensorboard=False, stop=lambda: False)

  def reports(run, phase):
    return [r["step"] for r in read_metrics(tmp_path / run) if r["phase"] == phase]
  assert reports("straight", "train") == [1024, 2048]
  assert reports("stopped", "train") == [256, 1024, 2048]  # the stop's own report, then aligned
  assert reports("stopped", "eval") == reports("straight", "eval") == [2048]
  assert read_metrics(tmp_path / "stopped")[-1]["mean_score"] == \
      read_metrics(tmp_path / "straight")[-1]["mean_score"]
  for a, b in zip(_leaves(straight.sim), _leaves(resumed.sim)):
    np.testing.assert_array_equal(a, b)


def test_a_phase_is_cut_into_calls_of_about_call_seconds_and_phases_end_on_report_steps():
  assert schedule.call_length(10, None) == 1  # not timed yet (the first call compiles too)
  assert schedule.call_length(1000, schedule.CALL_SECONDS / 40) == 40
  assert schedule.call_length(10, 1e-6) == 10  # never past the phase
  assert schedule.call_length(10, 30.0) == 1  # one slow update: one call each
  plan = {"total": 10, "report": 4}
  assert [schedule.phase_length(plan, i) for i in (0, 1, 4, 7, 8, 9)] == [4, 3, 4, 1, 2, 1]


def _press_twice(ctrl_c, signum: int, after_first=lambda: None) -> None:
  """Sends ``signum`` to this process, waits for ``ctrl_c.requested``, calls
  ``after_first()``, sends it again and runs Python code until the interrupt comes (10 s
  hang guards, not timing assertions)."""
  os.kill(os.getpid(), signum)
  for _ in range(1000):
    if ctrl_c.requested:
      break
    time.sleep(0.01)
  assert ctrl_c.requested
  after_first()
  os.kill(os.getpid(), signum)
  for _ in range(1000):
    time.sleep(0.01)


def test_first_ctrl_c_only_asks_and_the_second_interrupts_python_code():
  """In-process: the first SIGINT sets ``requested`` and raises nothing; the second raises
  KeyboardInterrupt in the main thread (running Python here, so the process is not ended);
  leaving restores Python's own handler."""
  kept = []
  with pytest.raises(KeyboardInterrupt):
    with interrupt.CtrlC("first", kept=lambda: kept.append(1) or "kept") as ctrl_c:
      _press_twice(ctrl_c, signal.SIGINT)
  assert kept == []  # the main thread took the interrupt: no os._exit path
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.fixture
def default_sigterm():
  """SIGTERM's default action for the test, as a fresh process has it: a test before it in
  this worker may have left its own handler (Ray's driver sets one), and CtrlC takes SIGTERM
  only where nobody else handles it."""
  before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
  yield
  signal.signal(signal.SIGTERM, before)


def test_sigterm_asks_as_ctrl_c_does_even_where_ctrl_c_is_ignored(caplog, default_sigterm):
  """In-process, SIGINT ignored (as in a shell's background job): the first SIGTERM sets
  ``requested`` and logs what happens now, naming SIGTERM; the second raises
  KeyboardInterrupt; leaving restores both signals' handlers."""
  before = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    with pytest.raises(KeyboardInterrupt):
      with interrupt.CtrlC("stopping", kept=lambda: "kept") as ctrl_c:

        def named() -> None:
          assert "SIGTERM: stopping" in caplog.text

        _press_twice(ctrl_c, signal.SIGTERM, named)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
  finally:
    signal.signal(signal.SIGINT, before)


def test_a_process_that_ignores_ctrl_c_is_told_how_to_stop(default_sigterm):
  """Only where SIGINT is ignored (a shell's background job) is there a note: ``kill PID``
  where SIGTERM is taken as a Ctrl-C, no command where the caller handles SIGTERM itself."""
  with interrupt.CtrlC("stopping", kept=lambda: "kept") as ctrl_c:
    assert ctrl_c.background_note("which saves a checkpoint first") is None
  before = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    with interrupt.CtrlC("stopping", kept=lambda: "kept") as ctrl_c:
      assert ctrl_c.background_note("which saves a checkpoint first") == (
          f"Ctrl-C is ignored in this process (a background job): stop it with kill "
          f"{os.getpid()}, which saves a checkpoint first.")
    own = signal.signal(signal.SIGTERM, lambda *args: None)
    try:
      with interrupt.CtrlC("stopping", kept=lambda: "kept") as ctrl_c:
        assert ctrl_c.background_note("which saves a checkpoint first") == (
            "Ctrl-C is ignored in this process (a background job).")
    finally:
      signal.signal(signal.SIGTERM, own)
  finally:
    signal.signal(signal.SIGINT, before)


@pytest.mark.gymnax
@pytest.mark.slow
def test_sigterm_checkpoints_a_background_run_that_ignores_ctrl_c(tmp_path):
  """``batchrl train &`` from a script ignores Ctrl-C; a scheduler's SIGTERM (SLURM, ``kill``)
  stops it after the update under way with a checkpoint, as the first Ctrl-C would."""
  argv = ["train", "--config", "cartpole_fused", "--logdir", str(tmp_path), *LONG]
  proc = subprocess.Popen([sys.executable, "-m", "batchrl", *argv], stderr=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, start_new_session=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
  _, started = _wait_for(proc, r"Score .* \(train, step \d+\)")
  proc.send_signal(signal.SIGTERM)
  err = _finish(proc)
  assert proc.returncode == 130, err
  (run_dir,) = tmp_path.iterdir()
  # the run said, as it started, how to stop it
  assert (f"Starting run {run_dir}. Ctrl-C is ignored in this process (a background job): "
          f"stop it with kill {proc.pid}, which saves a checkpoint first.") in started
  assert "SIGTERM: stopping after the update under way" in err
  kept = checkpoint.latest_step(run_dir / "checkpoints")
  assert kept is not None and 0 < kept < 50_000_000
  assert f"the checkpoint at step {kept} is kept" in err


def test_the_resume_command_keeps_every_train_flag():
  """The printed command parses back to the same arguments plus --timestamp; a new
  `batchrl train` flag must be added to it (this test lists them all)."""
  import argparse

  from batchrl import cli
  parser = cli._parser()
  argv = ["train", "--config", "cartpole", "--logdir", "my runs", "--seed", "3", "--seeds", "2",
          "--set", "steps=10", "--set", "num_envs=4", "--no-progress", "--no-tensorboard",
          "--track", "--ray", "--address", "head:6379", "--runners", "2", "--envs-per-runner", "3",
          "--max-restarts", "4", "--runner-timeout", "5.0"]
  args = parser.parse_args(argv)
  resume = shlex.split(cli._resume_command(args, "T1"))
  assert resume[0] == "batchrl"
  assert parser.parse_args(resume[1:]) == argparse.Namespace(**{**vars(args), "timestamp": "T1"})
  subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
  options = {option for action in subparsers.choices["train"]._actions
             for option in action.option_strings if option.startswith("--")}
  assert options - {"--help", "--timestamp"} <= set(argv)
