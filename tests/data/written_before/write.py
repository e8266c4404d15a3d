"""Writes the fixtures of ``tests/test_written_before.py``: a ``batchrl train`` run folder
and two saved agents, each with the deterministic actions it took on fixed states then.

They were written once, at commit 01ccdd5 (before the named configs moved into one module per
family and the agents' ``presets.py`` became ``recipes.py``), and are kept as written: the
test proves that what users saved with an older batchrl still loads and acts the same.
Run it again only to add fixtures of a new kind, into a new folder, never over these.

    PYTHONPATH=. python tests/data/written_before/write.py tests/data/written_before
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym
import jax
import numpy as np

from batchrl import Agent
from batchrl.cli import main
from batchrl.train.build import build_model
from batchrl.visualize import load_agent_state, load_experiment

# a fused SAC run: tiny networks and memory keep its checkpoint small
RUN_SETS = ["steps=256", "report_every=128", "eval_every=256", "checkpoint_every=256",
            "eval_steps=10", "actor_layers=[8]", "critic_layers=[8]", "memory_capacity=256",
            "first_update=64", "batch_size=16"]
PENDULUM_STATES = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.5], [-0.6, 0.8, -2.0], [0.8, -0.6, 4.0]]
CARTPOLE_STATES = [[0.0, 0.0, 0.0, 0.0], [0.1, -0.2, 0.05, 0.3], [-0.5, 1.0, -0.1, -1.0]]


def write_run(out: Path) -> None:
  main(["train", "--config", "sac_pendulum_fused", "--logdir", str(out), "--timestamp", "old",
        "--no-progress", "--no-tensorboard", *[a for s in RUN_SETS for a in ("--set", s)]])
  run_dir = out / "old-sac_pendulum_fused"
  exp = load_experiment(run_dir)
  model = build_model(exp)
  state, _ = load_agent_state(exp, run_dir, model, None, allow_untrained=False, seed=0)
  states = np.asarray(PENDULUM_STATES, np.float32)
  action, _ = model.act(state, states, jax.random.key(0), True)
  _expect(run_dir, states, action)


def write_agent(directory: Path, states: list, **create) -> None:
  agent = Agent.create(seed=0, **create)
  e = gym.make(create["environment"])
  obs, _ = e.reset(seed=0)
  for _ in range(96):
    obs, reward, terminated, truncated, _ = e.step(agent.act(obs))
    agent.observe(float(reward), terminal=1 if terminated else 2 if truncated else 0,
                  next_states=obs if truncated and not terminated else None)
    if terminated or truncated:
      obs, _ = e.reset()
  assert agent.updates > 0
  agent.save(directory)
  states = np.asarray(states, np.float32)
  action = agent.act(states, deterministic=True, independent=True)
  _expect(directory, states, action)


def _expect(directory: Path, states, action) -> None:
  (directory / "expected.json").write_text(json.dumps(
      {"states": np.asarray(states).tolist(), "actions": np.asarray(action).tolist()},
      indent=1) + "\n")


if __name__ == "__main__":
  out = Path(sys.argv[1])
  write_run(out)
  write_agent(out / "sac_preset_agent", PENDULUM_STATES, preset="sac_pendulum",
              environment="Pendulum-v1", actor_layers=[8], critic_layers=[8],
              first_update=32, memory_capacity=256, batch_size=16)
  write_agent(out / "dqn_agent", CARTPOLE_STATES, agent="dqn", environment="CartPole-v1",
              network=[{"type": "dense", "size": 8}], first_update=32, update_frequency=4,
              memory_capacity=256, batch_size=16, learning_rate=1e-3)
