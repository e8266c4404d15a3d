"""Constructors that gymnasium.vector accepts work with worker processes, wherever they are
written: lambdas, closures, env classes and env ids registered by the user's own script
(with or without a ``__main__`` guard, or piped on standard input) or notebook (through a
real kernel).

The user's code is ``USER_CODE`` below, run as a separate Python process (a script is only
a script in its own process); its ``run()`` prints one JSON line that the tests check.
"""
import json
import os
import subprocess
import sys
import types

import cloudpickle
import numpy as np
import pytest

from batchrl.envs import launch
from batchrl.envs.batch import BatchEnv
from batchrl.envs.process import EnvWorkerError, ExternalProcess

try:
  from tests import mock_envs
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
  import mock_envs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

USER_CODE = '''\
import functools, json, os, sys
import gymnasium as gym
import numpy as np
from batchrl.envs.batch import BatchEnv
from batchrl.envs.process import ExternalProcess

CONTEXT = os.environ.get("BATCHRL_TEST_CONTEXT", "spawn")


class Note:  # an info value of a class defined here: it must come back as this very class
  def __init__(self, t):
    self.t = t


class Factor:  # an argument of call() of a class defined here
  def __init__(self, k):
    self.k = k


class CountEnv(gym.Env):  # episodes of `duration` steps, reward duration + bonus
  def __init__(self, duration, bonus=0.0):
    self.duration, self.bonus, self.t = duration, bonus, 0
    self.observation_space = gym.spaces.Box(0.0, 1e6, (2,), np.float32)
    self.action_space = gym.spaces.Discrete(2)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.t = 0
    return np.array([0, self.duration], np.float32), {}

  def step(self, action):
    self.t += 1
    obs = np.array([self.t, self.duration], np.float32)
    return obs, self.duration + self.bonus, self.t >= self.duration, False, {"note": Note(self.t)}

  def scaled(self, factor):
    return factor.k * self.duration


class OneStepEnv(CountEnv):  # no arguments: the class itself is the constructor
  def __init__(self):
    super().__init__(1)


def closure(duration):
  bonus = 0.5
  def make():
    return CountEnv(duration, bonus)
  return make


gym.register("Count-v0", entry_point=CountEnv, kwargs={"duration": 3})
gym.register("CountByName-v0", entry_point="__main__:CountEnv", kwargs={"duration": 5})


def run():
  fns = [lambda: CountEnv(2)] * 2 + [closure(3), OneStepEnv, functools.partial(CountEnv, 4)]
  batch = BatchEnv(fns, num_workers=2, seed=0, context=CONTEXT)
  batch.reset()
  _, rewards, terminated, _, infos = batch.step(np.zeros(5, np.int64))
  notes = [type(note).__name__ + str(note.t) for note in infos["note"][[0, 1, 2, 4]]]
  final_is_note = isinstance(infos["final_info"]["note"][3], Note)
  scaled = batch.call("scaled", Factor(10))
  batch.close()
  registered = BatchEnv([lambda: gym.make("CountByName-v0"), "Count-v0"], num_workers=2,
                        context=CONTEXT)
  registered.reset(seed=0)
  registered_rewards = registered.step(np.zeros(2, np.int64))[1]
  registered.close()
  cartpole = ExternalProcess(lambda: gym.make("CartPole-v1"), context=CONTEXT)
  cart_obs, _ = cartpole.reset(seed=0)
  cartpole.close()
  single = ExternalProcess(closure(2), context=CONTEXT, index=0)
  single.reset()
  _, reward, done, _, info = single.step(1)
  single_scaled = single.call("scaled", Factor(3))
  single.close()
  print(json.dumps({
      "main_file": getattr(sys.modules["__main__"], "__file__", None),
      "rewards": rewards.tolist(), "terminated": terminated.tolist(), "notes": notes,
      "final_is_note": final_is_note, "scaled": list(scaled), "cart_shape": cart_obs.shape,
      "registered": registered_rewards.tolist(),
      "single": [reward, done, isinstance(info["note"], Note), single_scaled]}), flush=True)
'''
GUARD = '\n\nif __name__ == "__main__":\n  run()\n'
NO_GUARD = "\n\nrun()\n"

EXPECTED = {
    "rewards": [2.0, 2.0, 3.5, 1.0, 4.0], "terminated": [False, False, False, True, False],
    "notes": ["Note1", "Note1", "Note1", "Note1"], "final_is_note": True,
    "scaled": [20, 20, 30, 10, 40], "cart_shape": [4], "registered": [5.0, 3.0],
    "single": [2.5, False, True, 6],
}


def _run_user_code(args, tmp_path, stdin=None, context="spawn") -> dict:
  env = dict(os.environ, BATCHRL_TEST_CONTEXT=context)
  env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
  proc = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True,
                        cwd=tmp_path, env=env, timeout=60)
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.strip().splitlines()
  assert len(lines) == 1, proc.stdout  # the workers never ran the script's code themselves
  return json.loads(lines[0])


def _check(result: dict) -> None:
  assert {key: result[key] for key in EXPECTED} == EXPECTED


def test_script_with_main_guard_through_the_forkserver(tmp_path):
  (tmp_path / "train.py").write_text(USER_CODE + GUARD)
  result = _run_user_code(["train.py"], tmp_path, context="forkserver")
  _check(result)
  assert result["main_file"].endswith("train.py")


def test_script_without_main_guard(tmp_path):
  (tmp_path / "train.py").write_text(USER_CODE + NO_GUARD)
  _check(_run_user_code(["train.py"], tmp_path))


def test_script_piped_on_standard_input(tmp_path):
  result = _run_user_code(["-"], tmp_path, stdin=USER_CODE + NO_GUARD)
  _check(result)
  assert result["main_file"] in (None, "<stdin>")


def test_notebook_through_a_real_kernel(tmp_path):
  nbformat = pytest.importorskip("nbformat")
  nbclient = pytest.importorskip("nbclient")
  pytest.importorskip("ipykernel")
  definitions, _ = USER_CODE.split("\n\ndef run():")
  setup = (f"import os, sys; sys.path.insert(0, {ROOT!r}); "
           "os.environ['BATCHRL_TEST_CONTEXT'] = 'forkserver'")  # spawn: see the scripts
  cells = [nbformat.v4.new_code_cell(setup),
           nbformat.v4.new_code_cell(definitions),  # classes and closures of the notebook
           nbformat.v4.new_code_cell("def run():" + USER_CODE.split("\n\ndef run():")[1]),
           nbformat.v4.new_code_cell("run()")]
  notebook = nbformat.v4.new_notebook(cells=cells)
  client = nbclient.NotebookClient(notebook, timeout=60, kernel_name="python3",
                                   resources={"metadata": {"path": str(tmp_path)}})
  client.execute()
  outputs = [out for out in notebook.cells[-1].outputs if out.get("name") == "stdout"]
  _check(json.loads("".join(out["text"] for out in outputs)))


# -- in this process: the same kinds of constructors, and what cannot be sent ------------


def _duration_closure(duration):
  def make():
    return mock_envs.DurationEnv(duration)
  return make


@pytest.fixture(scope="module")
def lambda_batch():
  fns = [lambda: mock_envs.DurationEnv(2), _duration_closure(3)] * 2
  env = BatchEnv(fns, num_workers=2)
  yield env
  env.close()


def test_lambdas_and_closures_step_in_workers(lambda_batch):
  obs, _ = lambda_batch.reset()
  np.testing.assert_array_equal(obs, [[0, 2], [0, 3], [0, 2], [0, 3]])
  for t in range(1, 4):
    obs, rewards, terminated, _, _ = lambda_batch.step(np.zeros(4, np.int64))
    np.testing.assert_array_equal(terminated, [t == 2, t == 3] * 2)
    np.testing.assert_array_equal(rewards, [2, 3, 2, 3])
  assert lambda_batch.call("add", 0, y=100) == (103, 103, 103, 103)


def test_a_repeated_constructor_is_sent_once():
  fn = lambda: mock_envs.DurationEnv(2)
  one, eight = launch.pack_constructors([fn], [0]), launch.pack_constructors([fn] * 8, range(8))
  assert len(eight) < len(one) + 8 * 8  # memo references, not eight copies
  restored = cloudpickle.loads(eight)
  assert len(restored) == 8 and all(f is restored[0] for f in restored)


def test_a_constructor_that_cannot_be_sent_says_why():
  import threading
  lock = threading.Lock()
  fns = [mock_envs.DurationEnv] * 2 + [lambda: lock and mock_envs.DurationEnv()]
  with pytest.raises(TypeError, match=r"environment 2, <function .*lambda.*cannot be sent to "
                     r"a worker process \(TypeError: cannot pickle '_thread.lock' object\)"):
    BatchEnv(fns, num_workers=2)
  env = BatchEnv(fns)  # in-process, nothing travels: fine
  assert env.reset()[0].shape == (3, 2)
  env.close()
  # The group this process steps itself never travels either.
  env = BatchEnv(fns[::-1], num_workers=2, step_in_parent=True, context="forkserver")
  assert env.reset()[0].shape == (3, 2) and len(env.worker_pids) == 1
  env.close()


def test_a_module_the_worker_cannot_import_names_the_env(monkeypatch):
  # A module that exists only in this process: its classes are pickled by reference.
  phantom = types.ModuleType("phantom_envs")
  exec("import functools\nclass Env:\n  pass\n", phantom.__dict__)
  phantom.Env.__module__ = "phantom_envs"
  monkeypatch.setitem(sys.modules, "phantom_envs", phantom)
  with pytest.raises(EnvWorkerError, match=r"environment 2 raised ModuleNotFoundError during "
                     r"construction: No module named 'phantom_envs'"):
    BatchEnv([mock_envs.DurationEnv] * 2 + [phantom.Env] * 2, num_workers=2,
             context="forkserver")
  with ExternalProcess(phantom.Env, index=7, context="forkserver") as env:
    with pytest.raises(EnvWorkerError, match="environment 7 raised ModuleNotFoundError"):
      env.reset()


def test_external_process_takes_a_lambda_and_objects_by_value():
  with ExternalProcess(lambda: mock_envs.DurationEnv(3), context="forkserver") as env:
    env.reset()
    assert env.step(0)[1] == 3.0
    # An instance of a class that no module holds: it can only travel by value.
    offset = type("Offset", (), {"__radd__": lambda self, other: other + 5})()
    assert env.call("add", 3, y=offset) == 1 + 3 + 5
