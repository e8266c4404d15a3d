"""benchmarks/parity.py's bookkeeping: which runs are done, the command that resumes a run
and the table from finished runs (the runs themselves are benchmarks, not tests)."""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "peers"))
import parity
import sbx_train  # the peer's script (its imports of sbx / SB3 are inside its functions)
from batchrl import cli, configs


@pytest.fixture
def args(tmp_path):
  return SimpleNamespace(algos=["sac"], envs=["Hopper-v5"], seeds=[0, 1],
                         libraries=["batchrl", "sbx"], steps=100_000, eval_every=10_000,
                         episodes=5, results=str(tmp_path))


def test_the_batchrl_command_is_a_valid_train_command_that_resumes_by_its_timestamp(args):
  cmd = parity.ours_command("sac", "Hopper-v5", 1, args)
  assert cmd[1:4] == ["-m", "batchrl", "train"]
  parsed = cli._parser().parse_args(cmd[3:])
  assert parsed.config == "sac_mujoco" and parsed.timestamp == "sac-Hopper-v5-s1"
  assert "env=Hopper-v5" in parsed.overrides and "eval_steps=5000" in parsed.overrides
  # named as batchrl train names it: the env added where it is not the config's own
  assert parity.ours_dir("sac", "Hopper-v5", 1, args).endswith(
      "batchrl/sac-Hopper-v5-s1-sac_mujoco-Hopper-v5")
  assert parity.ours_dir("sac", "HalfCheetah-v5", 1, args).endswith(
      "batchrl/sac-HalfCheetah-v5-s1-sac_mujoco")
  # a run an earlier release named by the config alone is found, as its command resumes it
  legacy = os.path.join(args.results, "batchrl", "sac-Hopper-v5-s1-sac_mujoco")
  os.makedirs(legacy)
  with open(os.path.join(legacy, "config.yaml"), "w") as f:
    f.write("run:\n  env: Hopper-v5\n")
  assert parity.ours_dir("sac", "Hopper-v5", 1, args) == legacy


def test_evaluations_are_read_from_the_run_metrics(tmp_path):
  rows = [{"phase": "train", "step": 5000, "mean_score": 1.0},
          {"phase": "eval", "step": 10000, "mean_score": 250.5},
          {"phase": "eval", "step": 20000, "mean_score": 300.0}]
  (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  assert parity.ours_evals(str(tmp_path)) == [(10000, 250.5), (20000, 300.0)]
  assert parity.ours_evals(str(tmp_path / "missing")) == []


def test_the_table_shows_finished_seeds_means_and_the_ratio_and_pending_runs(args):
  for library, seed, best in [("batchrl", 0, 900.0), ("batchrl", 1, 1100.0),
                              ("sbx", 0, 1250.0)]:
    parity.write_result(parity.result_path(library, "sac", "Hopper-v5", seed, args),
                        {"best_return": best, "final_return": best - 100})
  assert parity.load_result("sbx", "sac", "Hopper-v5", 1, args) is None
  rows = parity.summary_rows(args)
  assert rows[2] == "| sac | Hopper-v5 | batchrl | 2/2 | 900, 1100 | 1000 |  | 900 |  |"
  assert rows[3] == "| sac | Hopper-v5 | sbx | 1/2 | 1250 | 1250 |  | 1150 | 0.80 |"
  assert list(parity.jobs(args))[:2] == [("batchrl", "sac", "Hopper-v5", 0),
                                         ("sbx", "sac", "Hopper-v5", 0)]


def test_the_paper_variant_of_sbx_runs_td3_only_with_its_option_in_its_own_folder(args):
  args.algos, args.libraries = ["sac", "td3"], ["batchrl", "sbx", "sbx-paper"]
  assert [job[:2] for job in parity.jobs(args) if job[3] == 0] == [
      ("batchrl", "sac"), ("sbx", "sac"), ("batchrl", "td3"), ("sbx", "td3"),
      ("sbx-paper", "td3")]
  cmd = parity.peer_command("sbx-paper", "td3", "Walker2d-v5", 2, args)
  assert cmd[cmd.index("--library") + 1] == "sbx" and "--paper-td3" in cmd
  assert cmd[-1].endswith("sbx-paper-td3-Walker2d-v5-s2")
  assert "--paper-td3" not in parity.peer_command("sbx", "td3", "Walker2d-v5", 2, args)
  # the peer starts as our named config does: TD3 uniformly for 25k steps, SAC with its policy
  assert "--uniform-start" in cmd and "--uniform-start" not in parity.peer_command(
      "sbx", "sac", "Walker2d-v5", 2, args)
  rows = parity.summary_rows(args)
  assert not any("| sac |" in row and "sbx-paper" in row for row in rows)
  assert any(row.startswith("| td3 | Hopper-v5 | sbx-paper | 0/2 | pending") for row in rows)


def test_our_td3_with_sbx_choices_runs_as_a_train_command_with_its_overrides_apart(args):
  args.algos, args.libraries = ["sac", "td3"], ["batchrl", "sbx", "batchrl-sbx"]
  assert [job[:2] for job in parity.jobs(args) if job[3] == 0] == [
      ("batchrl", "sac"), ("sbx", "sac"), ("batchrl", "td3"), ("sbx", "td3"),
      ("batchrl-sbx", "td3")]
  cmd = parity.ours_command("td3", "Hopper-v5", 1, args, "batchrl-sbx")
  parsed = cli._parser().parse_args(cmd[3:])
  assert parsed.config == "td3_mujoco" and parsed.timestamp == "sbx-td3-Hopper-v5-s1"
  assert {"actor_q=min", "targets_with_actor=false", "env=Hopper-v5"} <= set(parsed.overrides)
  assert "actor_q=min" not in parity.ours_command("td3", "Hopper-v5", 1, args)
  assert parity.ours_dir("td3", "Hopper-v5", 1, args, "batchrl-sbx").endswith(
      "batchrl/sbx-td3-Hopper-v5-s1-td3_mujoco-Hopper-v5")
  # the variant is ours: no ratio against our own plain config, and sbx's ratio is ours/sbx
  for library, best in [("batchrl", 400.0), ("sbx", 500.0), ("batchrl-sbx", 450.0)]:
    parity.write_result(parity.result_path(library, "td3", "Hopper-v5", 0, args),
                        {"best_return": best, "final_return": best})
  rows = [row for row in parity.summary_rows(args) if row.startswith("| td3 |")]
  assert rows[1].endswith("| 0.80 |") and rows[2].endswith("| 450 |  | 450 |  |")


def test_our_actors_with_sbx_s_log_std_head_run_apart(args):
  args.algos, args.libraries = ["td3", "tqc"], ["batchrl", "batchrl-clip"]
  assert [job[:2] for job in parity.jobs(args) if job[3] == 0] == [
      ("batchrl", "td3"), ("batchrl", "tqc"), ("batchrl-clip", "tqc")]
  cmd = parity.ours_command("tqc", "Hopper-v5", 0, args, "batchrl-clip")
  parsed = cli._parser().parse_args(cmd[3:])
  assert parsed.config == "tqc_mujoco" and parsed.timestamp == "clip-tqc-Hopper-v5-s0"
  assert "log_std_head=clip" in parsed.overrides


def test_sbx_with_our_log_std_head_runs_sac_and_tqc_with_its_option_apart(args):
  args.algos, args.libraries = ["td3", "tqc"], ["sbx", "sbx-tanh"]
  assert [job[:2] for job in parity.jobs(args) if job[3] == 0] == [
      ("sbx", "td3"), ("sbx", "tqc"), ("sbx-tanh", "tqc")]
  cmd = parity.peer_command("sbx-tanh", "tqc", "Hopper-v5", 1, args)
  assert cmd[cmd.index("--library") + 1] == "sbx" and "--batchrl-head" in cmd
  assert cmd[-1].endswith("sbx-tanh-tqc-Hopper-v5-s1")
  assert "--batchrl-head" not in parity.peer_command("sbx", "tqc", "Hopper-v5", 1, args)


def test_a_run_s_time_adds_up_its_reports_over_every_sitting(tmp_path):
  """A resumed run: its last sitting trained 20k steps of 100k, its reports time all 100k."""
  rows = [{"phase": "train", "step": 40_000, "steps_per_second": 100.0},
          {"phase": "eval", "step": 40_000, "mean_score": 1.0},
          {"phase": "train", "step": 80_000, "steps_per_second": 50.0},
          {"phase": "train", "step": 100_000, "steps_per_second": 40.0}]
  (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  assert parity.ours_seconds(str(tmp_path)) == pytest.approx(400 + 800 + 500)


def test_sbx_s_temperature_is_the_exponential_of_its_one_parameter_and_none_without_it():
  applied = []

  def apply_fn(variables):
    applied.append(variables)
    return math.exp(variables["params"]["log_ent_coef"])

  state = SimpleNamespace(apply_fn=apply_fn, params={"log_ent_coef": math.log(0.25)})
  assert sbx_train.temperature(SimpleNamespace(ent_coef_state=state)) == pytest.approx(0.25)
  assert applied == [{"params": {"log_ent_coef": math.log(0.25)}}]
  assert sbx_train.temperature(SimpleNamespace()) is None  # TD3 learns no temperature


def test_the_best_counts_only_evaluations_after_learning_starts(args):
  """TD3 learns from 25k on: an untrained Ant standing still at 10k-20k is not TD3's best."""
  args.algos, args.envs, args.seeds = ["td3"], ["Ant-v5"], [0]
  assert parity.learning_starts("td3") == 25_000 and parity.learning_starts("sac") == 5_000
  evals = [(10_000, 838.0), (20_000, 857.0), (30_000, 349.0), (40_000, 379.0),
           (50_000, 218.0)]
  result = {"evals": evals, "best_return": 857.0, "final_return": 218.0}
  assert parity.best_learned(result, "td3") == 379.0
  assert parity.best_learned(result, "sac") == 857.0
  assert parity.best_learned({"best_return": 5.0}, "td3") == 5.0
  parity.write_result(parity.result_path("batchrl", "td3", "Ant-v5", 0, args), result)
  # mean after start: (349 + 379 + 218) / 3
  assert parity.mean_learned([result], "td3") == "315"
  assert parity.mean_learned([result, {"best_return": 5.0}], "td3") == ""
  assert (parity.summary_rows(args)[2]
          == "| td3 | Ant-v5 | batchrl | 1/1 | 379 | 379 | 315 | 218 |  |")


@pytest.mark.parametrize("algo", parity.ALGOS)
def test_the_peers_values_are_our_mujoco_configs(algo):
  """``sbx_train.py`` trains sbx's SAC/TD3/TQC/CrossQ (or SB3's, sb3-contrib's) with the values of
  our ``{algo}_mujoco``: a config changed without its peer, or the reverse, would compare
  different settings side by side. Adam's epsilon (1e-8), no gradient clipping and the
  target entropy -|A| are the peers' defaults, so ours must be them too."""
  config = configs.get(f"{algo}_mujoco").config
  peer = sbx_train.settings(algo)
  assert peer["learning_rate"] == config.learning_rate == config.critic_learning_rate
  assert (peer["batch_size"], peer["gamma"], peer["buffer_size"]) == (
      config.batch_size, config.discount, config.memory_capacity)
  # CrossQ has no target networks (its config refuses a tau other than the default)
  assert peer.get("tau", config.update_target_weight) == config.update_target_weight
  assert ("tau" in peer) == (algo != "crossq")
  assert (peer["train_freq"], peer["gradient_steps"]) == (
      config.update_frequency, config.repeat_update) == (1, 1)
  assert config.target_update_frequency == 1
  assert peer["learning_starts"] == config.first_update
  # the peer's uniform start (--uniform-start) lasts until learning starts, as ours
  assert config.start_steps in (0, config.first_update)
  assert parity.starts_uniform(algo) == (config.start_steps > 0)
  if algo == "crossq":  # sbx's CrossQ: a 2x256 actor and 1024x1024 critics
    assert peer["net_arch"] == {"pi": list(config.actor_layers), "qf": list(config.critic_layers)}
    assert (peer["policy_delay"], config.adam_beta1) == (config.policy_delay, 0.5)
  else:
    assert tuple(peer["net_arch"]) == config.actor_layers == config.critic_layers
  assert config.activation == "relu" and config.network is None
  assert config.adam_epsilon == 1e-8 and config.max_grad_norm is None
  if algo in ("sac", "tqc", "crossq"):
    assert peer["ent_coef"] == f"auto_{config.initial_alpha}"
    assert config.alpha_learning_rate == peer["learning_rate"]
    assert config.target_entropy is None and "target_entropy" not in peer  # both -|A|
  if algo == "td3":
    assert (peer["policy_delay"], peer["target_policy_noise"], peer["target_noise_clip"]) == (
        config.policy_delay, config.target_noise, config.target_noise_clip)
    assert json.loads(config.exploration) == {"type": "gaussian",
                                              "sigma": peer["action_noise"]}
  else:
    assert peer["action_noise"] is None
  if algo == "tqc":
    assert (peer["n_critics"], peer["n_quantiles"], peer["top_quantiles_to_drop_per_net"]) == (
        config.num_critics, config.num_quantiles, config.drop_quantiles)


def test_tqc_runs_our_tqc_mujoco_beside_sbx_tqc_starting_from_the_policy(args):
  args.algos, args.libraries = ["tqc"], ["batchrl", "sbx", "sb3"]
  assert [job[0] for job in parity.jobs(args) if job[3] == 0] == ["batchrl", "sbx", "sb3"]
  parsed = cli._parser().parse_args(parity.ours_command("tqc", "Hopper-v5", 0, args)[3:])
  assert parsed.config == "tqc_mujoco" and parsed.timestamp == "tqc-Hopper-v5-s0"
  cmd = parity.peer_command("sbx", "tqc", "Hopper-v5", 0, args)
  assert cmd[cmd.index("--algo") + 1] == "tqc" and "--uniform-start" not in cmd
  assert parity.learning_starts("tqc") == 5_000
  assert sbx_train.distribution("sb3", "tqc") == "sb3-contrib"
  assert sbx_train.distribution("sb3", "sac") == "stable-baselines3"
