"""``batchrl bench``: suites planned seed by seed, run K at a time on their own cores, skipped
once finished, resumed when stopped, failures reported with the others going on, and the
report's table, references and curves."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batchrl import cli
from batchrl.bench import report, runs, suites
from batchrl.bench.suites import Entry, Reference, Suite
from batchrl.configclass import ConfigError

TINY = suites.SUITES["smoke"].entries[0].sets  # a few seconds per run once compiled


def test_cores_are_shared_out_disjoint_and_evenly():
  assert runs.core_sets(1, [0, 1]) == [[0, 1]]
  assert runs.core_sets(2, [0, 1]) == [[0], [1]]
  assert runs.core_sets(2, [0, 1, 2, 3, 4]) == [[0, 1, 2], [3, 4]]
  assert runs.core_sets(3, [4, 6]) == [[4], [6], [4]]  # more jobs than cores: shared


def test_a_suite_is_planned_seed_by_seed_with_each_runs_command():
  planned = runs.plan(suites.suite("mujoco-300k"), 2)
  assert len(planned) == 2 * 12
  assert [r.seed for r in planned[:12]] == [0] * 12  # every entry's first seed first
  first = planned[0]
  assert (first.entry.config, first.env, first.steps) == ("sac_mujoco", "HalfCheetah-v5",
                                                          300_000)
  assert first.name == "HalfCheetah-v5-s0-sac_mujoco"
  assert first.user_command() == ("batchrl train --config sac_mujoco --seed 0 "
                                  "--set env=HalfCheetah-v5 --set steps=300000")
  classic = runs.plan(suites.suite("classic"), 1)
  assert classic[0].env == "CartPole-v1" and classic[0].steps == 512_000  # the config's own


def test_with_lanes_each_entry_trains_its_seeds_in_one_run():
  planned = runs.plan(suites.suite("mujoco-300k"), 3, lanes=True)
  assert len(planned) == 12  # one run per entry, every seed in it
  first = planned[0]
  assert first.name == "HalfCheetah-v5-lanes3-sac_mujoco" and first.lane_indices == [0, 1, 2]
  assert first.user_command() == ("batchrl train --config sac_mujoco --seed 0 --seeds 3 "
                                  "--set env=HalfCheetah-v5 --set steps=300000")
  assert first.row_command() == first.user_command()  # it trains the row's every seed
  argv = first.argv(Path("bench"))
  assert argv[argv.index("--seeds") + 1] == "3" and argv[argv.index("--seed") + 1] == "0"
  plain = runs.plan(suites.suite("mujoco-300k"), 3)[0]
  assert plain.lane_indices == [None] and "--seeds" not in plain.argv(Path("bench"))
  assert plain.row_command().startswith("batchrl train --config sac_mujoco --seed S --set")
  with pytest.raises(ConfigError, match="'pqn_atari' uses backend 'envpool'"):
    runs.plan(Suite("x", "x", (Entry("pqn_atari"),)), 2, lanes=True)


def _write_lanes_run(logdir, run, wall: float) -> None:
  """The records of a finished two-seed lanes run: each seed's evaluations and training
  episodes under ``seed<i>/``, the whole run's under the plain keys."""
  directory = runs.run_dir(logdir, run)
  directory.mkdir(parents=True)
  records = []
  for step, scores, episodes in ((50, (1.0, 3.0), (2, 1)), (95, (3.0, 7.0), (2, 1)),
                                 (100, (5.0, 9.0), (1, 3))):
    records.append({"step": step, "phase": "train", "wall_time": step, "mean_score": 0.0,
                    "episodes": float(sum(episodes)),
                    **{f"seed{i}/mean_score": 10.0 * s for i, s in enumerate(scores)},
                    **{f"seed{i}/episodes": float(n) for i, n in enumerate(episodes)}})
    records.append({"step": step, "phase": "eval", "wall_time": step + 1,
                    "mean_score": sum(scores) / 2,
                    **{f"seed{i}/mean_score": s for i, s in enumerate(scores)}})
  (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
  runs.record_sitting(logdir, run, 0.0, wall, 0)


def test_the_report_reads_each_seed_of_a_lanes_run(tmp_path):
  logdir = tmp_path / "bench"
  suite = Suite("two", "", (Entry("sac_mujoco", env="Pendulum-v1", steps=100),), seeds=2,
                budgets=(50,))
  (run,) = runs.plan(suite, 2, lanes=True)
  _write_lanes_run(logdir, run, wall=20.0)
  assert report.evaluations(logdir, run, 1) == [(50, 3.0), (95, 7.0), (100, 9.0)]
  assert report.training_reports(logdir, run, 0) == [(50, 2.0, 10.0), (95, 2.0, 30.0),
                                                     (100, 1.0, 50.0)]
  at50, end = report.rows(suite, logdir, 2, lanes=True)
  assert (at50["final"], at50["best"], at50["seeds"]) == ([1.0, 3.0], [1.0, 3.0], 2)
  assert end["final"] == [5.0, 9.0]
  # the last tenth, (90, 100], weighted by each seed's own episodes (2:1 and 1:3)
  assert end["train"] == pytest.approx([(2 * 30.0 + 50.0) / 3, (70.0 + 3 * 90.0) / 4])
  assert end["wall_s"] == [20.0] and end["steps_per_s"] == [5.0]  # one run, each seed's pace
  assert end["command"] == ("batchrl train --config sac_mujoco --seed 0 --seeds 2 "
                            "--set env=Pendulum-v1 --set steps=100")
  assert "| 100 | 2/2 in one run | 7.0 ± 2.0 |" in report.table([end])
  # the same logdir read as runs of one seed each holds nothing yet: pending, not wrong
  assert report.rows(suite, logdir, 2)[1]["final"] == []


def test_entries_of_one_config_and_env_are_told_apart_by_their_label():
  suite = Suite("k", "", tuple(Entry("sac_mujoco", env="Pendulum-v1", label=f"K{k}",
                                     sets=(f"repeat_update={k}",)) for k in (1, 8)))
  names = [r.name for r in runs.plan(suite, 1)]
  assert names == ["K1-s0-sac_mujoco", "K8-s0-sac_mujoco"]


def test_only_keeps_the_entries_named_by_config_environment_or_both_in_suite_order():
  suite = suites.suite("mujoco-300k")
  names = lambda only: [suites.entry_name(e) for e in suites.select(suite, only).entries]
  assert names("sac_mujoco:Ant-v5, td3_mujoco") == [
      "sac_mujoco:Ant-v5", "td3_mujoco:HalfCheetah-v5", "td3_mujoco:Hopper-v5",
      "td3_mujoco:Walker2d-v5", "td3_mujoco:Ant-v5"]
  assert names("Hopper-v5") == ["sac_mujoco:Hopper-v5", "td3_mujoco:Hopper-v5",
                                "ppo_mujoco:Hopper-v5"]
  assert suites.select(suite, None) is suite
  labelled = Suite("k", "", tuple(Entry("sac_mujoco", env="Pendulum-v1", label=f"K{k}")
                                  for k in (1, 8)))
  assert [e.label for e in suites.select(labelled, "sac_mujoco:K8").entries] == ["K8"]


@pytest.mark.parametrize("only, message", [
    ("td3_mujoco:Pendulum-v1", "--only 'td3_mujoco:Pendulum-v1' names no entry of suite "
     "'mujoco-300k'; its entries: sac_mujoco:HalfCheetah-v5,"),
    (" , ", "--only names no entry: give CONFIG, ENV or CONFIG:ENV items"),
])
def test_only_naming_nothing_is_an_error_listing_the_entries(only, message):
  with pytest.raises(ConfigError) as info:
    suites.select(suites.suite("mujoco-300k"), only)
  assert message in str(info.value)


@pytest.mark.parametrize("make, message", [
    (lambda: suites.suite("mujoco300k"), "unknown suite 'mujoco300k' (did you mean "
     "'mujoco-300k'?)"),
    (lambda: runs.plan(suites.suite("smoke"), 0), "--seeds must be a positive number"),
    (lambda: runs.plan(Suite("x", "x", (Entry("no_such_config"),)), 1),
     "unknown config 'no_such_config'"),
    (lambda: runs.plan(Suite("x", "x", (Entry("cartpole_fused", sets=("stepz=3",)),)), 1),
     "unknown config key 'stepz'"),
    (lambda: runs.run_suite(suites.suite("smoke"), "unused", jobs=0), "--jobs must be"),
])
def test_bad_suites_seeds_and_jobs_fail_before_anything_runs(make, message):
  with pytest.raises(ConfigError) as info:
    make()
  assert message in str(info.value)


def test_scores_at_a_budget_are_the_last_and_best_evaluation_up_to_it():
  evals = [(10, 1.0), (20, 5.0), (30, 3.0), (40, 4.0)]
  assert report.at_budget(evals, 30) == (3.0, 5.0)
  assert report.at_budget(evals, 35) == (3.0, 5.0)
  assert report.at_budget(evals, 50) is None  # not reached yet: pending
  assert report.at_budget([], 10) is None


def test_a_budget_is_read_at_the_end_of_the_training_phase_that_reached_it():
  # a PPO run of 2048-step updates, 20480-step phases, evaluating every 100k steps
  phases = [(20480 * k, 1.0, 10.0 * k) for k in range(1, 16)]
  assert report.reading_step(phases, 100_000) == 102_400
  assert report.reading_step(phases, 102_400) == 102_400
  assert report.reading_step(phases, 400_000) == 400_000  # not reached yet: the budget
  evals = [(102_400, 800.0), (204_800, 1150.0), (307_200, 1270.0)]
  assert report.at_budget(evals, report.reading_step(phases, 300_000)) == (1270.0, 1270.0)
  assert report.at_budget(evals, report.reading_step(phases, 100_000)) == (800.0, 800.0)


def test_the_training_return_is_the_episode_weighted_mean_over_the_last_tenth():
  nan = float("nan")  # a report in which no episode ended
  reports = [(50, 2.0, 10.0), (90, 1.0, 40.0), (95, 3.0, 20.0), (100, 1.0, 100.0),
             (200, 4.0, 7.0), (205, 0.0, nan)]
  # budget 100: the reports in (90, 100], each weighted by its episodes
  assert report.train_return_at(reports, 100) == (3 * 20.0 + 100.0) / 4
  assert report.train_return_at(reports, 99) == (40.0 + 3 * 20.0) / 4  # (89.1, 99]
  assert report.train_return_at(reports, 200) == 7.0
  assert report.train_return_at(reports, 203) == 7.0  # reached (205), its last report empty
  assert report.train_return_at(reports, 170) is None  # no episode ended in (153, 170]
  assert report.train_return_at(reports, 300) is None  # not reached yet
  assert report.train_return_at([], 10) is None


def test_table_figures_are_written_out_to_their_significant_digits():
  assert [report.significant(x, 2) for x in (680.0, 1234.5, 0.0234, -273.2, 0.0)] == [
      "680", "1200", "0.023", "-270", "0"]
  assert report.significant(7096.4, 4) == "7096" and report.significant(7.5e6, 2) == "7.5e+06"
  assert report.significant(float("nan"), 2) == "nan"


def test_seeds_make_one_curve_with_their_mean_and_a_band_from_lowest_to_highest():
  curve = report.seed_curve("sac Hopper", [[(10, 1.0), (20, 4.0)], [(10, 3.0)]], "train")
  assert curve.phase == "train" and curve.x.tolist() == [10, 20]
  assert curve.mean.tolist() == [2.0, 4.0]
  assert curve.low.tolist() == [1.0, 4.0] and curve.high.tolist() == [3.0, 4.0]
  assert report.seed_curve("none", []) is None


def test_references_are_found_by_agent_and_task_whatever_the_version():
  assert suites.env_family("Hopper-v5") == "Hopper"
  assert suites.env_family("BreakoutNoFrameskip-v4") == "Breakout"
  assert suites.env_family("Breakout-MinAtar") == "Breakout-MinAtar"
  cleanrl = suites.references("sac", "Hopper-v5")[0]
  assert cleanrl.text() == "CleanRL (MuJoCo v4, 3 seeds): 2310 ± 343 at 1M"
  assert suites.references("sac", "Humanoid-v5") == ()
  assert Reference("x", -172, 100_000).text() == "x: -172 at 100k"


@pytest.mark.gymnax  # the runs are fused CartPole (gymnax)
def test_smoke_suite_runs_two_at_once_then_skips_what_finished_and_reports(tmp_path, capsys):
  logdir = tmp_path / "bench"
  out = tmp_path / "smoke.md"
  argv = ["bench", "--suite", "smoke", "--logdir", str(logdir), "--seeds", "1", "--jobs",
          "2", "--report", str(out)]
  planned = runs.plan(suites.suite("smoke"), 1)
  assert cli.main(argv[:-2] + ["--only", "cartpole_fused"]) == 0  # one entry, no report
  assert [runs.read_state(logdir, r)["finished"] for r in planned] == [True, False]
  assert not out.exists()
  assert cli.main(argv) == 0  # trains the rest
  states = [runs.read_state(logdir, r) for r in planned]
  assert all(s["finished"] and len(s["sittings"]) == 1 for s in states)
  assert all("cores usable" in s["sittings"][0]["machine"] for s in states)  # for the docs
  for r in planned:
    assert (runs.run_dir(logdir, r) / "metrics.jsonl").is_file()
    assert report.evaluations(logdir, r)[-1][0] == 4096

  assert cli.main(argv) == 0  # the second call retrains nothing
  assert [len(runs.read_state(logdir, r)["sittings"]) for r in planned] == [1, 1]

  text = out.read_text()
  assert "| cartpole_fused | CartPole-v1 | 4096 | 1/1 |" in text
  (row,) = [line for line in text.splitlines() if line.startswith("| cartpole_fused |")]
  train = float(row.split(" | ")[6])  # the training return column: episodes did end
  assert 8 <= train <= 500  # CartPole's returns
  assert "SB3 rl-zoo: 500 at 100k" in text  # the published column
  assert "`batchrl train --config cartpole_fused --seed S --set steps=4096" in text
  assert "Machine: " in text and "Versions: Python" in text
  curves = sorted((tmp_path / "smoke-curves").glob("*.png"))
  assert [p.name for p in curves] == ["cartpole_fused-CartPole-v1.png",
                                      "pqn_cartpole_fused-CartPole-v1.png"]
  assert "![cartpole_fused CartPole-v1](smoke-curves/cartpole_fused-CartPole-v1.png)" in text


@pytest.mark.gymnax  # the run is fused CartPole (gymnax)
def test_lanes_train_an_entrys_seeds_in_one_run_and_report_each(tmp_path):
  logdir, out = tmp_path / "bench", tmp_path / "lanes.md"
  argv = ["bench", "--suite", "smoke", "--logdir", str(logdir), "--seeds", "2", "--lanes",
          "--only", "cartpole_fused", "--report", str(out)]
  assert cli.main(argv) == 0
  (run, _) = runs.plan(suites.suite("smoke"), 2, lanes=True)
  assert runs.read_state(logdir, run)["finished"]
  assert [report.evaluations(logdir, run, lane)[-1][0] for lane in (0, 1)] == [4096, 4096]
  assert all(report.training_reports(logdir, run, 1)[-1][1:])  # its own episodes, return
  text = out.read_text()
  assert "| cartpole_fused | CartPole-v1 | 4096 | 2/2 in one run |" in text
  assert "`batchrl train --config cartpole_fused --seed 0 --seeds 2 --set steps=4096" in text
  assert "--lanes" in text and "Each row's seeds trained in one run" in text


@pytest.mark.gymnax  # the runs are fused CartPole (gymnax)
def test_a_stopped_run_resumes_and_a_failing_one_is_reported_while_others_go_on(tmp_path,
                                                                                 capsys):
  logdir = tmp_path / "bench"
  suite = Suite("mixed", "one good run, one whose environment does not exist",
                (Entry("cartpole_fused", steps=4096, sets=TINY),
                 Entry("cartpole_fused", env="NoSuchEnv-v0", steps=4096, sets=TINY)),
                seeds=1)
  result = runs.run_suite(suite, logdir)
  good, bad = runs.plan(suite, 1)
  assert result["ran"] == [good.name] and result["failed"] == [bad.name]
  assert "NoSuchEnv-v0" in runs.log_path(logdir, bad).read_text()
  assert runs.read_state(logdir, bad)["sittings"][0]["exit"] != 0

  # a run left unfinished (as after Ctrl-C) runs again in its own directory, from its
  # checkpoint: here the last one, so it only confirms the end and finishes
  state = runs.read_state(logdir, good)
  state["finished"] = False
  runs.state_path(logdir, good).write_text(json.dumps(state))
  again = runs.run_suite(Suite("mixed", "", suite.entries[:1], seeds=1), logdir)
  assert again["ran"] == [good.name]
  assert "Resuming run" in runs.log_path(logdir, good).read_text()
  assert [s["exit"] for s in runs.read_state(logdir, good)["sittings"]] == [0, 0]



def test_the_command_lists_suites_and_says_what_is_missing(capsys):
  assert cli.main(["bench", "--list"]) == 0
  listed = capsys.readouterr().out
  assert all(name in listed for name in suites.SUITES)
  assert cli.main(["bench", "--suite", "smoke"]) == 2
  assert "give --suite NAME and --logdir DIR" in capsys.readouterr().err
  assert cli.main(["bench", "--suite", "smoke", "--logdir", "x", "--report-only"]) == 2
  assert "--report-only writes the table: give --report FILE.md too" in capsys.readouterr().err


def test_a_run_still_trained_by_an_earlier_bench_is_left_alone(tmp_path):
  logdir = tmp_path / "bench"
  suite = Suite("one", "", suites.SUITES["smoke"].entries[:1], seeds=1)
  (run,) = runs.plan(suite, 1)
  # a process whose command line looks like the training of an earlier, killed bench
  other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "batchrl",
                            "train"])
  try:
    runs.mark_running(logdir, run, other.pid, time.time())
    result = runs.run_suite(suite, logdir)
    assert result["busy"] == [run.name] and result["ran"] == []
    assert not runs.run_dir(logdir, run).exists()
  finally:
    other.kill()
    other.wait()
  assert runs.running_pid(runs.read_state(logdir, run)) is None  # gone: it may run again


def test_the_sitting_of_a_killed_bench_is_recorded_from_its_runs_records(tmp_path):
  """A bench killed outright leaves its ``running`` entry and no sitting; the next start of
  the run records that sitting, its length up to the last record written since it began."""
  logdir = tmp_path / "bench"
  suite = Suite("one", "", suites.SUITES["smoke"].entries[:1], seeds=1)
  (run,) = runs.plan(suite, 1)
  gone = subprocess.Popen([sys.executable, "-c", "pass"])
  gone.wait()
  start = 1_000.0
  runs.mark_running(logdir, run, gone.pid, start)
  directory = runs.run_dir(logdir, run)
  directory.mkdir(parents=True)
  lines = [json.dumps({"step": step, "phase": "train", "wall_time": start + wall})
           for step, wall in ((0, -50.0), (64, 30.0), (128, 95.5))]  # the first: earlier
  (directory / "metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 19')  # cut line
  runs.record_cut_sitting(logdir, run)
  state = runs.read_state(logdir, run)
  assert "running" not in state and not state["finished"]
  assert state["sittings"] == [{"start": start, "seconds": 95.5, "exit": None,
                                "machine": report.machine()}]
  assert report.wall_seconds(state) == 95.5
  runs.record_cut_sitting(logdir, run)  # nothing left to record
  assert runs.read_state(logdir, run)["sittings"] == state["sittings"]


@pytest.mark.gymnax  # the runs are fused CartPole (gymnax)
def test_sigterm_stops_the_suite_with_its_runs_recorded_and_the_same_command_resumes(
    tmp_path):
  logdir = tmp_path / "bench"
  # a run long enough to be under way when the signal comes (about 10 s on 2 cores)
  entry = Entry("cartpole_fused", steps=262_144, sets=(
      "eval_every=131072", "report_every=4096", "checkpoint_every=131072", "eval_episodes=2"))
  script = tmp_path / "driver.py"
  script.write_text(
      "import sys\n"
      "from batchrl.bench import runs\n"
      "from batchrl.bench.suites import Entry, Suite\n"
      f"suite = Suite('long', '', ({entry!r},), seeds=1)\n"
      "result = runs.run_suite(suite, sys.argv[1])\n"
      "sys.exit(130 if result['stopped'] else 0)\n")
  argv = [sys.executable, str(script), str(logdir)]
  # started as a shell starts a background job: ignoring SIGINT, which its runs must not
  # inherit (SIGINT is how the bench asks them to stop with a checkpoint)
  driver = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
  (run,) = runs.plan(Suite("long", "", (entry,), seeds=1), 1)
  log_file, deadline = runs.log_path(logdir, run), time.time() + 120
  while time.time() < deadline and not (
      log_file.exists() and "Starting run" in log_file.read_text()):
    time.sleep(0.1)
  driver.send_signal(signal.SIGTERM)
  output = driver.communicate(timeout=300)[0]
  assert driver.returncode == 130, output
  state = runs.read_state(logdir, run)
  assert "running" not in state and not state["finished"], output
  assert state["sittings"][-1]["exit"] == 130  # the run heard the stop request
  resumed = subprocess.run(argv, capture_output=True, text=True, timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert runs.read_state(logdir, run)["finished"]
  assert report.evaluations(logdir, run)[-1][0] == 262_144
