"""Distributed training on Ray: what runners get, faults, errors, and a run that learns.

The fault tests share one local Ray instance (2 CPUs, temp dir under the test's tmp dir) and
drive a ``DistributedTrainer`` directly; the end-to-end test runs ``batchrl train --ray`` in
subprocesses that start their own instances. Tests stop only the Ray processes they started.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from batchrl import cli, configs
from batchrl.agents import families
from batchrl.configclass import ConfigError
from batchrl.distributed import RayOptions, RunnerFailure, learner
from batchrl.distributed.trainer import DistributedTrainer, _round_size
from batchrl.specs import EnvSpec
from batchrl.train.trainer import Trainer
from tests import mock_envs

ROOT = Path(__file__).resolve().parents[1]
ray = pytest.importorskip("ray")


def tiny(env: str = "Pendulum-v1", **run) -> configs.Experiment:
  """Pendulum PPO with 4 envs and 32-step rollouts: quick to compile and to run."""
  exp = configs.get("pendulum")
  sets = {"run.env": env, "run.num_envs": 4, "run.steps": 1024, "run.report_every": 128,
          "ppo.rollout_length": 32, "ppo.batch_size": 64, "ppo.update_epochs": 1,
          **{f"run.{k}": v for k, v in run.items()}}
  return configs.apply_overrides(exp, [f"{k}={v}" for k, v in sets.items()])


# --------------------------------------------------------------------------- without Ray


def test_options_are_checked():
  with pytest.raises(ConfigError, match="runners must be an int >= 1"):
    RayOptions(runners=0)
  with pytest.raises(ConfigError, match="runner_timeout must be a number > 0"):
    RayOptions(runner_timeout=0)
  with pytest.raises(ConfigError, match="does not split evenly over 3 runners"):
    RayOptions(runners=3).resolve(16)
  assert RayOptions(runners=4).resolve(16).envs_per_runner == 4
  assert RayOptions(runners=3, envs_per_runner=5).overrides() == ["run.num_envs=15"]


def test_local_training_never_imports_the_distributed_package():
  """The layering: ``experiment`` and the shared ``batchrl.train`` pieces sit below
  ``distributed``; only the CLI (with --ray) or the user reaches for it."""
  code = ("import sys, batchrl.experiment, batchrl.train.loop, batchrl.cli\n"
          "print(sorted(m for m in sys.modules if m.startswith('batchrl.distributed') "
          "or m == 'ray'))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, check=True).stdout
  assert out.strip() == "[]"


def test_runners_get_their_envs_slice_and_the_parameters():
  exp = tiny()
  agent = families.family("ppo").make(exp.config)
  import gymnasium as gym
  spec = EnvSpec(gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Box(-1, 1, (1,)), 4)
  axes = learner.env_axes(agent, spec)
  shared = learner.shared_index(agent, spec, axes)
  state = learner.init_sim(agent, spec, jax.random.key(0)).agent_state
  paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(state)[0]]
  # the parameters and the observation normalizer travel; the optimizer state, the rollout
  # buffer and the key do not
  sent = {paths[i] for i in shared}
  assert {p for p in paths if p.startswith(".params['policy']")} <= sent
  assert all(p.startswith((".params", ".obs_stats")) for p in sent), sent
  per_env = [i for i, a in enumerate(axes) if a is not None]
  assert per_env, "the rollout buffer is per env"
  leaves = jax.tree.leaves(state)
  part = jax.tree.leaves(learner.runner_state(state, axes, 1, 2),
                         is_leaf=lambda x: isinstance(x, learner.Placeholder))
  for i in per_env:
    want = np.take(np.asarray(leaves[i]), [2, 3], axis=axes[i])
    np.testing.assert_array_equal(part[i], want)
  assert all(isinstance(part[i], learner.Placeholder) for i in shared)


def test_gather_joins_runners_along_the_env_axis():
  from batchrl.simulation import Rollout
  def rollout(value):  # [K*T=4, M=2]
    x = np.full((4, 2), value, np.float32)
    return Rollout(x, x > 0, x, x, {})
  batch = learner.gather([rollout(1.0), rollout(2.0)], iterations=2)
  assert batch.done.shape == (2, 2, 4)
  np.testing.assert_array_equal(batch.transitions[0, 0], [1, 1, 2, 2])


@pytest.mark.parametrize("name,sets", [
    ("pendulum", ["ppo.rollout_length=8", "ppo.batch_size=16"]),
    ("dqn_cartpole", ["dqn.update_frequency=4"])])
def test_the_learner_predicts_the_batch_runners_send(name, sets):
  """``learn`` is compiled for ``batch_structs`` before any runner exists: they must be the
  shapes and dtypes of the gathered rollouts of a real runner."""
  from batchrl.distributed.runner import EnvRunner
  from batchrl.train.build import agent_spaces
  exp = configs.apply_overrides(configs.get(name), ["run.num_envs=2", *sets])
  agent = families.family(exp.agent).make(exp.config)
  spec = EnvSpec(*agent_spaces(exp.run), 2)
  axes = learner.env_axes(agent, spec)
  shared = learner.shared_index(agent, spec, axes)
  sim = learner.init_sim(agent, spec, jax.random.key(0))
  runner = EnvRunner(exp.to_dict(), 0, 2, 1, learner.runner_state(sim.agent_state, axes, 0, 2),
                     shared)
  try:
    leaves = learner.shared_values(sim, shared)
    rollout = runner.collect(leaves, 0, 2 * agent.period)["rollout"]
  finally:
    runner.close()
  got = jax.eval_shape(lambda b: b, learner.gather([rollout], 2))
  assert got == learner.batch_structs(agent, spec, sim, 2)
  assert got != learner.batch_structs(agent, spec, sim, 1)  # (the comparison can fail)


def test_replay_agents_collect_rounds_on_policy_agents_do_not():
  ppo = families.family("ppo").make(tiny().config)
  plan = {"report": 64, "total": 128}
  assert _round_size(RayOptions(envs_per_runner=2), ppo, {"report": 10, "total": 20}) == 1
  dqn = families.family("dqn").make(configs.get("dqn_cartpole").config)
  k = _round_size(RayOptions(envs_per_runner=4, min_round_steps=512), dqn, plan)
  assert 64 % k == 0 and k * 4 * dqn.period >= 512 or k == 64
  assert _round_size(RayOptions(envs_per_runner=4, refresh_every=3), dqn, plan) == 2


def test_rounds_divide_the_budgets_last_shorter_phase():
  dqn = families.family("dqn").make(configs.get("dqn_cartpole").config)
  # phases of 64 iterations, the last one 24: rounds of a divisor of both (8)
  k = _round_size(RayOptions(envs_per_runner=4, refresh_every=16), dqn,
                  {"report": 64, "total": 64 * 3 + 24})
  assert k == 8


def test_cli_errors_are_one_line(tmp_path, capsys, monkeypatch):
  def run(*extra):
    code = cli.main(["train", "--config", "pendulum", "--logdir", str(tmp_path), *extra])
    return code, capsys.readouterr().err.strip()
  code, err = run("--ray", "--address", "127.0.0.1:1")
  assert code == 2 and "cannot reach a Ray cluster at 127.0.0.1:1" in err
  assert len(err.splitlines()) == 1
  code, err = run("--address", "127.0.0.1:1")
  assert code == 2 and "--address only applies with --ray" in err
  code, err = run("--runners", "4")  # not silently ignored
  assert code == 2 and "--runners only applies with --ray" in err
  monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
  code, err = run("--ray")
  assert code == 2 and 'pip install "batchrl[ray]"' in err
  assert list(tmp_path.iterdir()) == []  # nothing left on disk


# --------------------------------------------------------------------------- with Ray


@pytest.mark.slow
def test_one_process_starts_a_local_ray_instance_twice(tmp_path):
  """Ray caches its auth token per process: a second local instance (a search after a
  train --ray run, in one notebook) must start with the token the first one used."""
  script = ("import sys; from pathlib import Path; from batchrl.distributed import cluster\n"
            "for i in range(2):\n"
            "  with cluster.connect(None, Path(sys.argv[1]) / str(i), 1) as ray:\n"
            "    print(ray.get(ray.put(i)))\n")
  env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
  env.pop("RAY_AUTH_TOKEN", None)
  done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  assert done.stdout.split() == ["0", "1"]


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
  """One local Ray instance (2 CPUs) for the fault tests; runners can import tests.*."""
  from batchrl.distributed import cluster
  base = tmp_path_factory.mktemp("ray")
  flags = (mock_envs.HANG_FLAG, mock_envs.RAISE_FLAG)
  saved = {k: os.environ.get(k) for k in ("PYTHONPATH", *flags)}
  os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved["PYTHONPATH"]]))
  os.environ[mock_envs.HANG_FLAG] = str(base / "hang")
  os.environ[mock_envs.RAISE_FLAG] = str(base / "raise")
  with cluster.connect(None, base / "tmp", num_cpus=2):
    yield base
  for key, value in saved.items():
    if value is None:
      os.environ.pop(key, None)
    else:
      os.environ[key] = value


def make_trainer(tmp_path, exp, **options) -> DistributedTrainer:
  options = RayOptions(runners=2, **{"start_timeout": 120.0, **options}).resolve(exp.run.num_envs)
  return DistributedTrainer(exp, tmp_path, options).start()


def runner_pid(trainer, index: int) -> int:
  return ray.get(trainer.pool.actors[index].pid.remote())


@pytest.mark.slow
def test_killed_runner_is_replaced_and_every_step_counted(ray_session, tmp_path):
  trainer = make_trainer(tmp_path, tiny("tests.mock_envs:FaultyPendulum-v0"))
  try:
    assert isinstance(trainer, Trainer)  # the protocol the training loop drives
    first = trainer.train_phase(2)
    assert first["runner_restarts"] == 0 and first["param_lag"] == 0
    victim = runner_pid(trainer, 1)
    os.kill(victim, signal.SIGKILL)  # dies while the next rollout is being asked for
    episodes = 0.0
    for _ in range(8):  # 8 iterations x 128 steps: 1024 steps = 5 Pendulum episodes per env
      metrics = trainer.train_phase(1)
      episodes += metrics["episodes"]
    assert [r.runner for r in trainer.pool.restarts] == [1]
    assert "died" in trainer.pool.restarts[0].reason
    assert metrics["runner_restarts"] == 1
    assert runner_pid(trainer, 1) != victim
    # every runner returned whole rollouts: 4 envs x 256 steps, no partial one mixed in
    assert 4 <= episodes <= 20
    assert trainer.eval_phase()["episodes"] == 4  # both runners evaluate after the restart
  finally:
    trainer.close()


@pytest.mark.slow
def test_env_errors_restart_the_env_and_hung_runners_are_replaced(ray_session, tmp_path):
  trainer = make_trainer(tmp_path, tiny("tests.mock_envs:FaultyPendulum-v0"),
                         runner_timeout=3.0)
  try:
    trainer.train_phase(1)  # both runners started and compiled
    (ray_session / "raise").touch()  # one env step raises: BatchEnv's restart policy
    trainer.train_phase(1)
    assert not (ray_session / "raise").exists() and trainer.pool.restarts == []
    (ray_session / "hang").touch()  # the next step of some runner hangs for an hour
    start = time.monotonic()
    metrics = trainer.train_phase(2)
    assert time.monotonic() - start < 90
    assert len(trainer.pool.restarts) == 1
    assert "no answer within 3 s" in trainer.pool.restarts[0].reason
    assert "no answer within 3 s" in metrics["restart_reasons"]
    assert not (ray_session / "hang").exists()
  finally:
    trainer.close()


@pytest.mark.slow
def test_replay_agent_streams_rounds_with_bounded_lag(ray_session, tmp_path):
  exp = configs.apply_overrides(configs.get("dqn_cartpole"), [
      "run.num_envs=4", "run.report_every=512", "dqn.first_update=64"])
  trainer = make_trainer(tmp_path, exp, refresh_every=4)
  try:
    k, period = trainer.rounds_of, trainer.agent.period
    assert k == 4
    iterations = 512 // (4 * period)
    metrics = trainer.train_phase(iterations)
    # round 1 acted with the first parameters; later rounds were collected while the
    # learner made the previous round's k updates
    rounds = iterations // k
    assert metrics["param_lag"] == pytest.approx(k * (rounds - 1) / rounds)
    assert metrics["memory_size"] == 512  # every collected step reached the memory
  finally:
    trainer.close()


@pytest.mark.slow
def test_replay_actor_critic_agent_streams_rounds_with_bounded_lag(ray_session, tmp_path):
  """TD3 (8-unit networks) on host Pendulum over 2 runners: rounds of 4 iterations, each
  collected with the parameters from before the previous round's updates, as DQN's."""
  exp = configs.apply_overrides(configs.get("td3_pendulum"), [
      "run.num_envs=4", "run.report_every=64", "actor_layers=[8]", "critic_layers=[8]",
      "batch_size=8", "memory_capacity=256", "first_update=16", "repeat_update=1"])
  trainer = make_trainer(tmp_path, exp, refresh_every=4)
  try:
    assert (trainer.rounds_of, trainer.agent.period, trainer.agent.on_policy) == (4, 1, False)
    metrics = trainer.train_phase(16)  # 4 rounds of 4 iterations x 4 envs
    assert metrics["param_lag"] == pytest.approx(4 * 3 / 4)
    assert metrics["memory_size"] == 64  # every collected step reached the memory
    assert metrics["learning"] > 0 and np.isfinite(metrics["critic_loss"])
  finally:
    trainer.close()


@pytest.mark.slow
def test_on_policy_actor_critic_agent_waits_for_every_runner(ray_session, tmp_path):
  """A2C on host CartPole over 2 runners: one iteration per round, every update on the
  batch of all 4 envs collected with the current parameters (lag 0), as a local run."""
  exp = configs.apply_overrides(configs.get("a2c_cartpole"), [
      "run.num_envs=4", "run.report_every=20", "policy_layers=[8]", "baseline_layers=[8]"])
  trainer = make_trainer(tmp_path, exp)
  try:
    assert trainer.rounds_of == 1 and trainer.agent.on_policy
    before = jax.tree.leaves(trainer.sim.agent_state.params)
    metrics = trainer.train_phase(4)
    assert metrics["param_lag"] == 0
    after = jax.tree.leaves(trainer.sim.agent_state.params)
    assert any(not np.array_equal(a, b) for a, b in zip(before, after))
  finally:
    trainer.close()


@pytest.mark.slow
def test_runners_step_envpool_envs_inside_their_programs(ray_session, tmp_path):
  """run.backend='envpool' on Ray: each runner builds its own pool and steps it in its
  compiled collection; the learner updates from their rollouts."""
  pytest.importorskip("envpool")
  trainer = make_trainer(tmp_path, tiny(backend="envpool"))
  try:
    before = jax.tree.leaves(trainer.sim.agent_state.params)
    assert trainer.train_phase(2)["steps_per_second"] > 0
    after = jax.tree.leaves(trainer.sim.agent_state.params)
    assert any(not np.array_equal(a, b) for a, b in zip(before, after))
    assert -2000 < trainer.eval_phase()["mean_score"] < 0
  finally:
    trainer.close()


@pytest.mark.slow
def test_too_many_failures_stop_the_run_with_a_clear_error(ray_session, tmp_path):
  # every runner process dies after 3000 env steps (750 steps of its 4 envs)
  exp = tiny("tests.mock_envs:CrashingPendulum-v0", num_envs=8)
  trainer = make_trainer(tmp_path, exp, max_restarts=1)
  try:
    trainer.train_phase(1)
    trainer.save()
    with pytest.raises(RunnerFailure, match=r"more than max_restarts=1 allows"):
      for _ in range(40):
        trainer.train_phase(1)
    assert len(trainer.pool.restarts) == 2
  finally:
    trainer.close()
  assert list((tmp_path / "checkpoints").iterdir())  # the last checkpoint is kept


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_cli_run_learns_and_resumes_after_the_driver_is_killed(tmp_path):
  """Pendulum on 2 runners: the driver is killed after its first checkpoint; the same
  command resumes and the run learns as a local one does (local: about -310 at 60k)."""
  args = [sys.executable, "-m", "batchrl", "train", "--config", "pendulum", "--logdir",
          str(tmp_path), "--timestamp", "T", "--ray", "--runners", "2", "--no-progress",
          "--no-tensorboard", "--set", "run.steps=60000", "--set", "run.eval_every=60000",
          "--set", "run.checkpoint_every=20000"]
  run_dir = tmp_path / "T-pendulum"
  home_token = (Path.home() / ".ray").exists()
  first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
  try:
    deadline = time.monotonic() + 240
    while not list((run_dir / "checkpoints").glob("ckpt-*")) and time.monotonic() < deadline:
      assert first.poll() is None, first.stdout.read().decode()
      time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
  finally:
    if first.poll() is None:
      first.kill()
      first.wait()
    first.stdout.close()
  done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=400)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "Resuming" in done.stderr and "Resumed" in done.stderr
  from batchrl.logging import read_metrics
  records = read_metrics(run_dir)
  final = [r for r in records if r["phase"] == "eval"][-1]
  assert final["step"] >= 60000 and final["mean_score"] > -500, final
  steps = [r["step"] for r in records if r["phase"] == "train"]
  assert steps == sorted(set(steps))  # the resumed run did not repeat or skip reports
  assert (Path.home() / ".ray").exists() == home_token  # nothing written to the home dir
  from batchrl.distributed.cluster import processes_under
  assert processes_under(run_dir / "ray") == []  # the killed run's leftovers were stopped
