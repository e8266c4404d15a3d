"""``batchrl.parts``: independent lanes (seeds, trials) split into parts run side by
side, one per CPU core; the local trainer's runs over them (training, evaluating)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import configs
from batchrl import parts as lanes
from batchrl.parts import LaneSplit, PartRunner
from batchrl.train import host_update
from batchrl.train.local import LocalTrainer

# values compared across compilations or with recorded digests: XLA's optimized programs
pytestmark = pytest.mark.optimized


def test_parts_pad_split_and_join_any_tree():
  parts = LaneSplit(lanes=3, count=2)
  tree = {"x": jnp.arange(6.0).reshape(3, 2), "key": jax.random.split(jax.random.key(0), 3)}
  split = parts.split(tree)
  assert [p["x"].shape for p in split] == [(2, 2), (2, 2)]
  np.testing.assert_array_equal(split[1]["x"], [[4, 5], [4, 5]])  # padded with lane 2
  joined = parts.join(split)
  np.testing.assert_array_equal(joined["x"], tree["x"])
  np.testing.assert_array_equal(jax.random.key_data(joined["key"]),
                                jax.random.key_data(tree["key"]))
  assert LaneSplit(lanes=4, count=1).split(tree) == [tree]  # one part: untouched


def test_part_runner_runs_each_part_and_keeps_their_order():
  with PartRunner(LaneSplit(lanes=4, count=2)) as runner:
    out = runner.each(lambda x, y: x * y, [jnp.ones(2), jnp.ones(2) * 2], [3.0, 5.0])
  assert [o.tolist() for o in out] == [[3.0, 3.0], [10.0, 10.0]]


TINY = ["steps=2048", "report_every=1024", "eval_every=2048", "checkpoint_every=2048",
        "num_envs=8", "rollout_length=64", "update_epochs=1", "eval_steps=50",
        "batch_size=256"]


@pytest.mark.gymnax
def test_seeds_split_over_parts_train_as_in_one_program(tmp_path, monkeypatch):
  """``--seeds 3`` on 2 parts (padded to 4 lanes) and on 3 gives every seed the run it has
  in one program (the one-program run made once for both)."""
  exp = configs.apply_overrides(configs.get("cartpole_fused"), TINY)

  def run(parts: int, where):
    monkeypatch.setattr(lanes.LaneSplit, "for_backend", classmethod(lambda cls, n: cls(n, parts)))
    trainer = LocalTrainer(exp, tmp_path / where, seeds=3)
    try:
      metrics = [trainer.train_phase(8) for _ in range(2)]
      floats = [x for x in jax.tree.leaves(trainer.sim.agent_state)
                if jnp.issubdtype(x.dtype, jnp.floating)]
      return metrics, trainer.eval_phase(), jax.device_get(floats)
    finally:
      trainer.close()

  one = run(1, "one")
  for count in (2, 3):
    split = run(count, f"split{count}")
    for got, want in zip(split[0] + [split[1]], one[0] + [one[1]]):
      for key in ("seed0/mean_score", "seed1/mean_score", "seed2/mean_score"):
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, equal_nan=True,
                                   err_msg=f"{count} parts")
    assert len(split[2]) == len(one[2]) > 0
    for a, b in zip(split[2], one[2]):  # parameters, optimizer state, buffers
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=f"{count} parts")


@pytest.mark.parametrize("batch,cores,count", [(6, 4, 3), (7, 2, 1), (256, 2, 2), (1, 8, 1)])
def test_unpadded_parts_are_equal_shares_no_more_than_the_cores(monkeypatch, batch, cores,
                                                                   count):
  monkeypatch.setattr(lanes, "usable_cpus", lambda: cores)
  parts = LaneSplit.unpadded(batch)
  assert parts.count == count and parts.size * parts.count == batch


@pytest.mark.gymnax
def test_seeds_of_an_update_run_from_the_host_stay_in_one_part(tmp_path):
  """An update run from the host (PPO's host loop, ``batchrl.train.host_update``) spreads
  itself over the cores; two parts' updates at once hung, so ``--seeds`` keeps them in one
  part, and the run goes on."""
  exp = configs.apply_overrides(configs.get("cartpole_fused"), TINY + ["update_loop=host"])
  trainer = LocalTrainer(exp, tmp_path / "run", seeds=2)
  try:
    assert host_update.on_host(trainer.agent)
    assert trainer._parts.count == 1
    metrics = [trainer.train_phase(2) for _ in range(2)]
    assert all("seed1/mean_score" in m for m in metrics)
  finally:
    trainer.close()


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
    trainer._eval_compiling.join()  # the head start must be over
    with jax.log_compiles():
      caplog.clear()
      metrics = trainer.eval_phase()
    assert not [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
    assert metrics["mean_score"] > 0
  finally:
    trainer.close()
