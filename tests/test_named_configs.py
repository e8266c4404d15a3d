"""Every registered named config builds, describes itself and trains one iteration.

A listed config can never be broken again: each is built as ``batchrl train`` builds it and
runs one train iteration (plus an evaluation phase) with its agent settings unchanged, on 2
environments stepped in the main process.
"""
import pytest

from batchrl import configs, experiment
from batchrl.cli import main
from conftest import skip_unless_gymnax

TINY_RUN = ["run.num_workers=0", "run.eval_steps=5", "run.steps=1", "run.report_every=1"]


# Atari configs: a Nature CNN on 84x84x4 frames; a short rollout and a small replay memory
# (dqn_atari's own holds 11 GB of frames) keep one iteration cheap on a CPU.
TINY_ATARI = {"ppo_atari": ["run.num_envs=2", "rollout_length=8", "batch_size=8"],
              "dqn_atari": ["run.num_envs=2", "memory_capacity=256"]}


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
  return configs.apply_overrides(exp, TINY_RUN + ([] if tied else ["run.num_envs=2"]))


@pytest.mark.parametrize("name", configs.names())
def test_named_config_trains_one_iteration(name, tmp_path, capsys):
  assert main(["configs", name]) == 0
  assert name in capsys.readouterr().out
  exp = _tiny(configs.get(name))
  trainer = experiment.Trainer(exp, tmp_path / name)
  try:
    metrics = trainer.train_phase(1)
    assert metrics["steps_per_second"] > 0
    evaluation = trainer.eval_phase()
    assert "mean_score" in evaluation
  finally:
    trainer.close()
