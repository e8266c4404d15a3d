"""What every agent must do, over the one family list (``batchrl.agents.catalog.FOLDERS``):
be created from a spec dict or an environment id, act and observe across an update
(``observe`` says when one ran), come back from ``save`` / ``Agent.load`` acting and going on
exactly as before, refuse a misspelt key naming the closest valid one, refuse out-of-range
values naming the key and the value, and, for each trainable family, have named configs in its
module of ``batchrl/configs``, one of them fused (``tests/test_named_configs.py`` trains every
named config one iteration). The rows are in ``conftest.py``; one agent per row is shared by
its tests."""
import dataclasses
import importlib
import json
import pkgutil
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
  STEPS,
  probe_states,
  run_steps,
)


def _jsonable(value):
  """What an agent spec holds after its JSON round trip (tuples as lists)."""
  return json.loads(json.dumps(value))


def test_the_table_covers_every_agent_type():
  names = {case.name for case in AGENTS.values()}
  missing = [name for name in families.api_names() if name not in names]
  assert not missing, f"tests/agents/conftest.py has no row for {', '.join(missing)}"
  assert sorted(names) == families.api_names()
  assert {families.family_of_type(name).name for name in names} == {
      f.name for f in families.FAMILIES}


def test_the_families_and_their_named_configs_come_from_the_one_list():
  """``catalog.FOLDERS`` is the one list of families: the catalog's entries are its folders'
  ``ENTRY``, ``FAMILIES`` their ``FAMILY``, and the named configs each trainable family's
  module of ``batchrl/configs``, all in its order."""
  assert [e.name for e in catalog.ENTRIES] == list(catalog.FOLDERS)
  assert [f.entry for f in families.FAMILIES] == list(catalog.ENTRIES)
  by_family: dict[str, list[str]] = {}
  for name in configs.names():
    by_family.setdefault(configs.get(name).agent, []).append(name)
  assert list(by_family) == [name for name in catalog.FOLDERS if name in catalog.trainable()]
  for family, names in by_family.items():
    assert names == list(configs.family_configs(family)), f"batchrl/configs/{family}.py"


def test_a_module_of_named_configs_is_named_for_its_family():
  """Named configs in a module that is no family's would never be registered."""
  for found in pkgutil.iter_modules(configs.__path__):
    if hasattr(importlib.import_module(f"batchrl.configs.{found.name}"), "NAMED"):
      assert found.name in catalog.trainable(), (
          f"batchrl/configs/{found.name}.py holds NAMED, but no family is called "
          f"{found.name!r}: move each named config to its family's module")


def test_a_folder_or_module_that_is_not_what_the_list_says_is_named():
  with pytest.raises(TypeError, match=r"batchrl/agents/replay/__init__.py must define ENTRY"):
    catalog.folder_entry("replay")  # a shared home, not an agent
  stale = dataclasses.replace(catalog.folder_entry("td3"))
  with pytest.raises(TypeError, match=r"batchrl/agents/td3/family.py must define FAMILY, the "
                     r"AgentFamily built from batchrl.agents.td3.ENTRY"):
    families.folder_family(stale)
  with pytest.raises(TypeError, match=r"batchrl/configs/actor_critic.py must define NAMED"):
    configs.family_configs("actor_critic")
  dqn = families.family("dqn")
  with pytest.raises(ValueError, match=r"builds the agents \['dqn'\]; its entry lists "
                     r"\['dqn', 'ddqn', 'dqn_nstep'\]"):
    AgentFamily(dqn.entry, api_types=dqn.api_types[:1], make=dqn.make)


def test_every_trainable_family_has_a_fused_named_config():
  """One compiled program per family at least (``tests/test_named_configs.py`` trains every
  named config one iteration)."""
  fused = {configs.get(name).agent for name in configs.names()
           if configs.get(name).run.backend == "gymnax"}
  missing = [name for name in families.trainable() if name not in fused]
  assert not missing, (f"no fused (gymnax) named config for {', '.join(missing)}: add one to "
                       "batchrl/configs/<family>.py")


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
                      max_episode_timesteps=agent.max_episode_timesteps, network=case.network,
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
