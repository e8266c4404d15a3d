"""``Agent.create(preset=NAME)``: a named config's agent values in the object API, its update
schedule kept per transition for the agent's streams (``batchrl.presets``)."""
from __future__ import annotations

import numpy as np
import pytest

from batchrl import Agent, configs
from batchrl.configclass import ConfigError, to_dict
from batchrl.envs import make
from batchrl.presets import preset_config

CLASSIC = ("Pendulum-v1", "CartPole-v1")


def _classic_presets() -> list[str]:
  return [n for n in configs.names() if configs.REGISTRY.get(n).run.env in CLASSIC]


def test_with_the_runs_number_of_envs_a_preset_is_the_runs_config_exactly():
  """Streams = the named run's envs: the config ``batchrl train`` trains with, schedules
  fitted to its budget included."""
  for name in ("sac_pendulum", "dqn_cartpole", "pendulum", "pqn_cartpole_fused"):
    exp = configs.get(name)
    family, config = preset_config(name, {}, exp.run.num_envs)
    assert family == exp.agent
    assert config == to_dict(exp.config), name


def test_fewer_streams_keep_the_transitions_per_update_and_the_annealing_budget():
  sac = configs.get("sac_pendulum").config  # 4 envs, an update per store, 4 gradient steps
  _, one = preset_config("sac_pendulum", {}, 1)
  assert (one["update_frequency"], one["repeat_update"]) == (4, sac.repeat_update)
  assert one["actor_layers"] == [64, 64] and one["batch_size"] == sac.batch_size
  _, two = preset_config("sac_pendulum", {}, 2)
  assert two["update_frequency"] == 2

  ppo = configs.get("pendulum")  # 16 envs x 128 steps, learning rate annealed over the run
  _, one = preset_config("pendulum", {}, 1)
  assert one["rollout_length"] == 16 * 128
  assert one["total_updates"] == ppo.config.total_updates  # same updates over the budget
  assert one["batch_size"] == ppo.config.batch_size


def test_changes_are_config_fields_and_a_given_period_counts_this_agents_steps():
  _, config = preset_config("sac_pendulum", {"actor_layers": [32], "update_frequency": 2}, 1)
  assert config["actor_layers"] == [32]
  assert config["update_frequency"] == 2  # as given: steps of this agent's one stream


@pytest.mark.parametrize("call, message", [
    (dict(preset="sac_pendulm"), "unknown preset 'sac_pendulm' (did you mean 'sac_pendulum'?)"),
    (dict(preset="sac_pendulum", actor_layer=[64]), "(did you mean 'actor_layers'?)"),
    (dict(preset="sac_pendulum", optimizer="adam"), "field names (see `batchrl configs "
     "sac_pendulum`)"),
    (dict(preset="sac_pendulum", agent="td3"), "preset 'sac_pendulum' is a sac config"),
    (dict(preset="sac_pendulum", network=[{"type": "dense", "size": 8}]),
     "builds its own networks"),
    (dict(preset="sac_pendulum", parallel_interactions=3),
     "updates every 4 transitions (update_frequency=1 steps of 4 envs); "
     "parallel_interactions=3 does not divide it. Use one of 1, 2, 4"),
    (dict(preset="sac_pendulum", parallel_interactions=0), "positive int"),
])
def test_bad_preset_arguments_are_clear_errors(call, message):
  with pytest.raises(ConfigError, ) as info:
    Agent.create(environment="Pendulum-v1", **call)
  assert message in str(info.value)


@pytest.mark.parametrize("name", _classic_presets())
def test_every_classic_control_preset_builds_in_the_object_api(name):
  exp = configs.REGISTRY.get(name)
  agent = Agent.create(preset=name, environment=exp.run.env, seed=0)
  assert agent.spec["preset"] == name and agent.spec["type"] == exp.agent
  assert f"preset={name!r}" in agent.summary()


def test_a_preset_agent_acts_learns_saves_and_loads_the_same_values(tmp_path):
  agent = Agent.create(preset="sac_pendulum", environment="Pendulum-v1", seed=3,
                       first_update=64, batch_size=32)
  assert "actor: 4,546 parameters" in agent.summary()  # the preset's 2x64 actor
  env = make("Pendulum-v1")
  state = env.reset()
  for _ in range(80):
    state, terminal, reward = env.execute(agent.act(state))
    agent.observe(reward=reward, terminal=terminal)
  assert agent.updates > 0
  agent.save(tmp_path / "saved")
  loaded = Agent.load(tmp_path / "saved")
  assert loaded.spec == agent.spec
  probe = np.array([0.3, -0.2, 0.5], np.float32)
  np.testing.assert_allclose(loaded.act(probe, deterministic=True, independent=True),
                             agent.act(probe, deterministic=True, independent=True))


@pytest.mark.slow
def test_sac_pendulum_preset_learns_pendulum_through_act_and_observe(learning_seed):
  """10k steps as the quick-start loop writes them; the median of the last ten episodes,
  because a learned policy still fails a swing-up now and then (-1500, against -120 to
  -400 when it holds the pendulum up; -1100 to -1700 everywhere before learning). The
  environment is seeded: unseeded, its start states changed from run to run, and one CI run
  drew two such failures among its last five episodes at 9k steps (mean -730, median -354),
  which the mean of five this test used to take could not absorb. Seeded, seeds 0, 1, 2
  give medians -241, -128, -239 here."""
  agent = Agent.create(preset="sac_pendulum", environment="Pendulum-v1", seed=learning_seed)
  env = make("Pendulum-v1", seed=learning_seed)
  state, episode, returns = env.reset(), 0.0, []
  for _ in range(10_000):
    state, terminal, reward = env.execute(agent.act(state))
    agent.observe(reward=reward, terminal=terminal)
    episode += reward
    if terminal:
      returns.append(episode)
      state, episode = env.reset(), 0.0
  assert len(returns) == 50
  assert np.median(returns[-10:]) > -400, returns
