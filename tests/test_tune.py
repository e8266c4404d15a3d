"""`batchrl tune`: the search grammar, bad input, and tiny fused searches end to end (resume,
pruning, best.yaml through `batchrl train --config`)."""
import json
import logging
import math
import os
import shutil
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from batchrl import checkpoint, configs
from batchrl.cli import main
from batchrl.configclass import ConfigError
from batchrl.logging import read_metrics
from batchrl.tune import check_space, completed, parse, parse_space
from conftest import skip_unless_gymnax
from tests.tune_argv import tune_argv

optuna = pytest.importorskip("optuna")

# 4 updates of 512 steps, an evaluation and a checkpoint after each
TINY = ["steps=2048", "report_every=512", "eval_every=512", "checkpoint_every=512",
        "num_envs=8", "rollout_length=64", "update_epochs=1", "eval_steps=100",
        "batch_size=256"]
# a seeded random sampler: every test trains the same two learning rates, so the
# compilation cache serves the repeats
SPACE = ["learning_rate=loguniform(1e-3,3e-3)"]


def _tune_argv(logdir, *extra, trials=2, config="cartpole_fused"):
  return tune_argv(logdir, config, SPACE, TINY, *extra, trials=trials)


def _evals(run_dir):
  return [(r["step"], r.get("mean_score")) for r in read_metrics(run_dir)
          if r["phase"] == "eval"]


# --------------------------------------------------------------------------- the grammar


def test_the_grammar_parses_every_distribution():
  p = parse("learning_rate=loguniform(1e-4, 1e-2)")
  assert (p.key, p.kind, p.low, p.high) == ("learning_rate", "loguniform", 1e-4, 1e-2)
  assert parse("agent.clip_range=uniform(0.1,0.3)").key == "agent.clip_range"
  assert (parse("update_epochs=int(2,10)").low, parse("update_epochs=int(2,10)").high) == (2, 10)
  assert parse("activation=choice(tanh,relu)").choices == ("tanh", "relu")
  assert parse("policy_layers=choice((64,64),(128,))").choices == ("(64,64)", "(128,)")
  assert [p.key for p in parse_space({"a": "int(1,2)", "b": "choice(x,y)"})] == ["a", "b"]


@pytest.mark.parametrize("text, message", [
    ("learning_rate", "does not parse: expected KEY=loguniform(LOW,HIGH)"),
    ("learning_rate=normal(0,1)", "unknown distribution 'normal'"),
    ("learning_rate=uniform(0.1)", "exactly two bounds"),
    ("learning_rate=uniform(a,1)", "'a' is not a number"),
    ("update_epochs=int(1,2.5)", "int bounds are integers"),
    ("activation=choice(tanh)", "two or more values"),
    ("learning_rate=loguniform(1e-2,1e-4)", "bounds in the wrong order"),
    ("learning_rate=loguniform(0,1)", "0 < LOW"),
])
def test_the_grammar_refuses_what_does_not_parse(text, message):
  with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
    parse(text)


@pytest.mark.parametrize("text, message", [
    ("num_epochs=int(2,10)", "did you mean 'update_epochs'"),
    ("discount=uniform(0.9,1.5)", "discount must be in [0, 1]"),
    ("update_epochs=uniform(1,10)", "expects int"),
    ("activation=choice(tanh,sigmoid)", "sigmoid"),
])
def test_keys_and_ranges_are_checked_against_the_config(text, message):
  exp = configs.get("cartpole_fused")
  with pytest.raises(ConfigError) as error:
    check_space(exp, parse_space([text]), [])
  assert message in str(error.value)


def test_a_key_given_twice_or_also_set_is_refused_however_it_is_spelled():
  exp = configs.get("cartpole_fused")
  with pytest.raises(ConfigError) as error:
    parse_space(["discount=uniform(0.9,0.99)", "discount=uniform(0.8,0.9)"])
  assert str(error.value) == (
      "discount is given twice, by --search 'discount=uniform(0.9,0.99)' and by --search "
      "'discount=uniform(0.8,0.9)': keep one.")
  cases = [  # (--search items, --set items, seed): the field, and both places
      (["discount=uniform(0.9,0.99)"], ["discount=0.9"], None,
       "ppo.discount is given twice, by --set discount=0.9 and by --search "
       "'discount=uniform(0.9,0.99)': keep one (--set fixes"),
      (["agent.discount=uniform(0.9,0.99)"], ["ppo.discount=0.9"], None,
       "ppo.discount is given twice, by --set ppo.discount=0.9 and by --search "
       "'agent.discount=uniform(0.9,0.99)'"),
      (["learning_rate=loguniform(1e-4,1e-2)", "ppo.learning_rate=uniform(1e-4,1e-2)"], [],
       None, "ppo.learning_rate is given twice, by --search 'learning_rate=loguniform(1e-4,"
       "1e-2)' and by --search 'ppo.learning_rate=uniform(1e-4,1e-2)'"),
      (["num_envs=choice(4,8)"], ["run.num_envs=16"], None,
       "run.num_envs is given twice, by --set run.num_envs=16 and by --search "
       "'num_envs=choice(4,8)'"),
      (["run.seed=int(0,3)"], [], 7,
       "run.seed is given twice, by --seed 7 and by --search 'run.seed=int(0,3)'"),
  ]
  for space, overrides, seed, message in cases:
    with pytest.raises(ConfigError) as error:
      check_space(exp, parse_space(space), overrides, seed=seed)
    assert str(error.value).startswith(message)
  # different fields (of run and of the agent) are fine together
  check_space(exp, parse_space(["learning_rate=loguniform(1e-4,1e-2)"]), ["run.steps=4096"],
              seed=0)


def test_the_objective_is_the_best_or_last_evaluation(tmp_path):
  from batchrl.tune.options import TuneOptions
  from batchrl.tune.trial import objective_of
  records = [{"step": 1, "phase": "eval", "mean_score": 3.0},
             {"step": 1, "phase": "train", "mean_score": 99.0},
             {"step": 2, "phase": "eval", "mean_score": None},  # no episode ended
             {"step": 3, "phase": "eval", "mean_score": 5.0},
             {"step": 4, "phase": "eval", "mean_score": 4.0}]
  (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
  assert objective_of(tmp_path, TuneOptions()) == 5.0
  assert objective_of(tmp_path, TuneOptions(direction="minimize")) == 3.0
  assert objective_of(tmp_path, TuneOptions(objective="last")) == 4.0
  assert math.isnan(objective_of(tmp_path, TuneOptions(metric="episodes")))  # none reported


def test_the_mean_of_a_runs_evaluations_is_recorded_in_its_trial(tmp_path):
  from types import SimpleNamespace

  from batchrl.tune.options import TuneOptions
  from batchrl.tune.study import CURVE
  from batchrl.tune.trial import curve_of, record_curve
  for name, scores in (("a", [100.0, None, 500.0]), ("b", [300.0, 500.0])):
    (tmp_path / name).mkdir()
    (tmp_path / name / "metrics.jsonl").write_text("".join(
        json.dumps({"step": i, "phase": phase, "mean_score": score}) + "\n"
        for i, score in enumerate(scores) for phase in ("train", "eval")))
  assert curve_of(tmp_path / "a", TuneOptions()) == 300.0  # a null evaluation is left out
  assert math.isnan(curve_of(tmp_path / "a", TuneOptions(metric="episodes")))
  attrs = {}
  trial = SimpleNamespace(set_user_attr=attrs.__setitem__)
  record_curve(trial, [tmp_path / "a", tmp_path / "b"], TuneOptions())  # seeds: their mean
  assert attrs == {CURVE: 350.0}
  record_curve(trial, [tmp_path / "a"], TuneOptions(metric="episodes"))  # none: not recorded
  assert attrs == {CURVE: 350.0}


def test_tied_objectives_are_ranked_by_the_mean_of_their_evaluations(tmp_path, caplog):
  """CartPole caps at 500: trials that reach it tie on the objective (the study's value, as
  Optuna has it: its best_trial is the first of them). The table, the log line and
  best.yaml rank them by the mean of their evaluations (the sooner there, the better; a
  trial of an older search, without one, last) and say so."""
  from batchrl.tune import optimize
  from batchrl.tune import study as studies
  from batchrl.tune.options import TuneOptions
  study = optuna.create_study(direction="maximize")
  for key, value in (("metric", "mean_score"), ("objective", "best"),
                     (optimize.DIRECTORY, str(tmp_path))):
    study.set_user_attr(key, value)
  space = {"learning_rate": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)}
  for lr, value, curve in ((1e-3, 500.0, 366.67), (2e-3, 500.0, 433.33), (3e-3, 450.0, 350.0),
                           (4e-3, 500.0, None)):
    attrs = {studies.RUN_DIR: f"trials/{len(study.trials)}"}
    attrs.update({studies.CURVE: curve} if curve is not None else {})
    study.add_trial(optuna.trial.create_trial(params={"learning_rate": lr}, value=value,
                                              distributions=space, user_attrs=attrs))
  assert study.best_trial.number == 0 and study.best_value == 500.0
  assert [t.number for t in optimize.completed(study)] == [1, 0, 3, 2]
  tie = ("3 trials tie at 500: ranked by the mean of their evaluations, the area under the "
         "curve (the sooner a trial got there, the better)")
  assert optimize.table(study) == "\n".join([
      "Best trials (4 complete):",
      "trial  best mean_score  mean of evals  learning_rate",
      "1      500              433.3          0.002",
      "0      500              366.7          0.001",
      "3      500              -              0.004",
      "2      450              350            0.003",
      tie[:1].upper() + tie[1:] + ".",
      f"Best config: {tmp_path / 'best.yaml'}"])
  caplog.clear()  # (Optuna's line about the new study)
  with caplog.at_level(logging.INFO, logger="batchrl"):
    optimize._log_trial(optuna, TuneOptions())(study, study.trials[2])
  assert caplog.messages == [
      f"Trial 2: best mean_score 450 (learning_rate=0.003); best so far: trial 1, 500 ({tie})"]
  (tmp_path / "trials" / "1").mkdir(parents=True)
  (tmp_path / "trials" / "1" / "config.yaml").write_text("config: cartpole_fused\n")
  assert optimize.write_best(study, tmp_path).read_text().startswith(
      f"# batchrl tune: trial 1 of {tmp_path.name}, objective 500\n# {tie}\n"
      "# values: learning_rate=0.002\n")


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("change, message", [
    (["--search", "clip_range=uniform(0.3"], "does not parse"),
    (["--search", "num_epochs=int(2,10)"], "did you mean 'update_epochs'"),
    (["--search", "clip_range=uniform(0.3,0.1)"], "wrong order"),
    (["--search", "discount=uniform(0.5,2)"], "discount must be in [0, 1]"),
    (["--trials", "0"], "--trials must be >= 1"),
    (["--metric", "loss"], "not an evaluation metric"),
    (["--sampler", "grid", "--search", "clip_range=uniform(0.1,0.3)"], "continuous range"),
    # a field both fixed and searched, or searched twice, however spelled (TINY sets
    # update_epochs; SPACE searches learning_rate)
    (["--search", "agent.update_epochs=int(1,3)"],
     "ppo.update_epochs is given twice, by --set update_epochs=1 and by --search "
     "'agent.update_epochs=int(1,3)'"),
    (["--search", "ppo.learning_rate=uniform(1e-3,2e-3)"],
     "ppo.learning_rate is given twice, by --search 'learning_rate=loguniform(1e-3,3e-3)' "
     "and by --search 'ppo.learning_rate=uniform(1e-3,2e-3)'"),
    (["--search", "learning_rate=uniform(1e-3,2e-3)"], "learning_rate is given twice"),
    (["--set", "ppo.learning_rate=1e-3"], "by --set ppo.learning_rate=1e-3 and by --search"),
    (["--search", "run.seed=int(0,3)"], "run.seed is given twice, by --seed 0 and by"),
])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(change, message, tmp_path, capsys):
  logdir = tmp_path / "logs"
  assert main(_tune_argv(logdir) + change) == 2
  err = capsys.readouterr().err.strip()
  assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
  assert not logdir.exists()


def test_batch_trials_need_in_graph_envs(tmp_path, capsys):
  logdir = tmp_path / "logs"
  assert main(_tune_argv(logdir, "--batch-trials", "2", config="cartpole")) == 2
  err = capsys.readouterr().err.strip()
  assert "side by side needs in-graph ones (run.backend='gymnax')" in err
  assert "Leave out --batch-trials" in err and len(err.splitlines()) == 1
  assert not logdir.exists()


def test_batch_trials_refuse_an_update_that_runs_outside_the_program(tmp_path, capsys):
  logdir = tmp_path / "logs"
  argv = _tune_argv(logdir, "--batch-trials", "2", "--set", "update_loop=host",
                    config="cartpole_fused")
  assert main(argv) == 2
  err = capsys.readouterr().err.strip()
  assert "update_loop='host'" in err and "--set update_loop=scan" in err
  assert len(err.splitlines()) == 1 and not logdir.exists()


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_batch_trials_is_auto_or_a_positive_integer(value, tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_:
    main(_tune_argv(tmp_path / "logs", "--batch-trials", value))
  assert exit_.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert f"expected 'auto' or an integer >= 1, got {value!r}" in err[-1]
  assert not (tmp_path / "logs").exists()


# --------------------------------------------------------------------------- how trials run


@pytest.fixture
def untrained(monkeypatch):
  """Searches that train nothing: a one-at-a-time trial fails at once, a batch of trials
  is recorded (its size) and told failed; the search says how it runs them, and ends."""
  from batchrl.tune import optimize
  from batchrl.tune.trial import TrialFailed
  batches = []

  def run_trial(optuna, trial, *args, **kwargs):
    raise TrialFailed(f"trial {trial.number}: not trained (test)")

  def run_groups(optuna, study, count, *args):
    batches.append(args[-3])  # batch_trials
    for _ in range(count):
      study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)

  monkeypatch.setattr(optimize, "run_trial", run_trial)
  monkeypatch.setattr(optimize, "run_groups", run_groups)
  return batches


def _mode_line(caplog) -> str:
  (line,) = [m for m in caplog.messages if m.startswith("tune: ")]
  return line


SIDE_BY_SIDE = "2 side by side per program; --batch-trials 1 runs them one at a time"
HOST_WHY = ("one at a time: 'cartpole' steps host environments (run.backend='gymnasium'); "
            "side by side needs in-graph ones (run.backend='gymnax')")


@pytest.mark.parametrize("config, extra, line, batch", [
    # the default on a fused config: side by side
    ("cartpole_fused", [], SIDE_BY_SIDE, 2),
    # a choice of a few values is grouped by: still side by side
    ("cartpole_fused", ["--search", "clip_range=choice(0.1,0.2)"], SIDE_BY_SIDE, 2),
    ("cartpole_fused", ["--batch-trials", "1"], "one at a time (--batch-trials 1)", None),
    ("cartpole_fused", ["--batch-trials", "auto"], SIDE_BY_SIDE, 2),
    ("cartpole_fused", ["--batch-trials", "4"], "2 side by side per program (--batch-trials 4)",
     4),
    # the default where trials cannot share a program: one at a time, saying why
    ("cartpole", [], HOST_WHY, None),
    ("cartpole_fused", ["--set", "update_loop=host"],
     "one at a time: 'cartpole_fused' runs its update outside the compiled program (PPO's "
     "update_loop='host' on this backend), where searched values cannot be traced; --set "
     "update_loop=scan keeps it inside", None),
    ("cartpole_fused", ["--seeds-per-trial", "2"],
     "one at a time: --seeds-per-trial 2 trains each trial's seeds side by side instead", None),
    ("cartpole_fused", ["--search", "keep_checkpoints=int(1,20)"],
     "one at a time: the searched values a compiled program holds fixed (int, choice, run "
     "fields) take 20 combinations, so most trials would need a program of their own", None),
    ("cartpole_fused", ["--search", "run.timeout=uniform(10,20)"],
     "one at a time: --search 'run.timeout=uniform(10,20)' sets a value the compiled program "
     "holds fixed, so every trial would need a program of its own", None),
])
def test_the_search_says_how_its_trials_run(config, extra, line, batch, untrained, tmp_path,
                                            caplog):
  if configs.get(config).run.backend == "gymnax":
    skip_unless_gymnax()
  with caplog.at_level(logging.INFO, logger="batchrl"):
    assert main(_tune_argv(tmp_path, *extra, config=config)) == 0
  assert _mode_line(caplog) == f"tune: 2 trials, {line}"
  assert untrained == ([] if batch is None else [batch])


@pytest.mark.gymnax
def test_auto_takes_as_many_trials_as_fit_in_memory(monkeypatch):
  from batchrl.tune import batched
  from batchrl.tune.batched import Batching, batching
  from batchrl.tune.options import TuneOptions
  exp = configs.apply_overrides(configs.get("cartpole_fused"), TINY)
  params, opts = parse_space(SPACE), TuneOptions(trials=40)
  monkeypatch.setattr(batched, "available_bytes", lambda: (10**12, "test memory"))
  assert batching(exp, opts, params, None) == Batching(16, auto=True)  # at most 16
  per_trial = batched.STATE_COPIES * batched._trial_bytes(exp, ("learning_rate",), False)
  free = int(5.5 * per_trial / batched.MEMORY_SHARE)
  monkeypatch.setattr(batched, "available_bytes", lambda: (free, "test memory"))
  five = batching(exp, opts, params, None)
  assert five.limit == 5 and five.why.startswith("as many as fit: a trial needs about ")
  assert five.line(40) == (f"tune: 40 trials, 5 side by side per program ({five.why}); "
                           "--batch-trials 1 runs them one at a time")
  monkeypatch.setattr(batched, "available_bytes", lambda: (per_trial, "test memory"))
  one = batching(exp, opts, params, None)
  assert one.limit == 1 and one.line(40) == f"tune: 40 trials, one at a time: {one.why}"
  assert one.why.startswith("side by side would not fit: a trial needs about ")
  assert "is free in test memory" in one.why


def test_auto_spreads_the_trials_evenly_over_its_programs():
  from batchrl.tune.batched import Batching
  auto = Batching(16, auto=True)
  assert [auto.size(n) for n in (1, 2, 16, 17, 20, 33)] == [1, 2, 16, 9, 10, 11]
  # what auto does, then the other way as a choice (not as if --batch-trials 1 were given)
  assert auto.line(4) == ("tune: 4 trials, 4 side by side per program; --batch-trials 1 "
                          "runs them one at a time")
  assert auto.line(1) == "tune: 1 trial, one at a time"
  assert Batching(4, auto=False).line(20) == ("tune: 20 trials, 4 side by side per program "
                                              "(--batch-trials 4)")
  assert Batching(4, auto=False).size(20) == 4  # --batch-trials B is B


def test_tpe_spreads_the_trials_asked_together_and_not_those_asked_one_at_a_time():
  """A program's trials are asked together: TPE (constant liar) counts the ones under way,
  so it does not propose one value many times; asked one at a time, nothing changes."""
  from batchrl.tune.study import make_sampler
  space = parse_space(["learning_rate=loguniform(1e-4,1e-2)"])
  distribution = optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)

  def score(lr):
    return -(math.log10(lr) + 2.5) ** 2

  study = optuna.create_study(direction="maximize", sampler=make_sampler(optuna, "tpe", space, 0))
  for _ in range(2):  # the first 10 at random, then 10 proposed from the same history
    trials = [study.ask({"learning_rate": distribution}) for _ in range(10)]
    for t in trials:
      study.tell(t, score(t.params["learning_rate"]))
  # (without constant liar: 0.11 here)
  assert np.std(np.log10([t.params["learning_rate"] for t in trials])) > 0.3

  def objective(trial):
    return score(trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True))

  values = []
  for sampler in (make_sampler(optuna, "tpe", space, 3), optuna.samplers.TPESampler(seed=3)):
    alone = optuna.create_study(direction="maximize", sampler=sampler)
    alone.optimize(objective, n_trials=15)
    values.append([t.params["learning_rate"] for t in alone.trials])
  assert values[0] == values[1]


@pytest.mark.gymnax
def test_a_searched_float_the_agent_reads_as_a_python_value_runs_one_at_a_time(monkeypatch):
  from batchrl.tune import batched
  from batchrl.tune.options import TuneOptions
  real = batched.family

  class Branching:
    """The real agent, built after a Python branch on its learning rate."""

    def __init__(self, name):
      self.family = real(name)

    def make(self, config):
      if config.learning_rate > 1.0:
        raise AssertionError("never")
      return self.family.make(config)

  monkeypatch.setattr(batched, "family", Branching)
  exp = configs.apply_overrides(configs.get("cartpole_fused"), TINY)
  decided = batched.batching(exp, TuneOptions(), parse_space(SPACE), None)
  assert decided.limit == 1
  assert decided.why == ("agent 'ppo' uses learning_rate as a Python value, so it cannot be "
                         "traced (TracerBoolConversionError)")


def test_bad_input_from_the_shell_is_one_line(tmp_path):
  logdir = tmp_path / "logs"
  result = subprocess.run(
      [sys.executable, "-m", "batchrl", *_tune_argv(logdir, "--search", "x=lognormal(1,2)")],
      capture_output=True, text=True, timeout=120,
      env={**os.environ, "BATCHRL_COMPILATION_CACHE": "0"})
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      "batchrl tune: error: --search 'x=lognormal(1,2)' does not parse: unknown distribution "
      "'lognormal'; expected KEY=loguniform(LOW,HIGH), KEY=uniform(LOW,HIGH), "
      "KEY=int(LOW,HIGH) or KEY=choice(A,B,...)."]
  assert not logdir.exists()


def test_an_agent_that_cannot_learn_the_env_s_actions_is_one_line_before_the_study(
    tmp_path, capsys):
  logdir = tmp_path / "logs"
  argv = tune_argv(logdir, "td3_pendulum", ["learning_rate=loguniform(1e-4,1e-3)"],
                   ["env=CartPole-v1"])
  assert main(argv) == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith("batchrl tune: error: agent 'td3' (config 'td3_pendulum') cannot "
                        "train on 'CartPole-v1': td3 learns continuous"), err
  assert len(err.splitlines()) == 1
  assert not logdir.exists()


def test_train_config_file_errors_are_one_line(tmp_path, capsys):
  bad = tmp_path / "bad.yaml"
  bad.write_text("run: [1, 2\n")
  for path, message in ((tmp_path / "missing.yaml", "does not exist"),
                        (bad, "is not valid YAML")):
    assert main(["train", "--config", str(path), "--logdir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
  bad.write_text(yaml.safe_dump({"config": "x", "agent": "ppo", "run": {"stepz": 1}, "ppo": {}}))
  assert main(["train", "--config", str(bad), "--logdir", str(tmp_path / "r")]) == 2
  assert "stepz" in capsys.readouterr().err
  assert not (tmp_path / "r").exists()


def test_interrupted_trials_are_queued_again_once_and_failed_ones_never(tmp_path):
  from batchrl.tune import study as studies
  from batchrl.tune.options import TuneOptions
  exp = configs.get("cartpole_fused")
  ident = studies.identity(exp, parse_space(SPACE), TuneOptions())
  study = studies.create(optuna, tmp_path, ident)
  killed = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-3, 3e-3)})
  failed = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-3, 3e-3)})
  failed.set_user_attr(studies.FAILED, "values that clash")
  study.tell(failed, state=optuna.trial.TrialState.FAIL)
  assert studies.requeue_interrupted(optuna, study) == [killed.number]  # its process died
  assert studies.requeue_interrupted(optuna, study) == []  # once
  trials = study.get_trials()
  assert [t.state.name for t in trials] == ["FAIL", "FAIL", "WAITING"]
  assert studies.done_trials(optuna, study) == 1  # the clash counts; the killed one does not
  again = study.ask()  # the queued trial comes first, with the killed one's values
  assert again.suggest_float("learning_rate", 1e-3, 3e-3) == trials[0].params["learning_rate"]
  assert again.user_attrs[studies.RESUMES] == killed.number
  loaded = studies.load(optuna, tmp_path, ident)
  assert loaded.user_attrs["config"] == "cartpole_fused"


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def search_dir(tmp_path_factory):
  """A finished 2-trial search of tiny cartpole_fused runs, one at a time, shared by
  readers."""
  logdir = tmp_path_factory.mktemp("tune")
  assert main(_tune_argv(logdir, "--batch-trials", "1")) == 0
  return logdir / "T-cartpole_fused-tune"


@pytest.mark.gymnax
@pytest.mark.slow
def test_a_search_writes_trial_runs_a_study_and_best_yaml(search_dir, capsys):
  study = optuna.load_study(study_name=None, storage=f"sqlite:///{search_dir / 'study.db'}")
  assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
  lrs = [t.params["learning_rate"] for t in study.trials]
  assert len(set(lrs)) == 2 and all(1e-3 <= lr <= 3e-3 for lr in lrs)
  for t in study.trials:
    run = search_dir / "trials" / str(t.number)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["ppo"]["learning_rate"] == t.params["learning_rate"]
    assert saved["run"]["steps"] == 2048
    evals = _evals(run)
    assert [s for s, _ in evals] == [512, 1024, 1536, 2048]
    assert t.value == max(v for _, v in evals if v is not None)  # the best evaluation
    assert (run / "checkpoints").is_dir()
  best = yaml.safe_load((search_dir / "best.yaml").read_text())
  assert best["ppo"]["learning_rate"] == completed(study)[0].params["learning_rate"]


@pytest.mark.gymnax
@pytest.mark.slow
def test_best_yaml_round_trips_through_train_config(search_dir, tmp_path):
  study = optuna.load_study(study_name=None, storage=f"sqlite:///{search_dir / 'study.db'}")
  best_run = search_dir / "trials" / str(completed(study)[0].number)
  assert main(["train", "--config", str(search_dir / "best.yaml"), "--logdir", str(tmp_path),
               "--timestamp", "B", "--no-tensorboard", "--no-progress"]) == 0
  run = tmp_path / "B-cartpole_fused"
  assert yaml.safe_load((run / "config.yaml").read_text()) == yaml.safe_load(
      (best_run / "config.yaml").read_text())
  assert _evals(run) == _evals(best_run)  # same config, same seed: the same run


@pytest.mark.gymnax
@pytest.mark.slow
def test_resume_continues_without_repeating_finished_trials(search_dir, tmp_path):
  """A search stopped by Ctrl-C in trial 1 (``stop``: what the CLI's first Ctrl-C sets),
  run again: trial 0 is kept as it was, trial 1 runs again with its values from its
  checkpoint (as trial 2), and nothing more."""
  from batchrl.tune import search
  logdir = tmp_path / "logs"
  tune_dir = logdir / "T-cartpole_fused-tune"
  calls = []

  def ctrl_c():  # like Ctrl-C, true from then on. Asked after each update (a phase here) and
    calls.append(1)  # after each phase but a run's last: 4 + 3 in trial 0, then trial 1
    return len(calls) >= 10  # trial 1 after its second update: it checkpoints at 1024

  with pytest.raises(KeyboardInterrupt):
    search("cartpole_fused", SPACE, trials=2, logdir=logdir, timestamp="T", overrides=TINY,
           sampler="random", pruner="none", seed=0, tensorboard=False, batch_trials=1,
           stop=ctrl_c)
  first = (tune_dir / "trials" / "0" / "metrics.jsonl").read_text()
  assert _evals(tune_dir / "trials" / "1") == _evals(search_dir / "trials" / "1")[:1]
  assert checkpoint.latest_step(tune_dir / "trials" / "1" / "checkpoints") == 1024

  assert main(_tune_argv(logdir, "--batch-trials", "1")) == 0  # the same command again
  study = optuna.load_study(study_name=None, storage=f"sqlite:///{tune_dir / 'study.db'}")
  assert [t.state.name for t in study.trials] == ["COMPLETE", "FAIL", "COMPLETE"]
  assert study.trials[2].params == study.trials[1].params
  assert (tune_dir / "trials" / "0" / "metrics.jsonl").read_text() == first  # not repeated
  assert not (tune_dir / "trials" / "1").exists()
  # continued from step 1024 (the evaluation due there was skipped to stop quickly), the
  # same run as the uninterrupted one with the same values
  uninterrupted = _evals(search_dir / "trials" / "1")
  assert _evals(tune_dir / "trials" / "2") == [uninterrupted[0], *uninterrupted[2:]]
  assert main(_tune_argv(logdir, "--batch-trials", "1")) == 0  # complete: runs nothing
  assert len(optuna.load_study(study_name=None,
                               storage=f"sqlite:///{tune_dir / 'study.db'}").trials) == 3


@pytest.mark.gymnax
@pytest.mark.slow
def test_a_study_of_another_config_or_settings_is_refused(search_dir, tmp_path, capsys):
  other = tmp_path / "T-pendulum_fused-tune"
  shutil.copytree(search_dir, other)
  before = sorted(p.relative_to(other) for p in other.rglob("*"))
  result = subprocess.run(
      [sys.executable, "-m", "batchrl", *_tune_argv(tmp_path, config="pendulum_fused")],
      capture_output=True, text=True, timeout=120,
      env={**os.environ, "BATCHRL_COMPILATION_CACHE": "0"})
  assert result.returncode == 2
  assert len(result.stderr.strip().splitlines()) == 1
  assert "is a search of config 'cartpole_fused', not 'pendulum_fused'" in result.stderr
  assert sorted(p.relative_to(other) for p in other.rglob("*")) == before
  same = tmp_path / "T-cartpole_fused-tune"
  shutil.copytree(search_dir, same)
  assert main(_tune_argv(tmp_path, "--set", "discount=0.9")) == 2
  err = capsys.readouterr().err
  assert "other settings" in err and "ppo.discount: 0.99 saved, 0.9 given" in err


@pytest.mark.gymnax
@pytest.mark.slow
def test_pruning_stops_a_hopeless_trial_and_says_so(tmp_path):
  from batchrl.tune import search
  # CartPole scores at most 500: below 1000 every trial is hopeless at its first evaluation
  study = search("cartpole_fused", SPACE, trials=1, logdir=tmp_path, timestamp="T",
                 overrides=TINY, sampler="random", seed=0, tensorboard=False,
                 pruner=optuna.pruners.ThresholdPruner(lower=1000.0))
  (trial,) = study.trials
  assert trial.state.name == "PRUNED"
  run = tmp_path / "T-cartpole_fused-tune" / "trials" / "0"
  records = read_metrics(run)
  assert records[-1]["phase"] == "eval" and records[-1]["step"] == 512
  assert records[-1]["stopped"].startswith("pruned by the")
  assert [r["step"] for r in records] == [512, 512]  # it trained no further
  assert not (tmp_path / "T-cartpole_fused-tune" / "best.yaml").exists()
  assert json.loads(json.dumps(trial.intermediate_values)) == {
      "512": records[-1]["mean_score"]}


@pytest.mark.gymnax
@pytest.mark.slow
def test_a_fused_search_trains_its_trials_side_by_side_by_default(search_dir, tmp_path,
                                                                   caplog):
  """The command as typed (no --batch-trials) trains the fixture's two learning rates side
  by side in one program (vmapped over the values), says so, marks each trial's Score
  lines, and gives the same runs as each alone (the fixture: --batch-trials 1)."""
  alone = optuna.load_study(study_name=None, storage=f"sqlite:///{search_dir / 'study.db'}")
  with caplog.at_level(logging.INFO, logger="batchrl"):
    assert main(_tune_argv(tmp_path)) == 0
  lines = caplog.messages
  assert ("tune: 2 trials, 2 side by side per program; --batch-trials 1 runs them one at a "
          "time") in lines
  assert "Training trials 0, 1 in one program (learning_rate batched)" in lines
  scores = [m for m in lines if "Score " in m]
  assert scores and all(m.startswith(("trial 0: Score ", "trial 1: Score ")) for m in scores)
  tune_dir = tmp_path / "T-cartpole_fused-tune"
  study = optuna.load_study(study_name=None, storage=f"sqlite:///{tune_dir / 'study.db'}")
  assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
  for batched, one in zip(study.trials, alone.trials):
    assert batched.params == one.params  # the same values
    evals = _evals(tune_dir / "trials" / str(batched.number))
    evals_one = _evals(search_dir / "trials" / str(one.number))
    assert [s for s, _ in evals] == [s for s, _ in evals_one] == [512, 1024, 1536, 2048]
    np.testing.assert_allclose([v for _, v in evals], [v for _, v in evals_one], rtol=1e-5)
    assert batched.value == pytest.approx(one.value, rel=1e-5)
  # each batched trial is a normal run directory, with its config and checkpoints
  run = tune_dir / "trials" / "1"
  assert yaml.safe_load((run / "config.yaml").read_text())["ppo"]["learning_rate"] == \
      study.trials[1].params["learning_rate"]
  assert [c.step for c in checkpoint.list_checkpoints(run / "checkpoints")][-1] == 2048


@pytest.mark.gymnax
@pytest.mark.slow
def test_a_pruned_trial_of_a_group_stops_logging(tmp_path):
  from batchrl.tune import search
  study = search("cartpole_fused", SPACE, trials=2, logdir=tmp_path, timestamp="T",
                 overrides=TINY, sampler="random", seed=0, tensorboard=False, batch_trials=2,
                 pruner=optuna.pruners.ThresholdPruner(lower=1000.0))
  assert [t.state.name for t in study.trials] == ["PRUNED", "PRUNED"]
  for t in study.trials:
    run = tmp_path / "T-cartpole_fused-tune" / "trials" / str(t.number)
    records = read_metrics(run)
    assert [(r["step"], r["phase"]) for r in records] == [(512, "train"), (512, "eval")]
    assert records[-1]["stopped"].startswith("pruned by the ThresholdPruner at step 512")
    assert checkpoint.latest_step(run / "checkpoints") == 512


def test_parts_split_a_group_into_equal_padded_parts_and_join_the_real_lanes():
  from batchrl.cpus import usable_cpus
  from batchrl.parts import LaneSplit
  parts = LaneSplit(lanes=5, count=2)
  assert parts.size == 3
  values = {"learning_rate": jnp.arange(5, dtype=jnp.float32)}
  split = parts.split(values)
  # the last part is padded with copies of the last lane: same shapes, one compilation
  assert [p["learning_rate"].tolist() for p in split] == [[0, 1, 2], [3, 4, 4]]
  results = [{"score": np.asarray(p["learning_rate"]) * 10} for p in split]
  assert parts.join_host(results)["score"].tolist() == [0, 10, 20, 30, 40]
  assert parts.join(split)["learning_rate"].tolist() == [0, 1, 2, 3, 4]
  assert [parts.locate(i) for i in range(5)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
  assert LaneSplit.for_backend(1).count == 1
  assert LaneSplit.for_backend(16).count == min(16, usable_cpus())  # the CPU backend here


def _host_leaves(tree) -> list[np.ndarray]:
  import jax
  return [np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
                     else x) for x in jax.tree.leaves(tree)]


@pytest.mark.gymnax
@pytest.mark.optimized  # a lone trial against a group, each compiled as a run compiles it
def test_a_trial_in_a_group_is_the_trial_alone_up_to_the_rounding_of_batched_arithmetic():
  """What makes a grouped trial differ from the same values alone is float rounding alone:
  after an update its keys, env states and observations are the solo run's bit for bit and
  its agent state is within rounding (measured: 2e-7, a relative 4e-6); the same program
  with the value traced but not vmapped equals the solo run exactly, so neither the traced
  config nor the keys differ, only XLA's batched (vmapped) arithmetic. Training amplifies
  the rounding: the evaluations of longer runs differ (README, batchrl tune)."""
  import jax

  from batchrl import programs
  from batchrl.agents.families import family
  from batchrl.train import fused
  from batchrl.train.build import build_env
  from batchrl.tune.batched import GroupPrograms, traced_config

  base = configs.apply_overrides(configs.get("cartpole_fused"), TINY)
  lrs = [1.3e-3, 2.7e-3]
  env = build_env(base.run)
  group = GroupPrograms(base, env)
  values = {"learning_rate": jnp.asarray(lrs, jnp.float32)}
  grouped = group.init(values, jax.random.key(base.run.seed))
  grouped, _ = group.chunk(values, grouped, jnp.int32(1), 1)
  mine = jax.tree.map(lambda x: x[0], grouped)  # the first trial's lane

  exp = configs.apply_overrides(base, [f"learning_rate={lrs[0]}"])
  make = family(exp.agent).make
  start = fused.init_sim(env, make(exp.config), jax.random.key(exp.run.seed))
  alone, _ = fused.make_run_chunk(env, make(exp.config))(start, 1)  # as LocalTrainer runs it
  for a, b in zip(_host_leaves(alone._replace(agent_state=())),
                  _host_leaves(mine._replace(agent_state=()))):
    np.testing.assert_array_equal(a, b)  # keys, env states, observations, returns
  for a, b in zip(_host_leaves(alone.agent_state), _host_leaves(mine.agent_state)):
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)

  def traced(lr, sim):
    agent = make(traced_config(exp.config, {"learning_rate": lr}))
    return fused.loop_iterations(fused.make_iteration(env, agent))(sim, jnp.int32(1), 1)[0]
  unbatched = programs.jit(traced, "loop")(jnp.float32(lrs[0]), start)
  for a, b in zip(_host_leaves(alone), _host_leaves(unbatched)):
    np.testing.assert_array_equal(a, b)


def test_each_score_line_of_a_batched_trial_names_its_trial(tmp_path, caplog):
  from batchrl.logging import RunLogger
  from batchrl.tune.batched import TrialLogger
  with caplog.at_level(logging.INFO, logger="batchrl"):
    with TrialLogger(3, tmp_path / "3", False) as trial, RunLogger(tmp_path / "x", False) as plain:
      trial.report(512, "train", {"mean_score": 21.5})
      trial.report(512, "eval", {"mean_score": 9.0, "episodes": 8})
      plain.report(512, "train", {"mean_score": 1.0})  # after it: no mark left behind
  assert caplog.messages == ["trial 3: Score 21.5 (train, step 512)",
                             "trial 3: Score 9 (eval, step 512)",
                             "Score 1 (train, step 512)"]


@pytest.mark.gymnax
@pytest.mark.slow
def test_a_stopped_group_stops_after_the_update_under_way(tmp_path):
  """``stop`` (the first Ctrl-C) ends a group of trials after its compiled call under way
  (the first is one update), not at the end of its train phase (here the whole budget):
  the group starts again on resume, so nothing is lost by not finishing it."""
  from batchrl.tune import search
  calls = []
  with pytest.raises(KeyboardInterrupt):
    search("cartpole_fused", SPACE, trials=2, logdir=tmp_path, timestamp="T",
           overrides=[*TINY, "report_every=2048", "eval_every=2048"], sampler="random",
           seed=0, pruner="none", tensorboard=False, batch_trials=2,
           stop=lambda: calls.append(1) or True)
  assert len(calls) == 1
  for n in (0, 1):  # stopped before the phase's report
    assert read_metrics(tmp_path / "T-cartpole_fused-tune" / "trials" / str(n)) == []
