"""The budget is the budget: ``steps`` trained exactly (whole updates), reports that scale
with the run, evaluations counted in episodes and never longer than the training before
them."""
import json
import logging
import math

import jax
import numpy as np
import pytest

from batchrl import configs
from batchrl.agents.families import family
from batchrl.cli import main
from batchrl.configclass import ConfigError
from batchrl.envs.jax_env import make_vec
from batchrl.measured import LONG_HOST_STEPS, LOOP_EVAL_STEPS
from batchrl.train import fused
from batchrl.train.build import (
  build_model,
  chunk_kind,
  eval_kind,
  planned_eval_steps,
)
from batchrl.train.local import LocalTrainer
from batchrl.train.schedule import budget_note, phase_length, schedule

ODD_BUDGETS = (12_345, 1_234_567)  # multiples of nothing a config uses


def _phases(plan):
  """The train phases' lengths the loop runs, in order."""
  lengths, done = [], 0
  while done < plan["total"]:
    lengths.append(phase_length(plan, done))
    done += lengths[-1]
  return lengths


@pytest.mark.parametrize("name", configs.names())
def test_every_named_config_trains_its_budget_exactly(name):
  for steps in ODD_BUDGETS:
    exp = configs.apply_overrides(configs.get(name), [f"steps={steps}"])
    per = exp.run.num_envs * build_model(exp).period
    plan = schedule(exp.run, per)
    trained = plan["total"] * per
    assert steps <= trained < steps + per  # at most one update's worth over
    lengths = _phases(plan)
    assert sum(lengths) == plan["total"]
    assert len(set(lengths[:-1])) <= 1 and lengths[-1] <= lengths[0]
    # reports scale with the run: at least min_reports of them (or one per update)
    assert len(lengths) >= min(exp.run.min_reports, plan["total"])
    # schedules that count updates count the updates that run
    if getattr(exp.config, "total_updates", None) is not None:
      assert exp.config.total_updates == plan["total"], name


@pytest.mark.parametrize("name", configs.names())
def test_named_configs_anneal_over_the_updates_they_run(name):
  exp = configs.get(name)
  fit = family(exp.agent).fit_schedules
  if fit is None or getattr(exp.config, "total_updates", None) is None:
    return
  per = exp.run.num_envs * build_model(exp).period
  assert exp.config.total_updates == schedule(exp.run, per)["total"]


def test_a_report_period_the_user_gives_is_kept():
  base = configs.get("cartpole_fused")
  kept = configs.apply_overrides(base, ["steps=100000", "report_every=50000"])
  assert kept.run.min_reports == 0
  assert schedule(kept.run, 4096)["report"] == math.ceil(50000 / 4096)
  scaled = configs.apply_overrides(base, ["steps=100000"])
  assert schedule(scaled.run, 4096)["report"] == math.ceil(100000 / 4096) // 10
  both = configs.apply_overrides(base, ["report_every=50000", "min_reports=3"])
  assert both.run.min_reports == 3


def test_budget_note_says_when_the_budget_is_rounded():
  run = configs.get("cartpole_fused").run
  assert budget_note(configs.RunConfig(steps=8192), 4096) is None
  note = budget_note(run.__class__(steps=10_000), 4096)
  assert "10,000" in note and "12,288" in note


@pytest.mark.parametrize("field, value", [("min_reports", -1), ("eval_episodes", 0),
                                          ("eval_steps", 0)])
def test_bad_cadence_values_are_config_errors(field, value):
  with pytest.raises(ConfigError, match=f"run.{field}"):
    configs.RunConfig(**{field: value})


TINY = ["--set", "num_envs=8", "--set", "rollout_length=64", "--set", "update_epochs=1",
        "--set", "batch_size=256", "--no-tensorboard", "--no-progress"]


def _records(run_dir):
  return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.gymnax
def test_a_run_trains_its_budget_and_reports_at_its_end(tmp_path, caplog):
  """3000 steps of 512-step updates: 6 updates (3072 steps), the config's 102,400-step
  periods clipped to the run, one report per update, the final evaluation capped by the
  training before it."""
  with caplog.at_level(logging.INFO, logger="batchrl"):
    assert main(["train", "--config", "cartpole_fused", "--logdir", str(tmp_path),
                 "--timestamp", "T", "--set", "steps=3000", *TINY]) == 0
  assert "training 3,072 steps" in caplog.text
  records = _records(tmp_path / "T-cartpole_fused")
  train = [r["step"] for r in records if r["phase"] == "train"]
  assert train == [512 * k for k in range(1, 7)]
  (final,) = [r for r in records if r["phase"] == "eval"]
  assert final["step"] == 3072 and final["eval_seconds"] > 0
  assert final["eval_steps"] <= 3072 / 8


@pytest.mark.gymnax
def test_the_last_shorter_phase_runs_in_the_same_program(tmp_path):
  """Phases of 3 updates, then 1: both in the program compiled for 3."""
  assert main(["train", "--config", "cartpole_fused", "--logdir", str(tmp_path),
               "--timestamp", "T", "--set", "steps=2048", "--set", "report_every=1536",
               *TINY]) == 0
  records = _records(tmp_path / "T-cartpole_fused")
  assert [r["step"] for r in records if r["phase"] == "train"] == [1536, 2048]


@pytest.fixture(scope="module")
def cartpole():
  """An untrained PPO agent on 4 gymnax CartPoles, and its evaluations."""
  exp = configs.apply_overrides(configs.get("cartpole_fused"), ["num_envs=4", "batch_size=256"])
  env = make_vec("CartPole-v1", 4)
  agent = build_model(exp)
  sim = fused.init_sim(env, agent, jax.random.key(0))
  evaluate = {episodes: jax.jit(fused.make_evaluate(env, agent, 500, episodes))
              for episodes in (None, 10)}
  return env, agent, sim, evaluate


class _Env:
  """What ``eval_kind`` reads of an env: its observation shape and episode limit."""

  def __init__(self, shape, limit=500):
    self.single_observation_space = type("Space", (), {"shape": shape})()
    self.max_episode_steps = limit


def test_planned_evaluation_steps_add_each_evaluations_cap():
  """Each evaluation may run as many steps per env as the training before it over the envs,
  within the episode limit: 90,112 steps on 32 envs, evaluated every 8,192: 256 steps
  for the first, 500 (the limit) for the other ten."""
  run = configs.RunConfig(env="CartPole-v1", num_envs=32, steps=90_112, eval_every=8_192)
  assert planned_eval_steps(run, _Env((4,))) == 256 + 10 * 500
  only_final = configs.RunConfig(env="CartPole-v1", num_envs=32, steps=90_112, eval_every=0)
  assert planned_eval_steps(only_final, _Env((4,))) == 500
  capped = configs.RunConfig(env="CartPole-v1", num_envs=32, steps=90_112, eval_every=8_192,
                             eval_steps=20)
  assert planned_eval_steps(capped, _Env((4,))) == 11 * 20


def test_long_evaluations_and_image_policies_compile_optimized():
  long = configs.RunConfig(env="CartPole-v1", num_envs=32, steps=90_112, eval_every=8_192)
  short = configs.RunConfig(env="CartPole-v1", num_envs=4, steps=2_000, eval_every=1_000)
  assert planned_eval_steps(short, _Env((4,))) < LOOP_EVAL_STEPS
  assert eval_kind(_Env((4,)), long) == "loop"
  assert eval_kind(_Env((4,)), short) == "once"
  assert eval_kind(_Env((10, 10, 4)), short) == "loop"  # a conv policy: always optimized


def test_long_host_runs_compile_their_chunk_for_speed():
  """Fused runs and short host runs keep the faster compile; long host runs the faster
  program."""
  host = configs.RunConfig(env="HalfCheetah-v5", backend="gymnasium", steps=LONG_HOST_STEPS)
  assert chunk_kind(host) == "long"
  assert chunk_kind(configs.RunConfig(env="HalfCheetah-v5", steps=LONG_HOST_STEPS - 1)) == "loop"
  assert chunk_kind(configs.RunConfig(env="CartPole-v1", backend="gymnax",
                                      steps=10 * LONG_HOST_STEPS)) == "loop"


@pytest.mark.gymnax
def test_evaluation_counts_the_first_episode_of_each_env(cartpole):
  env, agent, sim, evaluate = cartpole
  stats = jax.device_get(evaluate[None](sim))
  assert stats["episodes"] == 4
  # the same as averaging the first finished episode of each env over a fixed rollout
  start = jax.jit(lambda s: fused._end_episodes(agent, s))
  restarted = fused.restart(env, sim)
  restarted = restarted._replace(agent_state=start(restarted))
  _, rollout = jax.jit(lambda s: fused.simulate(env, agent, s, 500, mode="track",
                                                deterministic=True))(restarted)
  expected = jax.device_get(fused.first_episode_stats(rollout))
  np.testing.assert_allclose(stats["mean_score"], expected["mean_score"], rtol=1e-6)
  np.testing.assert_allclose(stats["mean_length"], expected["mean_length"], rtol=1e-6)
  # and it stops once they finished, not at the cap
  assert stats["eval_steps"] == int(np.max(np.argmax(rollout.done, axis=0))) + 1 < 500


@pytest.mark.gymnax
def test_evaluation_plays_its_episodes_spread_over_the_envs(cartpole):
  *_, sim, evaluate = cartpole
  stats = jax.device_get(evaluate[10](sim))
  assert stats["episodes"] == 10  # 3, 3, 2, 2 over the 4 envs
  assert np.isfinite(stats["mean_score"]) and stats["mean_score"] == stats["mean_length"]


@pytest.mark.gymnax
def test_evaluation_stops_at_its_cap_and_scores_the_episodes_it_cut(cartpole):
  """No episode finishes in 3 steps: each env's running one counts as cut there (CartPole
  pays 1 a step: score 3, length 3), not NaN."""
  *_, sim, evaluate = cartpole
  stats = jax.device_get(evaluate[10](sim, 3))
  assert stats["eval_steps"] == 3 and stats["episodes"] == 0 and stats["cut_episodes"] == 4
  assert stats["mean_score"] == 3.0 and stats["mean_length"] == 3.0
  full = jax.device_get(evaluate[None](sim))
  assert full["cut_episodes"] == 0 and full["episodes"] == 4


@pytest.mark.gymnax
def test_evaluation_shares_must_be_positive(cartpole):
  env, agent, *_ = cartpole
  with pytest.raises(ValueError, match="episodes"):
    fused.make_evaluate(env, agent, 500, 0)


def test_a_host_run_tells_its_progress_between_reports(tmp_path):
  """The progress bar moves while a phase runs: the compiled chunk of a host-env run reports
  iterations done (a gymnax run's does not: its program stays in the persistent cache)."""
  exp = configs.apply_overrides(configs.get("cartpole"), [
      "num_envs=2", "num_workers=0", "rollout_length=16", "update_epochs=1",
      "batch_size=32", "steps=256"])
  trainer = LocalTrainer(exp, tmp_path / "run")
  try:
    heard = []
    trainer.train_phase(3, progress=heard.append)
    jax.effects_barrier()
    assert heard == [1, 2, 3]
    trainer.train_phase(2)  # no listener: nothing heard
    jax.effects_barrier()
    assert heard == [1, 2, 3]
  finally:
    trainer.close()


@pytest.mark.gymnax
def test_calls_of_any_count_compile_nothing_after_the_first(cartpole, caplog):
  """A chunk program of length 3 runs 3, 2 and 1 iterations: the infos come back as NumPy
  arrays of that many rows, and no call after the first compiles anything (cutting the
  rows on the device compiled a slice program for every new count)."""
  env, agent, sim, _ = cartpole
  chunk = fused.make_run_chunk(env, agent)
  sim, infos = chunk(sim, 3, 3)
  with jax.log_compiles():
    caplog.clear()
    for count in (2, 1):
      sim, infos = chunk(sim, count, 3)
      assert all(isinstance(x, np.ndarray) and x.shape[0] == count
                 for x in jax.tree.leaves(infos))
  assert not [r for r in caplog.records if "Compiling" in r.getMessage()]


@pytest.mark.gymnax
def test_chunks_call_on_iteration_as_iterations_finish(cartpole):
  env, agent, sim, _ = cartpole
  heard = []
  chunk = fused.make_run_chunk(env, agent, on_iteration=heard.append)
  chunk(sim, 2, 3)
  jax.effects_barrier()
  assert [int(x) for x in heard] == [1, 2]
