"""RunningStats against numpy mean/var over streamed batches; merging; normalization."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl.ops import RunningStats


def stream(shape, sizes, seed=0):
  rng = np.random.default_rng(seed)
  return [rng.normal(3.0, 2.0, size=(n,) + shape).astype(np.float32) for n in sizes]


@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
def test_streamed_batches_match_numpy(shape):
  batches = stream(shape, [1, 7, 30, 2, 64])
  update = jax.jit(RunningStats.update)
  stats = RunningStats.create(shape)
  for batch in batches:
    stats = update(stats, batch)
  data = np.concatenate(batches)
  assert float(stats.count) == len(data)
  np.testing.assert_allclose(stats.mean, data.mean(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(stats.variance, data.var(0), rtol=1e-4)


def test_multiple_leading_axes_are_samples():
  batch = stream((3,), [40])[0].reshape(4, 10, 3)
  stats = RunningStats.create((3,)).update(batch)
  np.testing.assert_allclose(stats.mean, batch.reshape(-1, 3).mean(0), rtol=1e-5)
  assert float(stats.count) == 40


def test_merge_equals_union():
  first, second = stream((2,), [13, 50])
  a = RunningStats.create((2,)).update(first)
  b = RunningStats.create((2,)).update(second)
  union = RunningStats.create((2,)).update(np.concatenate([first, second]))
  merged = a.merge(b)
  for got, want in zip(merged, union):
    np.testing.assert_allclose(got, want, rtol=1e-5)
  empty = RunningStats.create((2,))
  for got, want in zip(empty.merge(a), a):
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_normalize_centre_scale_clip():
  batch = stream((3,), [100])[0]
  stats = RunningStats.create((3,)).update(batch)
  std = np.sqrt(batch.var(0) + 1e-4)
  np.testing.assert_allclose(stats.normalize(batch), (batch - batch.mean(0)) / std,
                             rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(stats.normalize(batch, center=False), batch / std, rtol=1e-4)
  clipped = stats.normalize(batch * 100, clip=5.0)
  assert float(jnp.max(jnp.abs(clipped))) == 5.0


def test_constant_values_and_empty_stats_never_divide_by_zero():
  empty = RunningStats.create(())
  assert float(empty.variance) == 1.0  # fewer than two values: leave unscaled
  constant = empty.update(np.ones(10, np.float32))
  assert float(constant.variance) == 0.0
  np.testing.assert_allclose(constant.std(1e-4), 1e-2, rtol=1e-5)


def test_shape_mismatch_is_a_clear_error():
  with pytest.raises(ValueError, match=r"trailing axes must be \(3,\)"):
    RunningStats.create((3,)).update(np.zeros((5, 4), np.float32))
