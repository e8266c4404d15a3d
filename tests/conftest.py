"""Helpers shared by the tests (pytest puts this folder's modules on the import path)."""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import compilation_cache, programs
from batchrl.agents.core import Transition
from batchrl.envs.jax_env import make_vec
from batchrl.train import fused

EXAMPLE_CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "configs"

# Compiled programs go to JAX's persistent cache from the first test on, as they do in the
# commands the tests start (``batchrl train``): a program several tests build (a named config
# trained in-process here and by the CLI there, on either xdist worker) compiles once per run.
# .ci/run points BATCHRL_CACHE_DIR at a folder of the checkout, so CI starts cold.
compilation_cache.enable_from_environment()


def to_numpy(x) -> np.ndarray:
  """An array leaf as numpy; a typed PRNG key as its raw key data."""
  if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  return np.asarray(x)


def leaves(tree) -> list[np.ndarray]:
  """The leaves of ``tree`` as numpy arrays (keys as their data), for exact comparisons."""
  return [to_numpy(x) for x in jax.tree.leaves(tree)]


def leaves_by_path(tree) -> dict[str, np.ndarray]:
  """The leaves of ``tree`` as numpy arrays keyed by their path (``keystr``)."""
  return {jax.tree_util.keystr(p): to_numpy(x)
          for p, x in jax.tree_util.tree_leaves_with_path(tree)}


# ----------------------------------------------------------------- agents on fused runs
# What the agent test modules (DQN, NAF, VPG, TRPO, ...) each wrote for themselves: an agent
# on a JAX-native env with its compiled programs, training it chunk by chunk, scoring it,
# resuming from a checkpoint. Programs are compiled once per kit, so modules keep a kit in a
# module-scoped fixture.


class FusedKit(NamedTuple):
  """An agent on ``num_envs`` copies of a JAX-native env, with its compiled programs."""

  env: Any
  agent: Any
  run_chunk: Callable  # (sim, iterations) -> (sim, infos [(seeds,) iterations])
  evaluate: Callable  # sim -> stats of the deterministic policy (per seed with seeds)
  num_seeds: int | None = None

  def init(self, seed: int = 0):
    """A fresh sim (a stack of ``num_seeds`` independent ones with seeds)."""
    return fused.init_sim(self.env, self.agent, jax.random.key(seed), num_seeds=self.num_seeds)


def fused_kit(env_name: str, num_envs: int, agent, eval_steps: int,
              num_seeds: int | None = None) -> FusedKit:
  """``agent`` on ``make_vec(env_name, num_envs)``; evaluations run up to ``eval_steps``."""
  env = make_vec(env_name, num_envs)
  evaluate = fused.make_evaluate(env, agent, eval_steps)
  evaluate = jax.jit(evaluate if num_seeds is None else jax.vmap(evaluate))
  return FusedKit(env, agent, fused.make_run_chunk(env, agent, num_seeds=num_seeds), evaluate,
                  num_seeds)


def train_chunks(kit: FusedKit, sim, chunks: int, length: int):
  """``chunks`` compiled chunks of ``length`` iterations from ``sim``; returns the sim and the
  infos of every iteration in order (one program: every chunk has the same length)."""
  infos = []
  for _ in range(chunks):
    sim, info = kit.run_chunk(sim, length)
    infos.append(info)
  axis = 0 if kit.num_seeds is None else 1  # the iteration axis
  return sim, jax.tree.map(lambda *x: np.concatenate(x, axis=axis), *infos)


def learning_curve(kit: FusedKit, sim, evals: int, length: int,
                   until: Callable[[np.ndarray], bool] | None = None):
  """Mean deterministic scores before training and after each of up to ``evals`` chunks of
  ``length`` iterations, ``[evals + 1(, seeds)]``, and the last chunk's infos; ``until(scores
  so far)`` true stops early (once what a test asserts of the budget holds already)."""
  scores, infos = [np.asarray(kit.evaluate(sim)["mean_score"])], None
  for _ in range(evals):
    sim, infos = kit.run_chunk(sim, length)
    scores.append(np.asarray(kit.evaluate(sim)["mean_score"]))
    if until is not None and until(np.stack(scores)):
      break
  return np.stack(scores), infos


def best_score(kit: FusedKit, sim, rounds: int, length: int, target: float) -> float:
  """The best mean deterministic score over up to ``rounds`` chunks of ``length`` iterations
  from ``sim`` (evaluated after each), stopping once it reaches ``target``."""
  best = -np.inf
  for _ in range(rounds):
    sim, _ = kit.run_chunk(sim, length)
    best = max(best, float(kit.evaluate(sim)["mean_score"]))
    if best >= target:
      break
  return best


def assert_resumes_exactly(run_chunk: Callable, sim, restored, length: int) -> dict:
  """One chunk from ``sim`` and one from ``restored`` (``sim`` after a checkpoint round
  trip) end in equal states, leaf for leaf, with equal losses; returns the infos."""
  a, infos_a = run_chunk(sim, length)
  b, infos_b = run_chunk(restored, length)
  for x, y in zip(leaves(a), leaves(b), strict=True):
    np.testing.assert_array_equal(x, y)
  np.testing.assert_array_equal(infos_a["loss"], infos_b["loss"])
  return infos_a

def assert_same(ours, theirs, where: str = "result", exact_types: bool = False) -> None:
  """``ours`` equals ``theirs`` (a Gymnasium vector env's results): equal values, for arrays
  equal dtypes and shapes, dicts, sequences and object arrays compared deeply. With
  ``exact_types`` the types must match too (a list is no tuple, ``np.int64(2)`` is not ``2``):
  what a drop-in replacement promises."""
  same = functools.partial(assert_same, exact_types=exact_types)
  if isinstance(theirs, dict):
    assert isinstance(ours, dict), where
    assert sorted(ours) == sorted(theirs), f"{where}: keys {sorted(ours)} != {sorted(theirs)}"
    for key in theirs:
      same(ours[key], theirs[key], f"{where}[{key!r}]")
  elif isinstance(theirs, (tuple, list)):
    assert not exact_types or type(ours) is type(theirs), f"{where}: {ours!r} != {theirs!r}"
    assert len(ours) == len(theirs), f"{where}: {ours!r} != {theirs!r}"
    for k, (a, b) in enumerate(zip(ours, theirs)):
      same(a, b, f"{where}[{k}]")
  elif isinstance(theirs, np.ndarray):
    assert isinstance(ours, np.ndarray), f"{where}: {type(ours).__name__}, not an array"
    assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape), (
        f"{where}: {ours.dtype}{ours.shape} != {theirs.dtype}{theirs.shape}")
    if theirs.dtype == object:
      for k, (a, b) in enumerate(zip(ours, theirs)):
        same(a, b, f"{where}[{k}]")
    else:
      np.testing.assert_array_equal(ours, theirs, err_msg=where)
  else:
    assert not exact_types or type(ours) is type(theirs), f"{where}: {ours!r} != {theirs!r}"
    assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"



def fill_and_update(agent, state, obs_fn: Callable, num_steps: int, key: jax.Array,
                    episode_length: int | None = None):
  """One compiled program: act (exploring, key ``fold_in(key, t)``) and store ``num_steps``
  made-up transitions (observations ``obs_fn(t)``, reward 1, every env's episode ending
  after each ``episode_length`` steps, none with None), then update; the agent must then
  be ready. Returns the filled state, the updated one, the metrics and the actions
  ``[num_steps, B, ...]``."""

  @jax.jit
  def run(state):
    def step(state, t):
      obs = obs_fn(t)
      envs = jax.tree.leaves(obs)[0].shape[0]
      action, extras = agent.act(state, obs, jax.random.fold_in(key, t), False)
      ends = False if episode_length is None else t % episode_length == episode_length - 1
      done = jnp.full((envs,), ends)
      state = agent.store(state, Transition(obs, action, jnp.ones(envs), done,
                                            jnp.zeros(envs, bool), obs_fn(t + 1), extras))
      return state, action

    filled, actions = jax.lax.scan(step, state, jnp.arange(num_steps))
    return (filled, *agent.update(filled), actions)

  filled, new_state, metrics, actions = run(state)
  assert bool(agent.ready(filled))
  return filled, new_state, metrics, actions


def example_agent_spec(name: str) -> dict:
  """The JSON agent spec ``examples/configs/<name>``."""
  with open(EXAMPLE_CONFIGS / name) as f:
    return json.load(f)


# --------------------------------------------------------------------------- gymnax extra
# Tests marked ``gymnax`` (or in a module with ``pytestmark = pytest.mark.gymnax``) need the
# ``batchrl[gymnax]`` extra; without it they are skipped, saying so, instead of failing
# (.ci/run's second stage runs the core on the newest jax, which gymnax does not allow).


def _gymnax_installed() -> bool:
  import importlib.util
  try:
    return importlib.util.find_spec("gymnax") is not None
  except (ImportError, ValueError):  # sys.modules["gymnax"] = None: hidden on purpose
    return False


_NEEDS_GYMNAX = 'needs gymnax: pip install "batchrl[gymnax]"'


def skip_unless_gymnax() -> None:
  """Skips the calling test (or fixture) without gymnax: for cases a marker cannot reach,
  such as one parameter of many. Checks without importing gymnax."""
  if not _gymnax_installed():
    pytest.skip(_NEEDS_GYMNAX)


def pytest_addoption(parser):
  parser.addoption(
      "--learning-seed", type=int, default=0,
      help="the seed the learning tests (fixture `learning_seed`) train with: their thresholds "
           "must hold for seeds 0, 1 and 2, checked by running them with each")


def pytest_collection_modifyitems(config, items):
  """(One such hook per conftest: another block needing it adds to this one.)"""
  if _gymnax_installed():
    return
  skip = pytest.mark.skip(reason=_NEEDS_GYMNAX)
  for item in items:
    if item.get_closest_marker("gymnax") is not None:
      item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fast_compile_unless_slow(request, monkeypatch):
  """Tests not marked ``slow`` compile the programs ``batchrl.programs.jit`` builds without
  XLA's LLVM optimization (``BATCHRL_FAST_COMPILE=all``, inherited by the commands they
  start): their runs are a few iterations, so compiling is nearly all of their time, and CI
  starts with an empty compilation cache. The learning tests and end-to-end runs (``slow``)
  keep the optimized programs users get, as do the tests marked ``optimized`` (they compare
  a program's values with another compiled otherwise, or with recorded digests), and a run
  with ``BATCHRL_FAST_COMPILE`` set."""
  if (request.node.get_closest_marker("slow") is None
      and request.node.get_closest_marker("optimized") is None
      and programs.FAST_COMPILE_ENV not in os.environ):
    monkeypatch.setenv(programs.FAST_COMPILE_ENV, "all")


@pytest.fixture
def learning_seed(request) -> int:
  """The seed a learning test trains with (``pytest --learning-seed N``, default 0)."""
  return request.config.getoption("--learning-seed")
