"""What every agent must do, over the one family list (``batchrl.agents.families``): be
created from a spec dict or an environment id, act and observe across an update (``observe``
says when one ran), come back from ``save`` / ``Agent.load`` acting and going on exactly as
before, refuse a misspelt key naming the closest valid one, refuse out-of-range values naming
the key and the value, and, for each trainable family, have a fused named config (which
``tests/test_named_configs.py`` trains one iteration, as it does every named config). The rows
are in ``conftest.py``; one agent per row is shared by its tests."""
import json
import re

import numpy as np
import pytest

from batchrl import Agent, configs
from batchrl.agents import catalog, families
from batchrl.agents.family import AgentFamily
from batchrl.configclass import ConfigError, from_dict, override
from batchrl.envs.core import make
from batchrl.errors import UserInputError

from .conftest import (
  AGENTS,
  FUSED_CONFIGS,
  NETWORK,
  STEPS,
  probe_states,
  run_steps,
)


def _jsonable(value):
  """What an agent spec holds after its JSON round trip (tuples as lists)."""
  return json.loads(json.dumps(value))


def test_the_table_covers_every_agent_type():
  names = {case.name for case in AGENTS.values()}
  assert sorted(names) == families.api_names()
  assert {families.family_of_type(name).name for name in names} == {
      f.name for f in families.FAMILIES}


def test_the_catalog_and_the_families_list_the_same_entries():
  """``batchrl.agents.catalog`` (the entries, free of JAX, that configs read) and
  ``FAMILIES`` list the same families, each built from its folder's entry; a family left out
  of either list is named, and so is an agent name its entry does not list."""
  assert families.catalog_mismatch(families.FAMILIES, catalog.ENTRIES) is None
  assert [f.entry for f in families.FAMILIES] == list(catalog.ENTRIES)
  no_td3 = tuple(e for e in catalog.ENTRIES if e.name != "td3")
  assert "ENTRIES lacks td3: add its ENTRY" in families.catalog_mismatch(families.FAMILIES,
                                                                         no_td3)
  no_td3 = tuple(f for f in families.FAMILIES if f.name != "td3")
  assert "FAMILIES lacks td3: add its FAMILY" in families.catalog_mismatch(no_td3,
                                                                           catalog.ENTRIES)
  dqn = families.family("dqn")
  with pytest.raises(ValueError, match=r"builds the agents \['dqn'\]; its entry lists "
                     r"\['dqn', 'ddqn', 'dqn_nstep'\]"):
    AgentFamily(dqn.entry, api_types=dqn.api_types[:1], make=dqn.make)


def test_the_fused_configs_cover_every_family_with_a_gymnax_named_config():
  gymnax = {}
  for name in configs.names():
    exp = configs.get(name)
    if exp.run.backend == "gymnax":
      gymnax.setdefault(exp.agent, set()).add(name)
  assert set(FUSED_CONFIGS) == set(gymnax)
  for family, name in FUSED_CONFIGS.items():
    assert name in gymnax[family], (family, name)


# ---------------------------------------------------------------------- creating


def test_created_from_an_env_id_it_takes_the_env_specs(case, trained):
  """The name and keys given are the agent's; the environment gives its state and action
  specs and its episode limit."""
  agent, _ = trained
  assert agent.spec["type"] == case.name and agent.spec["config"] == _jsonable(case.keys)
  env = make(case.env)
  try:
    expected = env.states, env.actions, env.env.spec.max_episode_steps
  finally:
    env.close()
  assert (agent.states, agent.actions) == tuple(_jsonable(expected[:2]))
  assert agent.max_episode_timesteps == expected[2]


def test_created_from_a_spec_dict_it_is_the_same_agent(case, trained):
  """``Agent.create(agent={'type': name, **keys}, states=..., actions=...)`` builds the
  agent that the name, keys and environment id built, and it acts and observes."""
  agent, _ = trained
  same = Agent.create(agent=case.spec, states=agent.states, actions=agent.actions,
                      max_episode_timesteps=agent.max_episode_timesteps, network=NETWORK,
                      seed=0)
  assert same.spec == agent.spec
  assert run_steps(same, case.env, 3) == [False] * 3 and same.timesteps == 3


# ----------------------------------------------------------------- acting, updating


def test_act_and_observe_run_updates_and_observe_reports_them(case, trained):
  agent, reported = trained
  assert agent.timesteps == STEPS and len(reported) == STEPS
  if case.learns:
    assert agent.updates >= 1, f"{case.name}: no update in {STEPS} steps"
    assert sum(reported) == agent.updates
  else:
    assert agent.updates == 0 and not any(reported)


def test_save_then_load_acts_and_goes_on_exactly_as_before(case, trained, tmp_path):
  agent, _ = trained
  agent.save(tmp_path / case.name)
  loaded = Agent.load(tmp_path / case.name)
  assert loaded.spec == agent.spec
  assert (loaded.timesteps, loaded.episodes, loaded.updates) == (
      agent.timesteps, agent.episodes, agent.updates)
  probes = probe_states(case)
  np.testing.assert_array_equal(
      np.asarray(loaded.act(probes, independent=True, deterministic=True)),
      np.asarray(agent.act(probes, independent=True, deterministic=True)))
  for t in range(4):  # the same sampled actions and the same updates from there on
    state = probes[t]
    np.testing.assert_array_equal(np.asarray(loaded.act(state)), np.asarray(agent.act(state)))
    assert loaded.observe(1.0, terminal=t == 3) == agent.observe(1.0, terminal=t == 3)
  assert (loaded.timesteps, loaded.updates) == (agent.timesteps, agent.updates)


# ------------------------------------------------------------------------- errors


def test_a_misspelt_key_names_the_closest_valid_one(case):
  typo, closest = case.typo
  with pytest.raises(ConfigError, match=f"unknown key '{typo}'") as error:
    Agent.create(agent={"type": case.name, typo: 1}, environment=case.env)
  if closest is not None:
    assert f"(did you mean '{closest}'?)" in str(error.value)


OUT_OF_RANGE = [pytest.param(case.id, key, value, id=f"{case.id}-{key}")
                for case in AGENTS.values() for key, value in case.out_of_range]


@pytest.mark.parametrize("row, key, value", OUT_OF_RANGE)
def test_an_out_of_range_value_names_the_key_and_the_value(row, key, value):
  case = AGENTS[row]
  with pytest.raises(UserInputError) as error:
    Agent.create(agent={"type": case.name, **case.keys, key: value}, environment=case.env)
  message = str(error.value)
  assert key in message, message
  assert re.search(rf"(?<![\d.]){re.escape(str(value))}(\.0)?(?![\d])", message), message


@pytest.mark.parametrize("family", families.trainable())
def test_a_config_field_misspelt_or_out_of_range_is_named(family):
  """The named-config path (``--set``, run files): the family's config class."""
  config_class = families.family(family).config_class
  with pytest.raises(ConfigError, match="'discont'.*did you mean 'discount'"):
    from_dict(config_class, {"discont": 0.9})
  with pytest.raises(ConfigError, match="'discont'.*did you mean 'discount'"):
    override(config_class(), ["discont=0.9"])
  if hasattr(config_class, "replace"):  # offered by some config classes
    with pytest.raises(ConfigError, match="(?i)'discont'.*did you mean 'discount'"):
      config_class().replace(discont=0.9)
  with pytest.raises(UserInputError, match=r"discount must be in \[0, 1\], got 2"):
    override(config_class(), ["discount=2"])
