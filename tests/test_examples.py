"""The examples as a reader copies them: every spec under examples/configs loads through
Agent.create and spells each key as its agent's key table documents it;
examples/quickstart.py runs."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from batchrl import Agent
from batchrl.agent import runtime
from batchrl.agents import family
from test_cli_run import CONTINUOUS, NETWORK_STATES

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "examples" / "configs"
AGENT_SPECS = sorted(p.name for p in CONFIGS.glob("*.json")
                     if isinstance(json.loads(p.read_text()), dict)
                     and "type" in json.loads(p.read_text()))


def documented(module) -> set[str]:
  """The names the docstring of an agent's keys module writes as code (``name``): its key
  table, the reference of the keys Agent.create takes (its docstring points there)."""
  return set(re.findall(r"``([A-Za-z_][A-Za-z0-9_]*)``", module.__doc__ or ""))


@pytest.fixture
def created(monkeypatch):
  """Agent.create up to its runtime (spec read, keys turned into the agent's config, network
  built), leaving out initialising the parameters: that compiles, 10-20 s a spec on 2 cores,
  and reads no key. Returns the runtimes built and each alias resolved on the way: (name
  given, the group's key, its aliases, the keys module that resolved it)."""
  built, uses = [], []
  original = family.take_aliases

  def recording(module):
    def take_aliases(kwargs, target, aliases):
      uses.extend((name, target, aliases, module) for name in aliases if name in kwargs)
      return original(kwargs, target, aliases)
    return take_aliases

  # every agent's keys.py imported take_aliases by name: record it where it is called
  for module in list(sys.modules.values()):
    if getattr(module, "take_aliases", None) is original:
      monkeypatch.setattr(module, "take_aliases", recording(module))
  monkeypatch.setattr(Agent, "__init__",
                      lambda self, spec: built.append(runtime.build_runtime(spec)))
  return built, uses


def undocumented_aliases(uses) -> list[str]:
  """An alias given where the keys module's table documents the key it stands for."""
  return [f"{given!r} is an alias of {key!r}, the key {module.__name__} documents"
          for given, key, aliases, module in uses if key in documented(module)]


def _environment(name: str) -> str:
  return "Pendulum-v1" if name in CONTINUOUS else "CartPole-v1"


@pytest.mark.parametrize("name", AGENT_SPECS)
def test_agent_specs_load_and_use_the_documented_keys(name, created):
  built, uses = created
  spec = json.loads((CONFIGS / name).read_text())
  Agent.create(str(CONFIGS / name), environment=_environment(name), seed=0)
  (runtime_,) = built
  assert runtime_.spec["type"] == spec["type"] and runtime_.spec["config"] == {
      k: v for k, v in spec.items() if k != "type"}
  assert undocumented_aliases(uses) == [], f"examples/configs/{name}"


def test_the_check_finds_an_alias_used_for_a_documented_key(created, tmp_path):
  """What the test above catches: examples/configs/sac.json spelled target_update_weight;
  PPO's table documents TensorForce's names (epochs, optimization_steps), which pass."""
  _, uses = created
  spec = json.loads((CONFIGS / "sac.json").read_text())
  spec["target_update_weight"] = spec.pop("update_target_weight")
  path = tmp_path / "sac.json"
  path.write_text(json.dumps(spec))
  Agent.create(str(path), environment="Pendulum-v1", seed=0)
  assert undocumented_aliases(uses) == [
      "'target_update_weight' is an alias of 'update_target_weight', the key "
      "batchrl.agents.replay.keys documents"]
  uses.clear()
  Agent.create({"type": "ppo", "optimization_steps": 2}, environment="CartPole-v1", seed=0)
  assert [use[:2] for use in uses] == [("optimization_steps", "update_epochs")]
  assert undocumented_aliases(uses) == []


def test_every_example_spec_is_covered():
  network_specs = sorted(p.name for p in CONFIGS.glob("*.json") if p.name not in AGENT_SPECS)
  assert network_specs == sorted(NETWORK_STATES)


@pytest.mark.parametrize("name", sorted(NETWORK_STATES))
def test_network_specs_load_through_agent_create(name, created):
  built, _ = created
  Agent.create("ppo", states=NETWORK_STATES[name], actions=dict(type="int", num_values=3),
               network=str(CONFIGS / name), seed=0)
  (runtime_,) = built
  assert runtime_.spec["network"] == json.loads((CONFIGS / name).read_text())


@pytest.mark.slow  # 22-30 s on a shared 2-core machine: a fresh process imports JAX, compiles
def test_quickstart_runs_with_a_small_budget():
  """As a reader runs it, with its episode budget as the argument (3 episodes: no update,
  the whole script)."""
  done = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py"), "3"],
                        capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert done.returncode == 0, done.stderr
  last = done.stdout.strip().splitlines()[-1]
  assert re.fullmatch(r"Learning finished\. Total episodes: 3\. Average reward of last 100 "
                      r"episodes: \d+\.\d\.", last), done.stdout
