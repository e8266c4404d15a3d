"""``LocalTrainer``: the pieces of one run in this process (beyond what the CLI tests see)."""
from __future__ import annotations

import jax
import pytest

from batchrl import configs
from batchrl.train.local import LocalTrainer

TINY = ["steps=2048", "report_every=1024", "eval_every=2048", "checkpoint_every=2048",
        "num_envs=8", "rollout_length=64", "update_epochs=1", "eval_steps=50",
        "batch_size=256"]


@pytest.mark.gymnax
@pytest.mark.parametrize("seeds", [None, 2])
def test_the_evaluation_compiled_ahead_is_the_one_the_first_evaluation_runs(
    tmp_path, caplog, seeds):
  """Compiled ahead from the sim's shapes while the first chunk runs; the first evaluation
  must find it (the shapes once carried a sharding, and it compiled a second time)."""
  exp = configs.apply_overrides(configs.get("cartpole_fused"), TINY)
  trainer = LocalTrainer(exp, tmp_path / "run", seeds=seeds)
  try:
    trainer.train_phase(2)
    trainer._eval_compiling.join()  # noqa: SLF001 (the head start must be over)
    with jax.log_compiles():
      caplog.clear()
      metrics = trainer.eval_phase()
    assert not [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
    assert metrics["mean_score"] > 0
  finally:
    trainer.close()
