"""Every registered named config builds, describes itself and trains one iteration.

A listed config can never be broken again: each is built as ``batchrl train`` builds it and
runs one train iteration (plus an evaluation phase) with its agent settings unchanged, on 2
environments stepped in the main process; the iteration moves the agent's state, keeps it
finite and reports no infinite metric. (Each family's fused config is among them: the agent
contract, ``tests/agents/test_contract.py``, checks that every family has one.)

The programs compile without XLA's LLVM optimization (``BATCHRL_FAST_COMPILE=all``, as in
every test not marked slow: ``conftest.py``): one iteration proves a config builds and
trains, and compiling is nearly all of it (DroQ's training chunk 4.3 s instead of 12 s). The
optimized programs' numerics are the learning tests' and the update-hash tests' to prove.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import configs
from batchrl.cli import main
from batchrl.train.local import LocalTrainer
from conftest import leaves, skip_unless_gymnax

TINY_RUN = ["run.num_workers=0", "run.eval_steps=5", "run.steps=1", "run.report_every=1"]


# Atari configs: a Nature CNN on 84x84x4 frames; a short rollout and a small replay memory
# (dqn_atari's own holds 11 GB of frames) keep one iteration cheap on a CPU.
TINY_ATARI = {"ppo_atari": ["run.num_envs=2", "rollout_length=8", "batch_size=8"],
              "dqn_atari": ["run.num_envs=2", "memory_capacity=256"]}
# Besides the tiny budget, what keeps a run short without changing what it exercises (DQFD
# still pretrains at init, on fewer steps).
SHORTER = {"dqfd_cartpole": ["pretrain_steps=10"]}


def _tiny(exp):
  """Two envs unless the config's minibatch size is tied to its number of envs."""
  if exp.run.backend == "gymnax":
    skip_unless_gymnax()
  if exp.run.backend == "envpool":
    pytest.importorskip("envpool")
  if exp.name in TINY_ATARI:
    pytest.importorskip("ale_py")
    return configs.apply_overrides(exp, TINY_RUN + TINY_ATARI[exp.name])
  tied = getattr(exp.config, "batch_size", None) is not None
  return configs.apply_overrides(exp, TINY_RUN + ([] if tied else ["run.num_envs=2"])
                                 + SHORTER.get(exp.name, []))


def _floats(tree) -> list[np.ndarray]:
  """The floating-point leaves of ``tree`` as numpy arrays (PRNG keys and ints left out)."""
  return [np.asarray(x) for x in jax.tree.leaves(tree)
          if jnp.issubdtype(jnp.result_type(x), jnp.floating)]


@pytest.mark.parametrize("name", configs.names())
def test_named_config_trains_one_iteration(name, tmp_path, capsys):
  assert main(["configs", name]) == 0
  assert name in capsys.readouterr().out
  exp = _tiny(configs.get(name))
  trainer = LocalTrainer(exp, tmp_path / name)
  try:
    before = leaves(trainer.sim.agent_state)
    metrics = trainer.train_phase(1)
    after = leaves(trainer.sim.agent_state)
    assert metrics["steps_per_second"] > 0 and "episodes" in metrics, metrics
    assert not any(np.isinf(x).any() for x in _floats(metrics)), metrics
    assert all(np.isfinite(x).all() for x in _floats(trainer.sim.agent_state))
    assert any(not np.array_equal(x, y) for x, y in zip(before, after))
    evaluation = trainer.eval_phase()
    assert "mean_score" in evaluation
  finally:
    trainer.close()
