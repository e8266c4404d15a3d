"""``agent.export`` and ``batchrl export``: the file a user deploys acts as the agent does.

onnxruntime (or ``jax.export.deserialize``) runs the exported file alone, and its actions
equal ``agent.act(states, deterministic=True, independent=True)``: exactly for int and bool
actions, to 1e-4 for float ones.
"""
from __future__ import annotations

import dataclasses
import sys

import gymnasium as gym
import jax
import numpy as np
import pytest

from batchrl import Agent
from batchrl.agents import families
from batchrl.cli import main
from batchrl.errors import UserInputError
from batchrl.export_run import _wrapper_maps
from batchrl.train import fused
from batchrl.train.build import build_env, build_model, close_env, make_host_env
from batchrl.train.rundir import restore_sim
from batchrl.visualize import load_agent_state, load_experiment
from tests.agents.conftest import AGENTS, NETWORK, run_steps

ort = pytest.importorskip("onnxruntime")  # the `export` extra

# every family that trains (has a config class): a new agent is exported here without an edit
FAMILIES = tuple(families.trainable())
# Keys besides the contract table's, and act/observe steps before export, where the policy
# reads running statistics (observation normalization) that should move off their start.
EXTRA_KEYS = {"ppo": dict(normalize_observations=True),
              "tqc": dict(normalize_observations=True)}  # the actor-critic agents' (SimBa's)
STEPS = {"ppo": 12, "tqc": 12}
TINY_RUN = ["--set", "steps=2048", "--set", "report_every=1024", "--set", "eval_every=2048",
            "--set", "checkpoint_every=1024", "--set", "num_envs=8", "--set",
            "rollout_length=64", "--set", "update_epochs=1", "--set", "eval_steps=20",
            "--set", "batch_size=256", "--no-tensorboard", "--no-progress"]


def random_states(space: gym.Space, k: int = 64, seed: int = 0) -> np.ndarray:
  """``k`` float32 states of ``space``'s shape, spread past its usual range."""
  rng = np.random.default_rng(seed)
  return (2.0 * rng.normal(size=(k,) + space.shape)).astype(np.float32)


def run_onnx(path, inputs: dict) -> dict:
  session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
  names = [o.name for o in session.get_outputs()]
  return dict(zip(names, session.run(None, inputs)))


def assert_same_actions(got: np.ndarray, want: np.ndarray) -> None:
  want = np.asarray(want)
  assert got.shape == want.shape and got.dtype == want.dtype
  if want.dtype.kind == "f":
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
  else:
    np.testing.assert_array_equal(got, want)


_family_agents: dict = {}


def family_agent(name: str):
  """``(agent, observation space)`` of the contract table's ``name`` after its ``STEPS``,
  built once per module."""
  if name not in _family_agents:
    case = AGENTS[name]
    agent = Agent.create(case.name, environment=case.env, network=case.network, seed=0,
                         **case.keys, **EXTRA_KEYS.get(name, {}))
    run_steps(agent, case.env, STEPS.get(name, 0))
    _family_agents[name] = agent, gym.make(case.env).observation_space
  return _family_agents[name]


@pytest.mark.parametrize("name", FAMILIES)
def test_onnx_actions_equal_deterministic_independent_act_for_each_family(name, tmp_path):
  agent, space = family_agent(name)
  states = random_states(space)
  path = agent.export(tmp_path / "policy.onnx")
  out = run_onnx(path, {"states": states})
  assert list(out) == ["actions"]
  assert_same_actions(out["actions"], agent.act(states, deterministic=True, independent=True))


@pytest.fixture(scope="module")
def dict_agent():
  """Named states (float, int, bool, an action mask), named int/bool/float actions, a
  preprocessing stack with running statistics (moved by a few steps)."""
  states = dict(pos=dict(type="float", shape=(3,)), item=dict(type="int", num_values=5),
                flag=dict(type="bool", shape=(2,)), move_mask=dict(type="bool", shape=(4,)))
  actions = dict(move=dict(type="int", num_values=4), grip=dict(type="bool"),
                 force=dict(type="float", shape=(2,), min_value=-1.0, max_value=1.0))
  agent = Agent.create("ppo", states=states, actions=actions, seed=1, batch_size=16,
                       optimizer_batch_size=8,
                       network=dict(branches={k: "auto" for k in ("flag", "item", "pos")},
                                    combine="concat", layers=NETWORK),
                       preprocessing=dict(pos=[dict(type="running_standardize"),
                                               dict(type="clip", min_value=-3, max_value=3)]))
  for t in range(6):
    agent.act(dict_batch(1, seed=t))
    agent.observe(1.0, terminal=t == 3)
  return agent


def dict_batch(k: int, seed: int = 100) -> dict:
  rng = np.random.default_rng(seed)
  masks = rng.random((k, 4)) < 0.5
  masks[~masks.any(axis=1), 2] = True
  return dict(pos=(3.0 * rng.normal(size=(k, 3))).astype(np.float32),
              item=rng.integers(0, 5, k).astype(np.int32), flag=rng.random((k, 2)) < 0.5,
              move_mask=masks)


def test_dict_states_masks_and_preprocessing_are_inside_the_onnx_file(dict_agent, tmp_path):
  batch = dict_batch(256)
  out = run_onnx(dict_agent.export(tmp_path / "policy.onnx"), batch)
  want = dict_agent.act(batch, deterministic=True, independent=True)
  assert sorted(out) == ["actions/force", "actions/grip", "actions/move"]
  for name, value in want.items():
    assert_same_actions(out[f"actions/{name}"], value)
  assert batch["move_mask"][np.arange(256), out["actions/move"]].all()  # masks honoured
  assert np.abs(out["actions/force"]).max() <= 1.0  # the mode clipped to the bounds


def test_jax_export_round_trips_without_batchrl(dict_agent, tmp_path):
  batch = dict_batch(33)
  with open(dict_agent.export(tmp_path / "p.jax", "jax"), "rb") as f:
    exported = jax.export.deserialize(f.read())
  assert {"cpu", "cuda"} <= set(exported.platforms)
  got = exported.call(batch)
  want = dict_agent.act(batch, deterministic=True, independent=True)
  for name, value in want.items():
    assert_same_actions(np.asarray(got[name]), value)
  agent, space = family_agent("sac")  # a single unnamed state: one array in, one out
  states = random_states(space, k=5)
  path = agent.export(tmp_path / "single.jax", format="jax")
  single = jax.export.deserialize(open(path, "rb").read())
  assert_same_actions(np.asarray(single.call(states)),
                      agent.act(states, deterministic=True, independent=True))


@pytest.fixture(scope="module")
def fused_run(tmp_path_factory):
  """A tiny ``batchrl train`` run of cartpole_fused (checkpoints at 1024 and 2048)."""
  logdir = tmp_path_factory.mktemp("runs")
  assert main(["train", "--config", "cartpole_fused", "--logdir", str(logdir),
               "--timestamp", "T0", *TINY_RUN]) == 0
  return logdir / "T0-cartpole_fused"


def run_actions(run_dir, step, states):
  """The run's model's deterministic actions from its checkpoint at ``step``."""
  exp = load_experiment(run_dir)
  model = build_model(exp)
  path = run_dir / "checkpoints" / f"ckpt-{step:012d}"
  state, _ = load_agent_state(exp, run_dir, model, str(path), False, 0)
  return np.asarray(model.act(state, states, jax.random.key(0), True)[0])


@pytest.mark.gymnax
def test_batchrl_export_of_a_run_directory_acts_as_its_checkpoint(fused_run, tmp_path, capsys):
  states = random_states(gym.make("CartPole-v1").observation_space, k=128)
  out = tmp_path / "policy.onnx"
  assert main(["export", str(fused_run), "--out", str(out)]) == 0
  assert "step 2048" in capsys.readouterr().out
  assert_same_actions(run_onnx(out, {"states": states})["actions"],
                      run_actions(fused_run, 2048, states))
  older = tmp_path / "older.jax"
  assert main(["export", str(fused_run), "--out", str(older), "--checkpoint",
               "1024", "--format", "jax"]) == 0
  exported = jax.export.deserialize(older.read_bytes())
  assert_same_actions(np.asarray(exported.call(states)), run_actions(fused_run, 1024, states))


@pytest.mark.gymnax
@pytest.mark.parametrize("args, message", [
    (["{tmp}/missing"], "is not a directory"),
    (["{empty}"], "no checkpoint"),
    (["{run}", "--checkpoint", "7"], "steps there: 1024, 2048"),
    (["{run}", "--format", "tflite"], "unknown export format 'tflite'"),
])
def test_batchrl_export_refuses_bad_input_in_one_line(fused_run, tmp_path, capsys, args,
                                                      message):
  empty = tmp_path / "T1-cartpole_fused"
  empty.mkdir()
  (empty / "config.yaml").write_text((fused_run / "config.yaml").read_text())
  args = [a.format(tmp=tmp_path, empty=empty, run=fused_run) for a in args]
  assert main(["export", *args, "--out", str(tmp_path / "p.onnx")]) == 2
  err = capsys.readouterr().err
  assert message in err and len(err.strip().splitlines()) == 1, err
  assert not (tmp_path / "p.onnx").exists()


@pytest.fixture(scope="module")
def seeds_run(tmp_path_factory):
  """A tiny ``batchrl train --seeds 2`` run of pqn_cartpole_fused: two agents stacked in
  each checkpoint."""
  logdir = tmp_path_factory.mktemp("seeds")
  assert main(["train", "--config", "pqn_cartpole_fused", "--logdir", str(logdir),
               "--timestamp", "T0", "--seeds", "2", "--set", "steps=512", "--set",
               "report_every=512", "--set", "eval_every=512", "--set", "checkpoint_every=512",
               "--set", "num_envs=8", "--set", "rollout_length=16", "--set",
               "num_minibatches=2", "--set", "update_epochs=1", "--set", "eval_steps=20",
               "--set", "hidden_layers=[8]", "--no-tensorboard", "--no-progress"]) == 0
  return logdir / "T0-pqn_cartpole_fused"


@pytest.mark.gymnax
def test_a_run_of_several_seeds_exports_the_one_asked_for(seeds_run, tmp_path, capsys):
  """Each ``--seed-index`` exports that agent of the stack (its actions: the stacked
  state's lane, acted on by vmap); by default the first; an index out of range is one
  line naming the valid ones."""
  exp = load_experiment(seeds_run)
  model = build_model(exp)
  env = build_env(dataclasses.replace(exp.run, num_workers=0))
  template = fused.init_sim(env, model, jax.random.key(0), 2)
  close_env(env)
  stacked = restore_sim(seeds_run / "checkpoints", template, model)[0].agent_state
  states = random_states(gym.make("CartPole-v1").observation_space, k=128)
  lanes = np.asarray(jax.vmap(lambda s: model.act(s, states, jax.random.key(0), True)[0])(
      stacked))
  for index, args in ((0, []), (0, ["--seed-index", "0"]), (1, ["--seed-index", "1"])):
    out = tmp_path / f"policy{index}.onnx"
    assert main(["export", str(seeds_run), "--out", str(out), *args]) == 0
    assert f"seed index {index} of 2" in capsys.readouterr().out
    assert_same_actions(run_onnx(out, {"states": states})["actions"], lanes[index])
  assert main(["export", str(seeds_run), "--out", str(tmp_path / "p.onnx"),
               "--seed-index", "2"]) == 2
  err = capsys.readouterr().err.strip()
  assert err.endswith("--seed-index 2: this run trained 2 agents at once (--seeds 2); give "
                      "an index from 0 to 1.") and len(err.splitlines()) == 1, err


@pytest.mark.gymnax
def test_a_run_of_one_agent_refuses_a_seed_index_but_zero(fused_run, tmp_path, capsys):
  assert main(["export", str(fused_run), "--out", str(tmp_path / "p.onnx"),
               "--seed-index", "1"]) == 2
  assert ("--seed-index 1: this run trained one agent (it was not trained with --seeds K); "
          "leave --seed-index out.") in capsys.readouterr().err
  assert main(["export", str(fused_run), "--out", str(tmp_path / "p.onnx"),
               "--seed-index", "0"]) == 0


def test_onnx_export_without_the_extra_says_what_to_install(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "jax2onnx", None)  # import jax2onnx now raises
  agent, _ = family_agent("sac")
  with pytest.raises(UserInputError, match=r"pip install \"batchrl\[export\]\""):
    agent.export(tmp_path / "p.onnx")
  assert not (tmp_path / "p.onnx").exists()
  assert agent.export(tmp_path / "p.jax", format="jax")  # the jax format needs no extra


def test_agent_export_refuses_unknown_formats_and_recurrent_policies(tmp_path):
  agent = Agent.create("ppo", environment="CartPole-v1", network=[
      dict(type="lstm", size=8)], seed=0, batch_size=16, optimizer_batch_size=8)
  with pytest.raises(UserInputError, match="recurrent"):
    agent.export(tmp_path / "p.onnx")
  with pytest.raises(UserInputError, match="unknown export format"):
    agent.export(tmp_path / "p.tf", format="tf")


@pytest.mark.slow
def test_a_gymnasium_backend_run_exports_a_policy_for_the_raw_env(tmp_path):
  """The run learned behind RangeNormalize and ClipAction; its file takes the raw
  Pendulum's observations and returns the torque the raw Pendulum applies."""
  tiny = ["--set", "steps=256", "--set", "report_every=128", "--set", "eval_every=256",
          "--set", "checkpoint_every=256", "--set", "num_envs=2", "--set", "num_workers=0",
          "--set", "rollout_length=64", "--set", "batch_size=64", "--set", "update_epochs=1",
          "--set", "eval_steps=10", "--set", "policy_layers=[16]", "--set",
          "value_layers=[16]", "--no-tensorboard", "--no-progress"]
  assert main(["train", "--config", "pendulum", "--logdir", str(tmp_path), "--timestamp",
               "T0", *tiny]) == 0
  run_dir = tmp_path / "T0-pendulum"
  assert main(["export", str(run_dir), "--out", str(tmp_path / "p.onnx")]) == 0
  exp = load_experiment(run_dir)
  model = build_model(exp)
  state, _ = load_agent_state(exp, run_dir, model, None, False, 0)
  env = make_host_env("Pendulum-v1", exp.run.max_length, True)  # the run's stack
  for seed in range(4):
    wrapped, _ = env.reset(seed=seed)
    raw = env.unwrapped._get_obs().astype(np.float32)[None]
    action = np.asarray(model.act(state, wrapped[None], jax.random.key(0), True)[0])
    env.step(action[0])
    torque = run_onnx(tmp_path / "p.onnx", {"states": raw})["actions"]
    np.testing.assert_allclose(torque, [[env.unwrapped.last_u]], atol=1e-4)
  env.close()


def test_the_gymnasium_stack_maps_folded_into_a_run_export_match_its_wrappers():
  """A run on the gymnasium backend learns behind RangeNormalize and ClipAction; its file
  takes the raw env's observations and returns the action the raw env receives."""
  env = make_host_env("Pendulum-v1", None, True)
  obs_maps, action_maps, raw_space = _wrapper_maps(env)
  assert raw_space.shape == (3,) and len(obs_maps) == 1 and len(action_maps) == 2
  wrapped, _ = env.reset(seed=0)
  raw = env.unwrapped._get_obs().astype(np.float32)
  np.testing.assert_allclose(np.asarray(obs_maps[0](raw)), wrapped, atol=1e-6)
  for a in (-3.0, -0.5, 0.0, 0.25, 1.7):
    env.step(np.array([a], np.float32))
    mapped = np.float32([a])
    for fn in action_maps:
      mapped = fn(mapped)
    np.testing.assert_allclose(np.asarray(mapped), [env.unwrapped.last_u], atol=1e-6)
  env.close()
