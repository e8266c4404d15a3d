"""What users saved with an older batchrl still loads and acts as it did: a ``batchrl train``
run folder (``config.yaml`` and its checkpoint) and two ``Agent.save`` folders (a preset's
SAC, whose ``agent.json`` holds config fields, and a DQN made from TensorForce's keys).

The folders under ``tests/data/written_before/`` were written once by its ``write.py`` at an
older commit, with the deterministic actions each took on fixed states; they are never
rewritten. A renamed config key, named config or agent module that breaks them fails here.
"""
import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from batchrl import Agent
from batchrl.train.build import build_model
from batchrl.visualize import load_agent_state, load_experiment

DATA = Path(__file__).parent / "data" / "written_before"


def _copy(name: str, tmp_path: Path) -> tuple[Path, dict]:
  folder = shutil.copytree(DATA / name, tmp_path / name)
  return folder, json.loads((folder / "expected.json").read_text())


def test_a_run_folder_written_before_loads_and_acts_the_same(tmp_path):
  run_dir, expected = _copy("old-sac_pendulum_fused", tmp_path)
  exp = load_experiment(run_dir)
  assert (exp.name, exp.agent, exp.config.learning_rate) == ("sac_pendulum_fused", "sac", 1e-3)
  model = build_model(exp)
  state, source = load_agent_state(exp, run_dir, model, None, allow_untrained=False, seed=0)
  assert source == "step 256"
  action, _ = model.act(state, np.asarray(expected["states"], np.float32), jax.random.key(0),
                        True)
  np.testing.assert_allclose(np.asarray(action), expected["actions"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sac_preset_agent", "dqn_agent"])
def test_an_agent_saved_before_loads_and_acts_the_same(name, tmp_path):
  directory, expected = _copy(name, tmp_path)
  agent = Agent.load(directory)
  try:
    assert agent.spec["config"] == json.loads((directory / "agent.json").read_text())["config"]
    action = agent.act(np.asarray(expected["states"], np.float32), deterministic=True,
                       independent=True)
    np.testing.assert_allclose(np.asarray(action), expected["actions"], rtol=1e-5, atol=1e-6)
  finally:
    agent.close()
