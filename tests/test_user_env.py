"""A user's own environment in ``batchrl train``: ``--set env=module:EnvId`` (Gymnasium's
form: the module is imported and registers the env), its keyword arguments
(``--set env_kwargs.NAME=VALUE``), ``check_env`` and one-line errors before any run
directory exists, the configs meant for any env of a kind (``ppo_discrete``,
``sac_continuous``), and run directories named for the env they trained on."""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from batchrl import configs
from batchrl.cli import main
from batchrl.configclass import ConfigError
from batchrl.logging import read_metrics
from batchrl.train import rundir

MODULE = "batchrl_test_user_envs"

# ``Steady`` pays ``scale`` each step and never ends by itself: its TimeLimit (10 steps)
# ends every episode, so an episode's return is 10 * scale whatever the policy does.
# ``Broken`` returns observations outside its observation space (check_env's to find).
SOURCE = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np

    class Steady(gym.Env):
      def __init__(self, scale=1.0):
        self.scale = scale
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

      def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

      def step(self, action):
        return np.full(2, 0.5, np.float32), float(self.scale), False, False, {}

    class Broken(Steady):
      def step(self, action):
        return np.full(3, 5.0), 1.0, False, False, {}

    gym.register("Steady-v0", entry_point=Steady, max_episode_steps=10)
    gym.register("Broken-v0", entry_point=Broken, max_episode_steps=10)
''')


@pytest.fixture(scope="module")
def user_module(tmp_path_factory):
  """The name of a module, importable from sys.path, that registers ``Steady-v0`` and
  ``Broken-v0`` when imported."""
  folder = tmp_path_factory.mktemp("user_envs")
  (folder / f"{MODULE}.py").write_text(SOURCE)
  sys.path.insert(0, str(folder))
  yield MODULE
  sys.path.remove(str(folder))


def _train(logdir, config: str, *sets: str) -> int:
  argv = ["train", "--config", config, "--logdir", str(logdir), "--no-progress",
          "--no-tensorboard"]
  for item in sets:
    argv += ["--set", item]
  return main(argv)


def _only_run(logdir):
  runs = list(logdir.iterdir())
  assert len(runs) == 1, runs
  return runs[0]


def test_a_users_module_env_trains_with_its_keyword_arguments(user_module, tmp_path):
  assert _train(tmp_path, "ppo_discrete", f"env={user_module}:Steady-v0",
                "env_kwargs.scale=3", "steps=512") == 0
  run = _only_run(tmp_path)
  assert run.name.endswith("-ppo_discrete-Steady-v0")
  final = [r for r in read_metrics(run) if r["phase"] == "eval"][-1]
  # scale=3 reached the env, and the episode limit is the env's own TimeLimit (10 steps)
  assert final["mean_score"] == pytest.approx(30.0)
  assert final["mean_length"] == pytest.approx(10.0)


@pytest.mark.parametrize("env, kwarg, message", [
    ("batchrl_no_such_module:Steady-v0", None, "no module named 'batchrl_no_such_module'"),
    (f"{MODULE}:Stedy-v0", None, f"module '{MODULE}' registers no 'Stedy-v0'; it registers "
     "'Steady-v0', 'Broken-v0'"),
    (f"{MODULE}:Steady-v0", "env_kwargs.scal=2", "takes no keyword argument 'scal' "
     "(run.env_kwargs) (did you mean 'scale'?); it takes: scale"),
    (f"{MODULE}:Broken-v0", None, "check_env found"),
])
def test_a_wrong_module_id_or_keyword_is_one_line_before_any_run_exists(
    user_module, tmp_path, capsys, env, kwarg, message):
  logdir = tmp_path / "runs"
  assert _train(logdir, "ppo_discrete", f"env={env}", *[kwarg] * bool(kwarg)) == 2
  err = capsys.readouterr().err
  assert err.startswith("batchrl train: error: ") and message in err, err
  if "check_env" not in message:
    assert err.count("\n") == 1, err
  assert not logdir.exists()


@pytest.mark.parametrize("config, env, sets", [
    ("ppo_discrete", "CartPole-v1", ["steps=512"]),
    ("ppo_discrete", "Acrobot-v1", ["steps=512"]),
    ("sac_continuous", "Pendulum-v1", ["steps=128"]),
    ("sac_continuous", "MountainCarContinuous-v0", ["steps=128"]),
])
def test_the_configs_for_any_env_run_on_envs_of_their_kind(tmp_path, config, env, sets):
  small = ["first_update=64", "batch_size=16", "actor_layers=[16]", "critic_layers=[16]",
           "eval_steps=20"] if config == "sac_continuous" else ["eval_steps=20"]
  assert _train(tmp_path, config, f"env={env}", *sets, *small) == 0
  run = _only_run(tmp_path)
  assert run.name.endswith(f"-{config}-{env}")
  assert [r for r in read_metrics(run) if r["phase"] == "eval"]


def test_the_configs_for_any_env_keep_the_envs_own_episode_limit():
  for name in configs.ANY_ENV:
    run = configs.get(name).run
    assert run.max_length is None and run.eval_steps is None, name
    assert configs.own_env(configs.get(name)) is None


def test_configs_lists_them_as_meant_for_any_env(capsys):
  assert main(["configs"]) == 0
  out = " ".join(capsys.readouterr().out.split())
  assert "PPO for any discrete-action task" in out
  assert "SAC for any continuous-action task" in out


def test_a_run_is_named_for_its_env_when_it_is_not_the_configs_own():
  assert rundir.run_name("cartpole", "CartPole-v1", "CartPole-v1") == "cartpole"
  assert rundir.run_name("cartpole", "LunarLander-v3", "CartPole-v1") == \
      "cartpole-LunarLander-v3"
  assert rundir.run_name("ppo_discrete", "CartPole-v1", None) == "ppo_discrete-CartPole-v1"
  assert rundir.run_name("ppo_discrete", "my_pkg.envs:Reach-v0", None) == \
      "ppo_discrete-Reach-v0"
  assert rundir.run_name("ppo_atari", "ALE/Pong-v5", "ALE/Breakout-v5") == \
      "ppo_atari-ALE-Pong-v5"


def test_a_run_named_for_its_config_alone_by_an_earlier_release_still_resumes(tmp_path):
  legacy = tmp_path / "T-cartpole"
  legacy.mkdir()
  exp = configs.apply_overrides(configs.get("cartpole"), ["env=Acrobot-v1"])
  (legacy / rundir.CONFIG_FILE).write_text(json.dumps(exp.to_dict()))  # JSON is YAML
  assert rundir.named_run_directory(tmp_path, "cartpole", "Acrobot-v1", "CartPole-v1",
                                    "T") == legacy
  assert rundir.named_run_directory(tmp_path, "cartpole", "MountainCar-v0", "CartPole-v1",
                                    "T") == tmp_path / "T-cartpole-MountainCar-v0"


def test_env_kwargs_are_set_one_by_one_or_as_json():
  base = configs.get("ppo_discrete")
  exp = configs.apply_overrides(base, ['env_kwargs={"scale": 2, "name": "a"}',
                                       "env_kwargs.scale=1e-3", "run.env_kwargs.flag=true",
                                       "env_kwargs.label=text"])
  assert exp.run.make_kwargs() == {"scale": 1e-3, "name": "a", "flag": True,
                                   "label": "text"}
  assert configs.Experiment.from_dict(exp.to_dict()) == exp
  with pytest.raises(ConfigError, match="JSON text of an object"):
    configs.apply_overrides(base, ["env_kwargs=[1, 2]"])
  with pytest.raises(ConfigError, match="need run.backend='gymnasium'"):
    configs.apply_overrides(configs.get("cartpole_fused"), ["env_kwargs.x=1"])


def test_the_docs_show_the_example_module_as_it_is():
  root = Path(__file__).resolve().parents[1]
  page = (root / "docs" / "your-own-env.md").read_text()
  assert (root / "examples" / "corridor.py").read_text().strip() in page
