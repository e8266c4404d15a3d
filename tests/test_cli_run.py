"""`batchrl run` (TensorForce's openai_gym.py as a command) and the example configs."""
from __future__ import annotations

import glob
import json
import os
import re

import gymnasium as gym
import numpy as np
import pytest

from batchrl.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "examples", "configs")
PPO = os.path.join(CONFIGS, "ppo.json")
MLP2 = os.path.join(CONFIGS, "mlp2_network.json")
MEAN_LINE = re.compile(r"Mean reward of the last (\d+) episodes: (-?[\d.]+) \((\d+) episodes, "
                       r"(\d+) timesteps\)")

# Which environment (or states) each network config is for.
NETWORK_STATES = {
    "mlp2_network.json": dict(type="float", shape=(4,)),
    "mlp2_64_network.json": dict(type="float", shape=(4,)),
    "cnn_dqn_network.json": dict(type="float", shape=(84, 84, 3)),
    "minatar_conv_network.json": dict(type="float", shape=(10, 10, 4)),  # MinAtar frames
    "nature_cnn.json": dict(type="float", shape=(84, 84, 4)),  # Atari: 4 grayscale frames
    "multi_input_network.json": dict(image=dict(type="float", shape=(16, 16, 3)),
                                     position=dict(type="float", shape=(3,)),
                                     inventory=dict(type="int", shape=(4,), num_values=5)),
}
AGENT_CONFIGS = ("ppo.json", "ppo_cartpole.json")  # PPO's TensorForce keys
OTHER_AGENT_CONFIGS = ("vpg.json", "trpo.json", "a2c.json", "ac.json", "dqn.json", "ddqn.json",
                       "dqfd.json", "naf.json", "ddpg.json", "td3.json", "sac.json",
                       "sac_discrete.json")
# run on Pendulum-v1, the others on CartPole-v1
CONTINUOUS = {"naf.json", "ddpg.json", "td3.json", "sac.json"}


def _env_for(name: str) -> str:
  return "Pendulum-v1" if name in CONTINUOUS else "CartPole-v1"


def _config_files() -> list[str]:
  return sorted(os.path.basename(p) for p in glob.glob(os.path.join(CONFIGS, "*.json")))


def test_every_config_is_listed_here():
  assert _config_files() == sorted(set(NETWORK_STATES) | set(AGENT_CONFIGS)
                                  | set(OTHER_AGENT_CONFIGS))


@pytest.mark.parametrize("name", sorted(NETWORK_STATES))
def test_network_configs_validate_for_their_states(name):
  from batchrl.networks.layered import input_specs_from_space, plan_network
  from batchrl.specs import to_space
  with open(os.path.join(CONFIGS, name)) as f:
    spec = json.load(f)
  plan = plan_network(spec, input_specs_from_space(to_space(NETWORK_STATES[name])))
  assert plan is not None


@pytest.mark.parametrize("name", AGENT_CONFIGS)
def test_agent_configs_resolve_to_ppo_settings(name):
  from batchrl.agents.family import BuildContext
  from batchrl.agents.ppo.keys import ppo_config
  with open(os.path.join(CONFIGS, name)) as f:
    spec = json.load(f)
  config = ppo_config(spec, BuildContext(num_streams=1, network="auto",
                                         action_space=gym.spaces.Discrete(2)))
  expected = dict(learning_rate=(spec.get("learning_rate") or
                                 spec["step_optimizer"]["learning_rate"]),
                  update_epochs=spec.get("epochs") or spec.get("optimization_steps"),
                  rollout_length=spec["batch_size"], batch_size=spec["optimizer_batch_size"])
  assert {key: getattr(config, key) for key in expected} == expected


@pytest.mark.parametrize("name", AGENT_CONFIGS + OTHER_AGENT_CONFIGS)
def test_run_takes_every_agent_config_with_a_network_file(name, tmp_path, capsys):
  """Every agent config file runs (as TensorForce's openai_gym.py took an agent and a network
  file), saves and names its type; CartPole or Pendulum for 256 timesteps."""
  save = tmp_path / "agent"
  assert main(["run", _env_for(name), "-a", os.path.join(CONFIGS, name), "-n", MLP2,
               "--timesteps", "256", "--max-episode-timesteps", "50", "--seed", "0", "--save",
               str(save), "--no-progress"]) == 0
  assert MEAN_LINE.search(capsys.readouterr().out)
  saved_type = json.loads((save / "agent.json").read_text())["type"]
  with open(os.path.join(CONFIGS, name)) as f:
    spec_type = json.load(f)["type"].removesuffix("_agent")
  assert saved_type.removesuffix("_agent") == spec_type and name.startswith(spec_type)


def test_run_trains_prints_the_mean_saves_and_loads(tmp_path, capsys):
  save = tmp_path / "agent"
  assert main(["run", "CartPole-v1", "-a", PPO, "-n", MLP2, "--timesteps", "300", "--seed", "0",
               "--save", str(save), "--no-progress"]) == 0
  out = capsys.readouterr().out
  match = MEAN_LINE.search(out)
  assert match, out
  shown, mean, episodes, timesteps = match.groups()
  assert int(timesteps) == 300 and int(shown) == min(int(episodes), 100) > 0
  assert 8 <= float(mean) <= 300  # CartPole pays 1 per step
  assert (save / "agent.json").exists() and "Saved the agent to" in out
  assert main(["run", "CartPole-v1", "--load", str(save), "--episodes", "2",
               "--deterministic", "--no-progress"]) == 0
  match = MEAN_LINE.search(capsys.readouterr().out)
  assert match and match.group(1) == "2" and match.group(3) == "2"


def _write(tmp_path, name: str, text: str) -> str:
  path = tmp_path / name
  path.write_text(text)
  return str(path)


@pytest.mark.parametrize("case", ["bad_json", "missing", "bad_key", "bad_layer", "unknown_env",
                                  "agent_and_load", "no_agent", "no_limit", "bad_parallel"])
def test_errors_are_one_line_and_exit_2(case, tmp_path, capsys):
  bad_json = _write(tmp_path, "bad.json", '{"type": "ppo",\n "batch_size": }\n')
  bad_key = _write(tmp_path, "key.json", '{"type": "ppo", "batch_sise": 10}')
  bad_layer = _write(tmp_path, "net.json", '[{"type": "dens", "size": 32}]')
  args, expected = {
      "bad_json": (["-a", bad_json, "--episodes", "1"], r"bad\.json.*not valid JSON.*line 2"),
      "missing": (["-a", str(tmp_path / "nope.json"), "--episodes", "1"], "does not exist"),
      "bad_key": (["-a", bad_key, "--episodes", "1"], "did you mean 'batch_size'"),
      "bad_layer": (["-a", PPO, "-n", bad_layer, "--episodes", "1"], "did you mean 'dense'"),
      "unknown_env": (["-a", PPO, "--episodes", "1"], "unknown environment id 'CartPol-v1'"),
      "agent_and_load": (["-a", PPO, "--load", str(tmp_path), "--episodes", "1"],
                         "leave out -a"),
      "no_agent": (["--episodes", "1"], "give the agent spec with -a"),
      "no_limit": (["-a", PPO], "--episodes N and/or --timesteps N"),
      "bad_parallel": (["-a", PPO, "--episodes", "1", "--num-parallel", "3"],
                       "multiple of parallel_interactions"),
  }[case]
  env_id = "CartPol-v1" if case == "unknown_env" else "CartPole-v1"
  assert main(["run", env_id, *args, "--no-progress"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("batchrl run: error: "), err
  assert re.search(expected, err, re.IGNORECASE), err


# ---------------------------------------------------------------------------------------
# Every network config file, with the agent acting and updating (slow: one compile each).

SMALL_PPO = dict(batch_size=16, optimizer_batch_size=8, epochs=1)


def _states_sample(spec: dict, rng):
  if "type" not in spec:
    return {name: _states_sample(sub, rng) for name, sub in spec.items()}
  if spec["type"] == "int":
    return rng.integers(0, spec["num_values"], spec["shape"])
  return rng.normal(size=spec["shape"]).astype(np.float32)


@pytest.mark.parametrize("name", sorted(NETWORK_STATES))
def test_network_configs_act_and_update(name):
  from batchrl import Agent
  states = NETWORK_STATES[name]
  agent = Agent.create("ppo", states=states, actions=dict(type="int", num_values=3),
                       network=os.path.join(CONFIGS, name), seed=0, **SMALL_PPO)
  rng = np.random.default_rng(0)
  for t in range(SMALL_PPO["batch_size"] + 1):
    action = agent.act(_states_sample(states, rng))
    assert action in (0, 1, 2)
    agent.observe(reward=1.0, terminal=2 if t % 5 == 4 else 0)
  assert agent.updates == 1


# ---------------------------------------------------------------------------------------
# As the user meets them: the command in a subprocess.

def _batchrl(*args: str, cwd=None):
  import subprocess
  import sys
  return subprocess.run([sys.executable, "-m", "batchrl", *args], capture_output=True,
                        text=True, cwd=cwd, timeout=600)


def test_a_run_that_ends_before_its_first_update_says_so():
  """ppo_cartpole.json updates every 4096 timesteps; 20 episodes are a few hundred."""
  done = _batchrl("run", "CartPole-v1", "-a", os.path.join(CONFIGS, "ppo_cartpole.json"),
                  "--episodes", "20", "--seed", "0", "--no-progress")
  assert done.returncode == 0, done.stderr
  last = done.stdout.strip().splitlines()[-1]
  assert last.startswith("No update ran") and "every 4096 timesteps" in last, done.stdout
  assert "--timesteps 4096" in last


@pytest.mark.parametrize("text, expected", [
    ('{"type": "ppo", "learnin_rate": 1e-3}', "did you mean 'learning_rate'"),
    ('{"type": "ppo", "learning_rate": "fast"}', "learning_rate.*expects float"),
    ('{"type": "pp"}', "unknown agent type 'pp'"),
    ('{"learning_rate": 1e-3}', "needs 'type'"),
])
def test_json_spec_errors_name_the_file_in_one_line(text, expected, tmp_path):
  path = _write(tmp_path, "my_agent.json", text)
  done = _batchrl("run", "CartPole-v1", "-a", path, "--episodes", "1", "--no-progress")
  assert done.returncode == 2, done.stderr
  err = done.stderr.strip()
  assert len(err.splitlines()) == 1 and "Traceback" not in err, err
  assert err.startswith(f"batchrl run: error: agent spec file {path!r}: "), err
  assert re.search(expected, err, re.IGNORECASE), err
