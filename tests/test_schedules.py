"""``--set`` of the budget re-derives the schedules that count updates: the learning rate
reaches 0 at the run's last update, never goes below it, and is never left at full rate."""
from __future__ import annotations

import gymnasium as gym
import jax.numpy as jnp
import pytest

from batchrl import configs
from batchrl.agents.ppo import model as ppo_model
from batchrl.agents.spaces import space_info
from batchrl.configs.run import RunConfig
from batchrl.specs import EnvSpec


def _updates(exp) -> int:
  return exp.run.iterations(exp.config.rollout_length * exp.run.num_envs)


@pytest.mark.parametrize("items", [["steps=20000"], ["num_envs=8"], ["steps=20000",
                                                                     "num_envs=4"],
                                   ["rollout_length=64"], ["report_every=50000"]])
def test_changing_the_budget_refits_total_updates_to_the_run(items):
  exp = configs.apply_overrides(configs.get("pendulum"), items)
  assert exp.config.total_updates == _updates(exp)


def test_an_explicit_total_updates_wins_and_an_unchanged_budget_keeps_the_config():
  named = configs.get("pendulum")
  assert configs.apply_overrides(named, ["seed=3"]).config == named.config
  exp = configs.apply_overrides(named, ["steps=20000", "total_updates=7"])
  assert exp.config.total_updates == 7


def test_a_constant_rate_stays_constant():
  exp = configs.apply_overrides(configs.get("pendulum"), ["total_updates=null",
                                                          "steps=20000"])
  assert exp.config.total_updates is None
  vpg = configs.apply_overrides(configs.get("vpg_cartpole"), ["steps=50000"])
  assert vpg.config.total_updates is None


def test_vpg_anneals_over_the_run_too():
  exp = configs.get("vpg_cartpole_fused")
  exp = configs.apply_overrides(exp, ["total_updates=10", "steps=40000"])
  assert exp.config.total_updates == 10  # given in the same --set: it wins
  refit = configs.apply_overrides(exp, ["steps=80000"])
  assert refit.config.total_updates == _updates(refit)


def test_learning_rate_reaches_zero_at_the_last_update_and_never_below():
  exp = configs.apply_overrides(configs.get("pendulum"), ["steps=20000"])
  config, total = exp.config, exp.config.total_updates
  info = space_info(EnvSpec(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (1,)),
                            exp.run.num_envs), "flat")
  schedule = ppo_model._learning_rate_schedule(config, info)
  per_update = config.update_epochs * ppo_model._num_minibatches(config, info)
  rates = [float(schedule(jnp.int32(n * per_update))) for n in range(total + 3)]
  assert rates[0] == pytest.approx(config.learning_rate)
  assert rates[total] == 0.0 and min(rates) == 0.0
  assert 0.0 < rates[total - 1] < config.learning_rate / (total - 1) * 1.01


def test_run_iterations_are_the_budget_in_whole_updates():
  run = RunConfig(steps=10_000, report_every=3_000, num_envs=4, min_reports=0)
  assert run.report_iterations(1000) == 3
  assert run.iterations(1000) == 10  # phases of 3, 3, 3, then 1
  assert run.iterations(3000) == 4  # 12,000 steps: the budget rounded up to whole updates
  assert RunConfig(steps=10_000, report_every=3_000).report_iterations(1000) == 1
