"""DDPG, TD3 and SAC as ``batchrl train`` runs them: the named configs (the fused Pendulum
ones, the MuJoCo named configs with the published values), the host stack's action bounds (no
``action_bounds`` needed), exact resume from a checkpoint whose replay memory is full, and
``--seeds`` (runs vmapped in one program). Tiny networks and memories: each program compiles
in seconds."""
import json

import gymnasium as gym
import jax
import numpy as np
import pytest

from batchrl import Agent, configs, experiment
from batchrl.agents.replay import updates as replay
from batchrl.cli import main
from batchrl.train.local import LocalTrainer
from conftest import leaves

# 4 envs, 8-unit networks, a 32-transition memory (8 rows of 4 envs), learning from step 16
TINY = ["actor_layers=[8]", "critic_layers=[8]", "batch_size=8", "memory_capacity=32",
        "first_update=16", "num_envs=4", "repeat_update=1", "eval_steps=20"]


def tiny(name: str, *sets: str):
  return configs.apply_overrides(configs.get(name), [*TINY, *sets])


# ----------------------------------------------------------------------- named configs


def test_mujoco_configs_hold_the_published_values():
  sac, td3 = configs.get("sac_mujoco"), configs.get("td3_mujoco")
  for exp in (sac, td3):
    c = exp.config
    assert (exp.run.env, exp.run.backend, exp.run.num_envs, exp.run.steps) == (
        "HalfCheetah-v5", "gymnasium", 1, 1_000_000)
    assert (c.learning_rate, c.critic_learning_rate, c.batch_size, c.update_target_weight,
            c.discount, c.memory_capacity) == (3e-4, 3e-4, 256, 0.005, 0.99, 1_000_000)
    assert c.actor_layers == c.critic_layers == (256, 256) and c.activation == "relu"
    assert (c.update_frequency, c.repeat_update) == (1, 1)  # one gradient step per env step
    assert c.action_bounds is None  # the host stack reports its bounds
  assert sac.config.first_update == 5_000 and td3.config.first_update == 25_000
  assert (sac.config.target_entropy, sac.config.alpha_learning_rate) == (None, 3e-4)
  c = td3.config
  assert (c.target_noise, c.target_noise_clip, c.policy_delay) == (0.2, 0.5, 2)
  assert json.loads(c.exploration) == {"type": "gaussian", "sigma": 0.1}
  hopper = configs.apply_overrides(sac, ["env=Hopper-v5"])
  assert hopper.run.env == "Hopper-v5" and hopper.config == sac.config


@pytest.mark.parametrize("name", ["sac_mujoco", "td3_mujoco"])
def test_mujoco_config_trains_on_another_task_with_set_env(name, tmp_path):
  """``--set env=Hopper-v5``: the networks take Hopper's 11 observations and 3 actions."""
  exp = configs.apply_overrides(configs.get(name), [
      "env=Hopper-v5", "memory_capacity=64", "batch_size=8", "first_update=8",
      "eval_steps=10", "report_every=16"])
  trainer = LocalTrainer(exp, tmp_path)
  try:
    metrics = trainer.train_phase(16)
    assert metrics["learning"] > 0 and np.isfinite(metrics["critic_loss"])
    assert "mean_score" in trainer.eval_phase()
    params = trainer.sim.agent_state.params.actor
    shapes = sorted(x.shape for x in jax.tree.leaves(params))
    assert (11, 256) in shapes and (256, 3) in shapes
  finally:
    trainer.close()


# ------------------------------------------------------------------------ action bounds


def test_host_stack_reports_bounds_so_no_action_bounds_are_needed():
  env = experiment.make_host_env("Pendulum-v1", None, True)
  assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
  env.close()
  for name in ("ddpg_pendulum", "td3_pendulum", "sac_pendulum"):
    assert configs.get(name).config.action_bounds is None
  agent = Agent.create(agent="sac", environment="Pendulum-v1", seed=0)
  actions = np.stack([agent.act(np.zeros(3, np.float32), independent=True)
                      for _ in range(20)])
  assert actions.shape == (20, 1) and np.all(np.abs(actions) <= 2.0)  # Pendulum's +-2


def test_explicit_action_bounds_still_serve_unbounded_actions():
  agent = Agent.create(agent="sac", states=dict(type="float", shape=(3,)),
                       actions=dict(type="float", shape=(1,)), action_bounds=(-0.5, 0.5),
                       seed=0)
  actions = np.stack([agent.act(np.zeros(3, np.float32), independent=True)
                      for _ in range(20)])
  assert np.all(np.abs(actions) <= 0.5)


# ------------------------------------------------------------------------ exact resume


@pytest.mark.gymnax
@pytest.mark.parametrize("name", ["td3_pendulum_fused", "sac_pendulum_fused"])
def test_resume_with_a_full_replay_memory_is_exact(name, tmp_path):
  """Train 2N == train N, checkpoint (the memory full and wrapped), resume, train N: bit
  for bit, on CPU with one seed. One trainer, so one compiled program: the resumed run
  starts from the untrained state its trainer began with and restores over it."""
  trainer = LocalTrainer(tiny(name, "steps=96", "report_every=48"), tmp_path)
  n = 12  # iterations of 4 env steps: 48 transitions > the memory's 32
  try:
    untrained = trainer.sim
    trainer.train_phase(n)
    state = trainer.sim.agent_state
    memory = replay.memory_of(trainer.exp.config, state.info)
    assert int(state.memory.filled) == jax.tree.leaves(state.memory.items)[0].shape[0]
    assert int(memory.size(state.memory)) == 32 and int(state.num_updates) > 0
    trainer.iteration = n
    trainer.save()
    trainer.train_phase(n)  # the straight run: 2N
    straight = leaves(trainer.sim)

    trainer.sim, trainer.iteration = untrained, 0
    assert trainer.restore() and trainer.iteration == n
    trainer.train_phase(n)
    for a, b in zip(straight, leaves(trainer.sim)):
      np.testing.assert_array_equal(a, b)
  finally:
    trainer.close()


# ------------------------------------------------------------------------------ seeds


@pytest.mark.gymnax
@pytest.mark.filterwarnings("ignore:train report at step")  # no episode ends in training
def test_seeds_train_independent_actor_critic_agents_in_one_program(tmp_path):
  """``--seeds 2`` with a fused TD3 config: two runs vmapped, each reported, each its own."""
  sets = [f"--set={s}" for s in TINY + ["steps=64", "report_every=32", "eval_every=64",
                                         "checkpoint_every=64", "eval_steps=200"]]
  assert main(["train", "--config", "td3_pendulum_fused", "--logdir", str(tmp_path),
               "--timestamp", "S", "--seeds", "2", "--no-progress", "--no-tensorboard",
               *sets]) == 0
  run_dir = tmp_path / "S-td3_pendulum_fused"
  records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
  last = records[-1]
  assert last["phase"] == "eval" and {"seed0/mean_score", "seed1/mean_score"} <= set(last)
  assert last["episodes"] == 4  # one 200-step episode per env (the mean over the seeds)
  assert last["seed0/mean_score"] != last["seed1/mean_score"]  # independent runs
  train = [r for r in records if r["phase"] == "train"]
  assert [r["step"] for r in train] == [32, 64] and train[-1]["learning"] == 1.0
  assert list((run_dir / "checkpoints").iterdir())


@pytest.mark.filterwarnings("ignore:train report at step")  # no episode ends in training
def test_one_seed_with_host_envs_trains_as_a_seeds_run(tmp_path):
  """``--seeds 1`` with host envs: one lane, under the seeds' ``vmap`` like K of them."""
  exp = configs.apply_overrides(configs.get("sac_pendulum"), TINY + ["eval_steps=20"])
  trainer = LocalTrainer(exp, tmp_path, seeds=1)
  try:
    assert trainer.sim.obs.shape == (1, 4, 3)
    metrics = trainer.train_phase(8)
    assert metrics["iterations"] == 8 and np.isfinite(metrics["critic_loss"])
    assert "seed0/mean_score" in trainer.eval_phase()
  finally:
    trainer.close()


@pytest.mark.filterwarnings("ignore:train report at step")  # no episode ends in training
def test_seeds_with_host_envs_train_in_one_program_and_resume(tmp_path):
  """``--seeds 2`` with host Pendulums (``sac_pendulum``): the two runs' envs step as lanes
  of one host batch, each run is reported on its own, one of them exports, and a trainer
  restores the run from its checkpoint (both agents) and trains on."""
  overrides = TINY + ["steps=64", "report_every=32", "eval_every=64", "checkpoint_every=64",
                      "eval_steps=200"]
  assert main(["train", "--config", "sac_pendulum", "--logdir", str(tmp_path), "--timestamp",
               "S", "--seeds", "2", "--no-progress", "--no-tensorboard",
               *[f"--set={s}" for s in overrides]]) == 0
  run_dir = tmp_path / "S-sac_pendulum"
  records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
  train = [r for r in records if r["phase"] == "train"]
  assert [r["step"] for r in train] == [32, 64] and train[-1]["learning"] == 1.0
  last = records[-1]
  assert last["phase"] == "eval" and {"seed0/mean_score", "seed1/mean_score"} <= set(last)
  assert last["episodes"] == 4  # one 200-step episode per env (the mean over the seeds)
  assert last["seed0/mean_score"] != last["seed1/mean_score"]  # independent runs
  # the export reads the run's two agents without stepping its host envs under vmap
  assert main(["export", str(run_dir), "--seed-index", "1", "--out", str(tmp_path / "p"),
               "--format", "jax"]) == 0

  trainer = LocalTrainer(configs.apply_overrides(configs.get("sac_pendulum"), overrides),
                         run_dir, seeds=2)
  try:
    assert trainer.restore() and trainer.step == 64
    assert trainer.sim.obs.shape == (2, 4, 3)
    actor = jax.tree.leaves(trainer.sim.agent_state.params.actor)[0]
    assert actor.shape[0] == 2 and not np.array_equal(actor[0], actor[1])
    metrics = trainer.train_phase(8)
    assert metrics["iterations"] == 8 and np.isfinite(metrics["critic_loss"])
    assert np.isfinite(trainer.eval_phase()["seed1/mean_score"])
  finally:
    trainer.close()
