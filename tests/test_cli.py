"""`batchrl train / visualize / configs` end to end on tiny budgets, and exact resume."""
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import types

import jax
import numpy as np
import pytest
import yaml

from batchrl import checkpoint, configs, experiment
from batchrl.cli import main
from batchrl.configclass import ConfigError
from batchrl.train import loop
from batchrl.train.local import LocalTrainer
from batchrl.train.trainer import Trainer

TINY = ["--set", "steps=4096", "--set", "report_every=1024", "--set", "eval_every=2048",
        "--set", "checkpoint_every=2048", "--set", "num_envs=8", "--set", "rollout_length=64",
        "--set", "update_epochs=1", "--set", "eval_steps=50", "--set", "batch_size=256",
        "--no-tensorboard"]


@pytest.fixture(scope="module")
def fused_run(tmp_path_factory):
  """One tiny fused CartPole run shared by the tests that only read it."""
  logdir = tmp_path_factory.mktemp("runs")
  code = main(["train", "--config", "cartpole_fused", "--logdir", str(logdir),
               "--timestamp", "T0", *TINY])
  assert code == 0
  return logdir / "T0-cartpole_fused"


def test_configs_lists_every_named_config(capsys):
  assert main(["configs"]) == 0
  out = capsys.readouterr().out
  for name in ("pendulum", "cartpole", "reacher", "cheetah", "walker", "hopper", "ant",
               "humanoid", "cartpole_fused", "pendulum_fused"):
    assert name in out
  assert main(["configs", "cheetah"]) == 0
  assert "HalfCheetah-v5" in capsys.readouterr().out


def test_configs_shows_whole_first_sentences_wrapped_and_headed_tables(capsys, monkeypatch):
  """A description is its docstring's whole first sentence (parentheses included), wrapped
  under its column at the terminal's width; the agents table has headers too."""
  monkeypatch.setenv("COLUMNS", "100")
  assert main(["configs"]) == 0
  out = capsys.readouterr().out
  assert max(map(len, out.splitlines())) <= 100
  width = max(len(name) for name in configs.names())  # the name column: the longest name
  pad = lambda text: text.ljust(width + 2)
  assert out.startswith(f"{pad('name')}description\n{pad('-' * width)}-----------\n"
                        f"{pad('pendulum')}Pendulum-v1, host envs; learns in minutes\n")
  indent = " " * (width + 2)
  wrapped = [line.strip() for line in out.split(pad("trpo_cartpole"), 1)[1].splitlines()[:3]]
  assert " ".join(wrapped) == (  # the whole first sentence, its lines under its column
      "TRPO on CartPole-v1, host envs stepped in this process (CartPole steps in microseconds: "
      "worker processes would cost more than they save; 9.5k steps/s here against 3.6k with 2 "
      "workers, measured in one session under load).")
  assert out.count(f"\n{indent}microseconds") + out.count(f"\n{indent}in microseconds") == 1
  assert ("\nagents (Agent.create, batchrl run -a):\n"
          "agent      family   description\n"
          "---------  -------  -----------\n"
          "ppo        ppo      Proximal policy optimization (clipped objective by default)\n"
          ) in out
  assert "ddqn       dqn      Double DQN (double_dqn forced)\n" in out


def test_top_level_help_lists_every_command_on_one_line(capsys, monkeypatch):
  """``batchrl --help`` opens with plain text (no reStructuredText) and one line for each
  command the parser has."""
  import argparse

  from batchrl import cli
  monkeypatch.setenv("COLUMNS", "80")
  with pytest.raises(SystemExit):
    main(["--help"])
  out = capsys.readouterr().out
  assert out.startswith(
      "usage: batchrl [-h] COMMAND ...\n\n"
      "Batched reinforcement learning on JAX.\n\n"
      "commands:\n"
      "  train      train a named config; the same command resumes it\n"
      "  configs    list the named configs and agents, or show one\n"
      "  plot       draw runs' learning curves into an image\n"
      "  visualize  record videos of a trained run's policy\n"
      "  export     write a run's policy to ONNX or StableHLO\n"
      "  tune       search a config's hyperparameters with Optuna\n"
      "  bench      train a benchmark suite and write its table\n"
      "  run        run an agent from JSON specs on a Gymnasium env\n\n"
      "batchrl COMMAND --help shows a command's options.\n")
  assert "``" not in out
  subparsers = next(a for a in cli._parser()._actions
                    if isinstance(a, argparse._SubParsersAction))
  assert set(subparsers.choices) == set(cli.COMMANDS)
  with pytest.raises(SystemExit):
    main(["tune", "--help"])
  assert capsys.readouterr().out.startswith("usage: batchrl tune [-h] --config CONFIG")


def test_unknown_config_and_key_are_clear_errors(tmp_path, capsys):
  assert main(["train", "--config", "cartpol", "--logdir", str(tmp_path)]) == 2
  # the closest configs, and where every config is listed (not all of them in one long line)
  assert capsys.readouterr().err == (
      "batchrl train: error: unknown config 'cartpol' (did you mean 'cartpole' or "
      "'ac_cartpole' or 'vpg_cartpole'?); every config, with its description: batchrl "
      "configs\n")
  assert main(["train", "--config", "cartpole", "--logdir", str(tmp_path),
               "--set", "learnin_rate=1"]) == 2
  # the closest keys, and where every key is shown (not all of them in one long line)
  assert capsys.readouterr().err == (
      "batchrl train: error: unknown config key 'learnin_rate' (did you mean "
      "'learning_rate'?); every key of 'cartpole', with its value and help: batchrl configs "
      "cartpole\n")
  assert main(["train", "--config", "cartpole", "--logdir", str(tmp_path),
               "--set", "ent_coef=1"]) == 2
  assert capsys.readouterr().err == (
      "batchrl train: error: unknown config key 'ent_coef' (did you mean 'entropy_coef' or "
      "'value_coef'?); every key of 'cartpole', with its value and help: batchrl configs "
      "cartpole\n")
  assert main(["train", "--config", "cartpole", "--logdir", str(tmp_path),
               "--set", "update_epochs=many"]) == 2
  assert "update_epochs" in capsys.readouterr().err and "int" in capsys.readouterr().err + "int"


# Runs the commands in a fresh interpreter and prints their exit codes and, for each of jax,
# flax and optax imported on the way, the chain of modules whose imports brought it in.
_NO_JAX = """
import builtins, json, sys
from batchrl.cli import main
HEAVY, chains, importers, real_import = ("jax", "flax", "optax"), {}, [], builtins.__import__
def traced(name, globals=None, *rest):
  importer, top = (globals or {}).get("__name__", "?"), name.partition(".")[0]
  if top in HEAVY and top not in sys.modules and top not in chains:
    chains[top] = " -> ".join([*importers, importer, name])
  importers.append(importer)
  try:
    return real_import(name, globals, *rest)
  finally:
    importers.pop()
builtins.__import__ = traced
codes = [main(argv) for argv in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "chains": chains}))
"""


def test_a_mistake_in_the_config_is_reported_before_jax_is_imported(tmp_path):
  """A wrong config name, config file, --set key or value, or `module:EnvId` module is an
  error at once, and `batchrl configs` lists and shows configs, without importing JAX, flax or
  optax (their import alone takes seconds): what reads configs is free of them."""
  train = ["train", "--logdir", str(tmp_path / "runs")]
  argvs = [[*train, "--config", "nope"],
           [*train, "--config", str(tmp_path / "missing.yaml")],
           [*train, "--config", "cartpole", "--set", "foo=1"],
           [*train, "--config", "cartpole", "--set", "steps=-5"],
           [*train, "--config", "cartpole", "--set", "ppo.learning_rate=abc"],
           [*train, "--config", "dqn_cartpole", "--set", "exploration=\"epsilon\""],
           [*train, "--config", "td3_pendulum", "--set", "actor_q=max"],
           [*train, "--config", "cartpole", "--set", "env=nope:X-v0"],
           ["configs"], ["configs", "sac_pendulum"]]
  done = subprocess.run([sys.executable, "-c", _NO_JAX, json.dumps(argvs)], cwd=tmp_path,
                        capture_output=True, text=True, timeout=60)
  assert done.returncode == 0, done.stderr
  result = json.loads(done.stdout.splitlines()[-1])
  assert result["codes"] == [2] * 8 + [0, 0], done.stderr
  assert result["chains"] == {}, "imported while checking configs: " + "; ".join(
      f"{heavy} by {chain}" for heavy, chain in result["chains"].items())
  assert not (tmp_path / "runs").exists()


@pytest.mark.gymnax
def test_train_writes_config_metrics_and_checkpoints(fused_run, caplog):
  saved = yaml.safe_load((fused_run / "config.yaml").read_text())
  assert saved["config"] == "cartpole_fused" and saved["run"]["steps"] == 4096
  records = [json.loads(line) for line in (fused_run / "metrics.jsonl").read_text().splitlines()]
  phases = [r["phase"] for r in records]
  assert phases.count("train") == 4 and phases.count("eval") == 2
  assert all(np.isfinite(r["policy_loss"]) for r in records if r["phase"] == "train")
  assert [c.step for c in checkpoint.list_checkpoints(fused_run / "checkpoints")] == [2048, 4096]


@pytest.mark.gymnax
def test_a_batch_size_that_does_not_divide_the_rollout_is_one_line(tmp_path, capsys):
  assert main(["train", "--config", "cartpole_fused", "--logdir", str(tmp_path), "--set",
               "num_envs=8", "--set", "rollout_length=64", "--set", "batch_size=1024",
               "--no-tensorboard"]) == 2
  err = capsys.readouterr().err.strip()
  errors = [line for line in err.splitlines() if "error" in line]
  assert len(errors) == 1 and "batch_size (1024) must divide the rollout" in errors[0]
  assert "Traceback" not in err
  assert not any(tmp_path.iterdir())  # the new run's directory is gone again


@pytest.mark.gymnax
def test_existing_run_resumes_and_refuses_config_changes(fused_run, tmp_path, capsys):
  run = tmp_path / "T0-cartpole_fused"
  shutil.copytree(fused_run, run)
  assert main(["train", "--config", "cartpole_fused", "--logdir", str(tmp_path),
               "--timestamp", "T0", "--set", "steps=8192"]) == 2
  assert "cannot be changed on resume" in capsys.readouterr().err
  assert main(["train", "--config", "cartpole_fused", "--logdir", str(tmp_path),
               "--timestamp", "T0", "--no-tensorboard"]) == 0  # already complete: no-op


@pytest.mark.gymnax
def test_resume_is_exact(tmp_path):
  """Train 2N == train N, stop, resume, train N (same seed, CPU)."""
  exp = configs.apply_overrides(configs.get("cartpole_fused"), [
      "num_envs=8", "rollout_length=32", "update_epochs=2", "steps=1024", "report_every=256",
      "batch_size=128"])
  straight = LocalTrainer(exp, tmp_path / "a")
  assert isinstance(straight, Trainer)  # the protocol the training loop drives
  straight.train_phase(4)
  straight.train_phase(4)

  first = LocalTrainer(exp, tmp_path / "b")
  first.train_phase(4)
  first.iteration = 4
  first.save()
  resumed = LocalTrainer(exp, tmp_path / "b")
  assert resumed.restore() and resumed.iteration == 4
  resumed.train_phase(4)
  for a, b in zip(jax.tree.leaves(straight.sim), jax.tree.leaves(resumed.sim)):
    if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
      a, b = jax.random.key_data(a), jax.random.key_data(b)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.gymnax
def test_run_checkpoints_leave_ppos_rollout_buffer_out_and_older_ones_still_load(tmp_path):
  exp = configs.apply_overrides(configs.get("cartpole_fused"), [
      "num_envs=8", "rollout_length=32", "update_epochs=1", "steps=1024", "report_every=256",
      "batch_size=128"])
  trainer = LocalTrainer(exp, tmp_path / "run")
  trainer.train_phase(2)
  trainer.iteration = 2
  trainer.save()
  (saved,) = checkpoint.list_checkpoints(tmp_path / "run" / "checkpoints")
  names = json.loads((saved.path / checkpoint.MANIFEST_FILE).read_text())["leaves"]
  assert not [n for n in names if ".buffer" in n] and [n for n in names if ".params" in n]
  # an older checkpoint, written with the buffer, restores into the same template
  checkpoint.save(tmp_path / "old", 64, trainer.sim)
  for directory in (tmp_path / "old", tmp_path / "run" / "checkpoints"):
    restored, _ = experiment.restore_sim(directory, trainer.sim, trainer.agent)
    for a, b in zip(jax.tree.leaves(restored.agent_state.params),
                    jax.tree.leaves(trainer.sim.agent_state.params)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert restored.agent_state.buffer.obs.shape == trainer.sim.agent_state.buffer.obs.shape


@pytest.mark.gymnax
def test_visualize_refuses_without_checkpoint_unless_allowed(tmp_path, capsys):
  exp = configs.apply_overrides(configs.get("cartpole_fused"), ["num_envs=8"])
  run_dir = tmp_path / "T-cartpole_fused"
  experiment.prepare_run(run_dir, exp, [])
  out = tmp_path / "videos"
  assert main(["visualize", str(run_dir), "--outdir", str(out)]) == 2
  assert "--allow-untrained" in capsys.readouterr().err
  assert main(["visualize", "--run", str(run_dir), "--outdir", str(out),
               "--allow-untrained"]) == 0
  assert json.loads((out / "episodes.json").read_text())["checkpoint"] == "untrained"


@pytest.mark.gymnax
@pytest.mark.slow
def test_visualize_writes_an_mp4_per_episode(fused_run, tmp_path):
  out = tmp_path / "videos"
  assert main(["visualize", str(fused_run), "--outdir", str(out),
               "--num-episodes", "2"]) == 0
  stats = json.loads((out / "episodes.json").read_text())
  assert stats["checkpoint"] == "step 4096" and len(stats["episodes"]) == 2
  for episode in stats["episodes"]:
    video = out / f"episode-{episode['index']:03d}.mp4"
    assert video.stat().st_size > 1000 and episode["length"] >= 1


@pytest.mark.slow
def test_host_backend_trains_through_worker_processes(tmp_path):
  code = main(["train", "--config", "pendulum", "--logdir", str(tmp_path), "--timestamp", "H",
               "--set", "num_envs=4", "--set", "num_workers=2", "--set", "steps=1600",
               "--set", "report_every=800", "--set", "eval_every=1600",
               "--set", "rollout_length=200", "--set", "update_epochs=1",
               "--set", "checkpoint_every=1600", "--set", "batch_size=null", "--no-tensorboard"])
  assert code == 0
  records = [json.loads(x)
             for x in (tmp_path / "H-pendulum" / "metrics.jsonl").read_text().split("\n") if x]
  assert records[-1]["phase"] == "eval" and -2000 < records[-1]["mean_score"] < 0


@pytest.mark.gymnax
def test_seeds_train_several_agents_in_one_program(tmp_path, capsys):
  args = ["train", "--config", "cartpole_fused", "--logdir", str(tmp_path), "--timestamp", "S",
          "--seeds", "2", *TINY[:2], "--set", "report_every=4096", *TINY[8:]]
  assert main(args) == 0
  last = json.loads((tmp_path / "S-cartpole_fused" / "metrics.jsonl").read_text().splitlines()[-1])
  assert last["phase"] == "eval" and {"seed0/mean_score", "seed1/mean_score"} <= set(last)
  assert main(["train", "--config", "pendulum", "--logdir", str(tmp_path), "--seeds", "2",
               "--set", "backend=envpool"]) == 2
  assert ("with gymnax environments or host ones (run.backend 'gymnax' or 'gymnasium'); "
          "'pendulum' uses backend 'envpool'") in capsys.readouterr().err
  assert [p.name for p in tmp_path.iterdir()] == ["S-cartpole_fused"]  # no orphan run dir


def test_overrides_take_agent_run_and_named_sections():
  base = configs.get("cartpole_fused")
  exp = configs.apply_overrides(base, ["agent.discount=0.9", "ppo.update_epochs=3",
                                       "run.seed=7", "num_envs=4"])
  assert (exp.config.discount, exp.config.update_epochs) == (0.9, 3)
  assert (exp.run.seed, exp.run.num_envs, exp.agent) == (7, 4, "ppo")
  with pytest.raises(ConfigError, match="unknown section 'dqn'"):
    configs.apply_overrides(base, ["dqn.discount=0.9"])
  with pytest.raises(ConfigError, match="did you mean 'discount'"):
    configs.apply_overrides(base, ["discont=0.9"])


def test_experiment_round_trips_through_its_dict():
  exp = configs.get("cartpole_fused")
  values = exp.to_dict()
  assert values["agent"] == "ppo" and "ppo" in values
  assert configs.Experiment.from_dict(values) == exp
  with pytest.raises(ConfigError, match="unknown agent 'nope'"):
    configs.Experiment.from_dict(dict(values, agent="nope"))
  with pytest.raises(ConfigError, match="takes a PPOConfig"):
    configs.Experiment("x", exp.run, exp.run)


def test_train_on_env_reporting_action_masks(tmp_path):
  """A Dict observation with an ``action_mask`` gets the 'auto' network and masked heads;
  the env raises if a masked action reaches it, and PPO learns the best allowed arm."""
  import mock_envs  # noqa: F401  (registers MaskedChoice-v0)
  exp = configs.apply_overrides(configs.get("cartpole"), [
      "env=MaskedChoice-v0", "num_envs=4", "num_workers=0", "steps=4000",
      "report_every=1000", "eval_every=2000", "checkpoint_every=4000", "rollout_length=50",
      "update_epochs=4", "batch_size=null", "max_length=10", "eval_steps=10",
      "normalize_ranges=false"])
  result = experiment.train(exp, tmp_path / "run", progress=False, use_tensorboard=False)
  best = 0.5 * 10 * (3 + 2) / 3  # arm 3 when allowed (odd steps), arm 2 otherwise
  assert result["mean_score"] > 0.9 * best


@pytest.mark.parametrize("argv, message", [
    (["train", "--config", "pendulum", "--set", "env=Foo-v9"], "unknown environment id"),
    pytest.param(["train", "--config", "cartpole_fused", "--set", "env=NoSuchThing-v0"],
                 "Unknown gymnax environment id", marks=pytest.mark.gymnax),
    (["train", "--config", "cartpole", "--set", "steps=abc"], "expects int"),
    (["train", "--config", "cartpol"], "unknown config 'cartpol'"),
    (["visualize", "--outdir", "videos"], "config.yaml not found"),
    # an agent given an env whose actions it cannot learn: the agent, the env and what fits
    (["train", "--config", "td3_pendulum", "--set", "env=CartPole-v1"],
     "agent 'td3' (config 'td3_pendulum') cannot train on 'CartPole-v1': td3 learns "
     "continuous (float) actions, but the action space Discrete(2)"),
    (["train", "--config", "dqn_cartpole", "--set", "env=Pendulum-v1"],
     "cannot train on 'Pendulum-v1': DQN picks discrete actions"),
])
def test_user_mistakes_are_one_line_and_leave_nothing(argv, message, tmp_path, capsys):
  logdir = tmp_path / "logs"
  argv = argv + (["--logdir", str(logdir)] if argv[0] == "train" else
                 ["--run", str(logdir / "no-run")])
  assert main(argv) == 2
  err = capsys.readouterr().err.strip()
  assert message in err and len(err.splitlines()) <= 3 and "Traceback" not in err
  assert not logdir.exists()


@pytest.mark.gymnax
def test_unwritable_logdir_is_a_user_error(tmp_path, capsys):
  blocker = tmp_path / "file"
  blocker.write_text("")
  assert main(["train", "--config", "cartpole_fused", "--logdir", str(blocker / "sub")]) == 2
  assert "cannot write the run directory" in capsys.readouterr().err


def test_user_error_during_training_removes_the_new_run(tmp_path, monkeypatch, capsys):
  from batchrl.errors import UserInputError

  def bad_train(*args, **kwargs):
    raise UserInputError("the environment rejected its action space")

  monkeypatch.setattr(loop, "run", bad_train)
  assert main(["train", "--config", "cartpole_fused", "--logdir", str(tmp_path)]) == 2
  assert list(tmp_path.iterdir()) == []


def test_a_run_that_ignores_ctrl_c_says_how_to_stop_it_as_it_starts(tmp_path, monkeypatch,
                                                                     caplog):
  """SIGINT ignored (a shell starts `batchrl train ... &` so): the start line says so and
  names the command that stops it with a checkpoint (SIGTERM is taken as a Ctrl-C); where
  Ctrl-C works, the line is as ever."""
  from batchrl import cli
  done = types.SimpleNamespace(iteration=1, plan={"total": 1})
  monkeypatch.setattr(cli, "_trainer", lambda *args: contextlib.nullcontext(done))
  monkeypatch.setattr(loop, "run", lambda trainer, **kwargs: {})
  argv = ["train", "--config", "cartpole", "--logdir", str(tmp_path), "--timestamp"]
  before = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    with caplog.at_level(logging.INFO, logger="batchrl"):
      assert main([*argv, "B"]) == 0
  finally:
    signal.signal(signal.SIGINT, before)
  assert (f"Starting run {tmp_path / 'B-cartpole'}. Ctrl-C is ignored in this process (a "
          f"background job): stop it with kill {os.getpid()}, which saves a checkpoint "
          "first.") in caplog.messages
  caplog.clear()
  with caplog.at_level(logging.INFO, logger="batchrl"):
    assert main([*argv, "F"]) == 0
  assert f"Starting run {tmp_path / 'F-cartpole'}" in caplog.messages


@pytest.mark.gymnax
def test_genuine_bugs_keep_their_traceback(tmp_path, monkeypatch):
  def broken(*args, **kwargs):
    raise ValueError("an internal shape bug")

  monkeypatch.setattr(loop, "run", broken)
  with pytest.raises(ValueError, match="internal shape bug"):
    main(["train", "--config", "cartpole_fused", "--logdir", str(tmp_path)])


def test_without_gymnax_a_fused_config_names_the_extra(tmp_path, capsys, monkeypatch):
  monkeypatch.setitem(sys.modules, "gymnax", None)  # import gymnax now raises ImportError
  assert main(["train", "--config", "cartpole_fused", "--logdir", str(tmp_path)]) == 2
  err = capsys.readouterr().err
  assert 'pip install "batchrl[gymnax]"' in err and "CartPole-v1" in err
  assert not list(tmp_path.iterdir())  # refused before a run directory was made


# --------------------------------------------------------------------------- RUN and --logdir
# --logdir is where runs go (train, tune); visualize, export and plot read a run: RUN or --run.

OLD_SPELLING = ("batchrl {}: warning: --logdir RUN is the old spelling here; give the run "
                "directory as RUN or --run RUN (--logdir is where train and tune put runs)")


@pytest.fixture
def called(monkeypatch):
  """The run each command was asked to read (the commands themselves are tested above)."""
  from batchrl import export_run, visualize
  runs = []
  monkeypatch.setattr(visualize, "visualize",
                      lambda run, outdir, **kw: runs.append(run) or {"episodes": []})
  monkeypatch.setattr(export_run, "export_run",
                      lambda run, out, **kw: runs.append(run) or (out, "step 1"))
  return runs


@pytest.mark.parametrize("command, rest", [("visualize", ["--outdir", "videos"]),
                                           ("export", ["--out", "policy.onnx"])])
def test_a_run_is_given_as_run_or_dash_dash_run_and_the_old_logdir_warns(command, rest, called,
                                                                           capsys):
  assert main([command, "runs/T0-cartpole", *rest]) == 0
  assert main([command, *rest, "--run", "runs/T1-cartpole"]) == 0
  assert capsys.readouterr().err == ""
  assert main([command, "--logdir", "runs/T2-cartpole", *rest]) == 0
  assert capsys.readouterr().err == OLD_SPELLING.format(command) + "\n"  # one line
  assert called == ["runs/T0-cartpole", "runs/T1-cartpole", "runs/T2-cartpole"]


@pytest.mark.parametrize("argv, message", [
    (["export", "--out", "p.onnx"],
     "give the run directory (LOGDIR/<T>-<config>) as RUN or --run RUN"),
    (["export", "a", "--run", "b", "--out", "p.onnx"],
     "give the run directory once, as RUN or --run RUN; got RUN 'a' and --run 'b'"),
    (["visualize", "a", "--logdir", "b", "--outdir", "v"],
     "give the run directory once, as RUN or --run RUN; got RUN 'a' and --logdir 'b'"),
    (["plot"], "give one or more runs: RUN... or --run RUN"),
    (["plot", "a", "--run", "b"], "give the runs either as RUN... or as --run RUN, not both"),
])
def test_no_run_or_two_spellings_of_it_are_usage_errors(argv, message, called, capsys):
  with pytest.raises(SystemExit) as exit:
    main(argv)
  assert exit.value.code == 2
  err = capsys.readouterr().err
  assert f"batchrl {argv[0]}: error: {message}" in err and err.startswith("usage: batchrl")
  assert called == []


def test_help_names_run_not_logdir(capsys):
  from batchrl import cli
  text = cli.__doc__
  assert "visualize RUN" in text and "export RUN" in text and "plot RUN..." in text
  assert "visualize --logdir" not in text and "export --logdir" not in text
  with pytest.raises(SystemExit):
    main(["--help"])
  assert "--logdir is always the directory that holds runs" in capsys.readouterr().out
  for command in ("visualize", "export", "plot"):
    with pytest.raises(SystemExit):
      main([command, "--help"])
    out = capsys.readouterr().out
    assert "--run RUN" in out and "LOGDIR/<T>-<config>" in out and "--logdir" not in out


def test_a_logdir_given_as_the_run_names_a_run_in_it(tmp_path, capsys):
  for stamp in ("T0", "T1"):
    (tmp_path / f"{stamp}-cartpole").mkdir()
    (tmp_path / f"{stamp}-cartpole" / "config.yaml").write_text("config: cartpole\n")
  assert main(["export", str(tmp_path), "--out", str(tmp_path / "p.onnx")]) == 2
  err = capsys.readouterr().err
  assert f"{tmp_path} holds runs (it is a LOGDIR); give one run directory, e.g. " \
         f"{tmp_path / 'T1-cartpole'}" in err
