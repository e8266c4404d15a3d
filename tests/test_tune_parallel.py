"""`batchrl tune --parallel P` (trials in worker processes), `--ray` (trials as Ray Tune
trials, Optuna's OptunaSearch on the same study.db) and `--runners N` (each trial's envs in
Ray runner actors): every trial lands in the study with its run directory, a stopped search
resumes without repeating finished trials, no Ray process is left behind, and bad launch
flags are one line."""

import psutil
import pytest
import yaml

from batchrl.cli import main
from batchrl.logging import read_metrics
from tests.tune_argv import tune_argv

optuna = pytest.importorskip("optuna")

# tiny host runs: 2 updates of 256 steps (4 envs, 1 worker process), an evaluation after
# each, a checkpoint at the end
TINY = ["steps=512", "num_envs=4", "num_workers=1", "rollout_length=64", "update_epochs=1",
        "report_every=256", "eval_every=256", "checkpoint_every=512", "eval_steps=50",
        "max_length=50", "policy_layers=(16,)", "value_layers=(16,)"]
SPACE = ["learning_rate=loguniform(1e-4,1e-2)"]


def _argv(logdir, *extra, trials=2):
  return tune_argv(logdir, "cartpole", SPACE, TINY, *extra, trials=trials)


def _study(tune_dir):
  return optuna.load_study(study_name=None, storage=f"sqlite:///{tune_dir / 'study.db'}")


def _check_trials_landed(tune_dir, count):
  """``count`` complete trials, each with its run directory, its evaluations in the study and
  its own values; any other trial (one a resumed search continued) failed."""
  study = _study(tune_dir)
  complete = [t for t in study.trials if t.state.name == "COMPLETE"]
  assert len(complete) == count, [t.state.name for t in study.trials]
  assert all(t.state.name == "FAIL" for t in study.trials if t not in complete)
  lrs = [t.params["learning_rate"] for t in complete]
  assert len(set(lrs)) == count  # each worker or Ray trial drew its own values
  for t in complete:
    run = tune_dir / "trials" / str(t.number)
    assert t.user_attrs["batchrl_run_dir"] == f"trials/{t.number}"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["ppo"]["learning_rate"] == t.params["learning_rate"]
    evals = [r for r in read_metrics(run) if r["phase"] == "eval"]
    if "batchrl_resumes" in t.user_attrs:  # continued an interrupted trial's run directory
      assert [r["step"] for r in evals][-1] == 512
    else:
      assert [r["step"] for r in evals] == [256, 512]
      # the evaluations reached the study at env steps, as without --parallel/--ray
      assert sorted(t.intermediate_values) == [256, 512]
    assert t.value == max(r["mean_score"] for r in evals)
    # what breaks ties reached the study from the worker too: the mean of the evaluations
    assert t.user_attrs["batchrl_curve"] == pytest.approx(
        sum(r["mean_score"] for r in evals) / len(evals))
    assert (run / "checkpoints").is_dir()
  assert (tune_dir / "best.yaml").is_file()
  return study


def _live_children() -> set[int]:
  return {p.pid for p in psutil.Process().children(recursive=True)
          if p.is_running() and p.status() != psutil.STATUS_ZOMBIE}


@pytest.mark.slow
def test_a_stopped_parallel_search_resumes_its_interrupted_trials(tmp_path, capsys):
  """``stop`` (the CLI's first Ctrl-C) once both workers' trials started: each stops after
  its first update with a checkpoint. ``batchrl tune --parallel 2`` on the same search, now
  for 3 trials, finishes both from there and runs a third in the freed worker: every trial
  lands in the one study with its run directory, the workers are gone at the end, and the
  complete study runs nothing more."""
  from batchrl import checkpoint
  from batchrl.tune import search
  kwargs = dict(trials=2, logdir=tmp_path, timestamp="T", overrides=TINY, sampler="random",
                pruner="none", seed=0, tensorboard=False, parallel=2)
  tune_dir = tmp_path / "T-cartpole-tune"
  started = lambda: len(list(tune_dir.glob("trials/*/config.yaml"))) == 2
  before = _live_children()  # servers earlier tests started (env fork server, ...) stay
  with pytest.raises(KeyboardInterrupt):
    search("cartpole", SPACE, stop=started, **kwargs)
  stopped = _study(tune_dir).trials  # a list: the study reads its trials at each access
  assert [t.state.name for t in stopped] == ["FAIL", "FAIL"]
  for n in (0, 1):
    assert checkpoint.latest_step(tune_dir / "trials" / str(n) / "checkpoints") == 256
  capsys.readouterr()

  assert main(_argv(tmp_path, "--parallel", "2", trials=3)) == 0
  study = _check_trials_landed(tune_dir, 3)
  assert [t.state.name for t in study.trials] == ["FAIL", "FAIL"] + ["COMPLETE"] * 3
  resumed = [t for t in study.trials[2:] if "batchrl_resumes" in t.user_attrs]
  assert sorted(t.user_attrs["batchrl_resumes"] for t in resumed) == [0, 1]
  assert {t.params["learning_rate"] for t in resumed} == {
      t.params["learning_rate"] for t in stopped}
  assert capsys.readouterr().out.startswith("Best trials (3 complete, 2 fail):")
  # the workers are gone (multiprocessing's resource tracker stays for the test process),
  # and a complete study runs nothing more
  assert not [psutil.Process(pid).cmdline() for pid in _live_children() - before
              if "resource_tracker" not in " ".join(psutil.Process(pid).cmdline())]
  assert main(_argv(tmp_path, "--parallel", "2", trials=3)) == 0
  assert len(_study(tune_dir).trials) == 5


@pytest.mark.slow
def test_a_worker_that_fails_is_reported(tmp_path, capsys):
  """A trial that raises (here: an env id registered in the driver only, unknown in the
  spawned workers) ends its worker; the search names the worker, the trial and the error in
  one line, exit code 1, and the trials stay in the study to run again on resume."""
  import gymnasium
  env_id = "batchrl-test/DriverOnly-v0"
  gymnasium.register(env_id, entry_point="gymnasium.envs.classic_control:CartPoleEnv")
  try:
    assert main(_argv(tmp_path, "--parallel", "2", "--set", f"env={env_id}")) == 1
  finally:
    gymnasium.registry.pop(env_id)
  err = capsys.readouterr().err.strip().splitlines()
  assert err[-1].startswith("batchrl tune: error: trial worker ")
  assert "failed in trial " in err[-1] and "runs again" in err[-1]
  study = _study(tmp_path / "T-cartpole-tune")
  assert [t.state.name for t in study.trials] == ["FAIL", "FAIL"]


@pytest.mark.parametrize("change, message", [
    (["--parallel", "0"], "--parallel must be an integer >= 1, got 0"),
    (["--parallel", "-2"], "--parallel must be an integer >= 1, got -2"),
    (["--address", "127.0.0.1:6379"], "--address only applies with --ray"),
    (["--max-failures", "3"], "--max-failures only applies with --ray"),
    (["--ray", "--max-failures", "-1"], "--max-failures must be >= 0"),
    (["--ray", "--address", "not-an-address"], "--address must be HOST:PORT"),
    (["--ray", "--runners", "2"], "--runners cannot be combined with --ray: a Ray Tune "
     "trial's env runners would wait for the CPUs the concurrent trials hold"),
    (["--runners", "2", "--parallel", "2"], "--runners runs the trials one after another"),
    (["--runners", "0"], "--runners must be an integer >= 1, got 0"),
    (["--runners", "3"], "--runners 3: run.num_envs=4 does not split evenly over 3 runners"),
])
def test_bad_launch_flags_are_one_line_exit_2_and_leave_nothing(change, message, tmp_path,
                                                                capsys):
  logdir = tmp_path / "logs"
  assert main(_argv(logdir) + change) == 2
  err = capsys.readouterr().err.strip()
  assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
  assert not logdir.exists()


def test_parallel_or_ray_with_batch_trials_is_refused(tmp_path, capsys):
  logdir = tmp_path / "logs"
  argv = [a for a in _argv(logdir) if a != "cartpole"]
  argv.insert(argv.index("--logdir"), "cartpole_fused")
  for flag in (["--parallel", "2"], ["--ray"]):
    assert main(argv + flag + ["--batch-trials", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{flag[0]} runs trials in separate processes and --batch-trials 2" in err
    assert len(err.splitlines()) == 1
  assert not logdir.exists()


@pytest.mark.gymnax
def test_auto_batch_trials_leaves_parallel_and_ray_their_processes(tmp_path, monkeypatch,
                                                                    caplog):
  """Without --batch-trials (auto), --parallel and --ray on a fused config run the trials
  their way (here: recorded, not run) and say so; auto trains nothing side by side."""
  import logging

  from batchrl.tune import optimize
  ran = []
  monkeypatch.setattr(optimize, "run_groups", lambda *args: ran.append("side by side"))
  monkeypatch.setattr(optimize, "run_parallel",
                      lambda study, job, remaining, parallel, *args: ran.append(parallel))

  class RayTune:
    @staticmethod
    def run_on_ray(study, job, remaining, **kwargs):
      ran.append(f"ray {kwargs['parallel']}")

  monkeypatch.setattr(optimize, "_ray_tune", lambda: RayTune)
  cases = [(["--parallel", "2"], "tune: 2 trials, 2 at a time in worker processes "
            "(--parallel 2)", 2),
           (["--ray", "--parallel", "2"], "tune: 2 trials as Ray Tune trials, up to 2 at a "
            "time (--ray)", "ray 2")]
  for k, (flags, line, how) in enumerate(cases):
    argv = tune_argv(tmp_path / str(k), "cartpole_fused", SPACE, ["steps=2048"], *flags)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="batchrl"):
      assert main(argv) == 0
    assert [m for m in caplog.messages if m.startswith("tune: ")] == [line]
    assert ran[-1] == how
  assert "side by side" not in ran


def test_without_ray_tune_ray_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
  import sys

  import batchrl.tune
  # as if ray[tune] were not installed: importing the module that imports it fails
  monkeypatch.delattr(batchrl.tune, "ray_tune", raising=False)
  monkeypatch.setitem(sys.modules, "batchrl.tune.ray_tune", None)
  logdir = tmp_path / "logs"
  assert main(_argv(logdir, "--ray")) == 2
  err = capsys.readouterr().err.strip()
  assert 'pip install "batchrl[tune-ray]"' in err and len(err.splitlines()) == 1
  assert not logdir.exists()


def _ray_descendants() -> set[int]:
  """Ray processes below this one (others' tests on the machine may run Ray of their own)."""
  names = ("raylet", "gcs_server", "ray::", "default_worker", "dashboard", "log_monitor")
  found = set()
  for p in psutil.Process().children(recursive=True):
    try:
      if p.status() != psutil.STATUS_ZOMBIE and any(n in " ".join(p.cmdline()) for n in names):
        found.add(p.pid)
    except psutil.NoSuchProcess:
      pass
  return found


def _no_ray_left(tune_dir, before: set[int], wait_s: float = 10.0) -> bool:
  """No process holds a file under the search's local Ray dir (a Ray worker orphaned by its
  raylet is no longer our descendant but still holds its logs there) and no Ray process
  below this one is new. Processes killed at shutdown are given ``wait_s`` to exit."""
  import time

  from batchrl.distributed import cluster
  deadline = time.monotonic() + wait_s
  while True:
    left = cluster.processes_under(tune_dir / "ray") + sorted(_ray_descendants() - before)
    if not left or time.monotonic() > deadline:
      break
    time.sleep(0.2)
  if left:
    print("Ray processes left:", [psutil.Process(pid).cmdline() for pid in left
                                  if psutil.pid_exists(pid)])
  return not left


def test_the_ray_searcher_records_how_each_trial_ended(tmp_path):
  """``StudySearch`` (Ray's OptunaSearch on our study): the trial's last result decides its
  state; one stopped before its end (Ctrl-C) stays running, so resume runs it again."""
  pytest.importorskip("ray.tune")
  from batchrl.tune import parse_space
  from batchrl.tune.ray_tune import NUMBER, OBJECTIVE, STATE, DefineByRun, StudySearch
  storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'study.db'}")
  optuna.create_study(storage=storage, study_name="s", direction="maximize")
  stop_file = tmp_path / "stop-requested"
  searcher = StudySearch(space=DefineByRun(parse_space(SPACE)), metric=OBJECTIVE, mode="max",
                         sampler=optuna.samplers.RandomSampler(seed=0), study_name="s",
                         storage=storage, stop_file=stop_file)
  configs = [searcher.suggest(f"ray{k}") for k in range(6)]
  assert [c[NUMBER] for c in configs] == [0, 1, 2, 3, 4, 5]
  assert all(1e-4 <= c["learning_rate"] <= 1e-2 for c in configs)
  searcher.on_trial_result("ray0", {OBJECTIVE: None, STATE: "running", "step": 256})
  searcher.on_trial_complete("ray0", {OBJECTIVE: 12.5, STATE: "complete"})
  searcher.on_trial_complete("ray1", {OBJECTIVE: None, STATE: "pruned"})
  searcher.on_trial_complete("ray2", {OBJECTIVE: None, STATE: "failed"})
  searcher.on_trial_complete("ray3", {OBJECTIVE: None, STATE: "running"})  # stopped
  searcher.on_trial_complete("ray4", None, error=True)  # Ray gave up on it
  searcher.on_trial_complete("ray5", {OBJECTIVE: None, STATE: "stopped"})  # after Ctrl-C
  stop_file.touch()  # Ctrl-C: no new trial starts
  assert searcher.suggest("ray6") == searcher.FINISHED
  study = optuna.load_study(study_name="s", storage=storage)
  assert [t.state.name for t in study.trials] == ["COMPLETE", "PRUNED", "FAIL", "RUNNING",
                                                  "FAIL", "RUNNING"]
  assert study.trials[0].value == 12.5
  assert study.trials[0].intermediate_values == {}  # Ray's iteration reports are dropped


@pytest.mark.slow
def test_a_stopped_ray_search_resumes_without_repeating_finished_trials(tmp_path, monkeypatch,
                                                                       capsys):
  """``--ray``, one trial at a time: ``stop`` (the CLI's first Ctrl-C) once trial 0 has
  finished and trial 1 has started: trial 1 stops after its first update with a checkpoint,
  as without Ray, and no trial starts after it. ``batchrl tune --ray --parallel 2`` on the
  same search, now for 3 trials, keeps trial 0 as it was and runs two Ray Tune trials at
  once: trial 1's values continued from that checkpoint (as trial 2, in trial 1's run
  directory) and a new trial 3. Every trial lands in the one study, the complete study runs
  nothing more, and no Ray process is left behind by any run."""
  from batchrl import checkpoint
  ray = pytest.importorskip("ray")
  pytest.importorskip("ray.tune")
  from batchrl.tune import search
  monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
  before = _ray_descendants()
  kwargs = dict(trials=2, logdir=tmp_path, timestamp="T", overrides=TINY, sampler="random",
                pruner="none", seed=0, tensorboard=False, ray=True, parallel=1)
  tune_dir = tmp_path / "T-cartpole-tune"

  def ctrl_c() -> bool:
    return (tune_dir / "trials" / "1" / "config.yaml").is_file()

  with pytest.raises(KeyboardInterrupt):
    search("cartpole", SPACE, stop=ctrl_c, **kwargs)
  stopped = _study(tune_dir).trials  # a list: the study reads its trials at each access
  assert [t.state.name for t in stopped] == ["COMPLETE", "RUNNING"]  # cut short
  assert checkpoint.latest_step(tune_dir / "trials" / "1" / "checkpoints") == 256
  assert not (tune_dir / "ray_results" / "stop-requested").exists()
  first = (tune_dir / "trials" / "0" / "metrics.jsonl").read_text()
  assert not ray.is_initialized() and _no_ray_left(tune_dir, before)
  capsys.readouterr()

  # the same search again, for one trial more, two Ray Tune trials at a time
  assert main(_argv(tmp_path, "--ray", "--parallel", "2", trials=3)) == 0
  study = _study(tune_dir)
  assert [t.state.name for t in study.trials] == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
  assert study.trials[2].params == stopped[1].params
  assert study.trials[2].user_attrs["batchrl_resumes"] == 1
  assert (tune_dir / "trials" / "0" / "metrics.jsonl").read_text() == first  # not repeated
  assert not (tune_dir / "trials" / "1").exists()  # taken over by trial 2
  records = read_metrics(tune_dir / "trials" / "2")
  # continued from its checkpoint at 256: that update was not trained again
  assert [r["step"] for r in records if r["phase"] == "train"] == [256, 512]
  # trials 0 and 3 ran whole, trial 2 from its checkpoint; each landed in the study
  _check_trials_landed(tune_dir, 3)
  assert capsys.readouterr().out.startswith("Best trials (3 complete, 1 fail):")
  # Ray Tune's own records: the two trials of each run
  runs = sorted({p.parent for p in (tune_dir / "ray_results").glob("*/trainable_*")})
  assert [len(list(run.glob("trainable_*"))) for run in runs] == [2, 2]
  assert not ray.is_initialized() and _no_ray_left(tune_dir, before)
  # complete: running it again runs nothing
  assert len(search("cartpole", SPACE, **{**kwargs, "trials": 3}).trials) == 4


@pytest.mark.slow
def test_runners_train_each_trial_with_its_envs_in_ray_runners(tmp_path, monkeypatch, capsys):
  """``--runners 2``: the trials run one after another, each a ``batchrl train --ray
  --runners 2`` run (the envs in two Ray runner actors, 2 envs each) on one local Ray
  instance under the search, which is gone at the end."""
  ray = pytest.importorskip("ray")
  monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
  before = _ray_descendants()
  assert main(_argv(tmp_path, "--runners", "2", trials=2)) == 0
  tune_dir = tmp_path / "T-cartpole-tune"
  _check_trials_landed(tune_dir, 2)
  assert capsys.readouterr().out.startswith("Best trials (2 complete):")
  for n in (0, 1):
    train = [r for r in read_metrics(tune_dir / "trials" / str(n)) if r["phase"] == "train"]
    assert {"runner0/steps_per_second", "runner1/steps_per_second"} <= set(train[-1])
  assert (tune_dir / "ray").is_dir()  # the search's one instance, not one per trial
  assert not (tune_dir / "trials" / "0" / "ray").exists()
  assert not ray.is_initialized() and _no_ray_left(tune_dir, before)
