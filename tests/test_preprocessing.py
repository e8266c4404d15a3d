"""Preprocessing stacks against numpy: each type, resets, running statistics, shapes, errors."""
import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl.preprocessing import PreprocessingSpecError, build_preprocessing, build_stack


@functools.lru_cache(maxsize=None)
def jitted(stack):
  """One compiled process per stack (stacks are hashable), reused across tests."""
  return jax.jit(stack.process, static_argnames="update")


def run(stack, x, reset=None, state=None, update=True, active=None):
  x = np.asarray(x)
  state = stack.init(x.shape[0]) if state is None else state
  reset = np.zeros(x.shape[0], bool) if reset is None else np.asarray(reset)
  return jitted(stack)(state, x, reset, update=update, active=active)


RNG = np.random.default_rng(0)


def test_sequence_resets_only_the_streams_that_reset():
  stack = build_stack([{"type": "sequence", "length": 3}], (2,))
  num = 3
  state = stack.init(num)
  history = [collections.deque(maxlen=3) for _ in range(num)]
  resets = [np.ones(num, bool)] + [np.zeros(num, bool)] * 3 + [np.array([False, True, False])]
  resets += [np.zeros(num, bool)] * 2
  for reset in resets:
    x = RNG.normal(size=(num, 2)).astype(np.float32)
    state, y = run(stack, x, reset, state)
    for i in range(num):
      if reset[i]:
        history[i].extend([x[i]] * 3)
      else:
        history[i].append(x[i])
      np.testing.assert_array_equal(y[i], np.stack(history[i], axis=-1))
  assert y.shape == (num, 2, 3)


def test_sequence_inactive_streams_keep_their_frames_and_dtype():
  stack = build_stack({"type": "sequence", "length": 2}, (2,), dtype_kind="uint8")
  assert stack.processed_dtype() == "int"
  state, _ = run(stack, np.full((2, 2), 7, np.uint8), reset=[True, True])
  state, y = run(stack, np.full((2, 2), 9, np.uint8), state=state,
                 active=np.array([True, False]))
  assert y.dtype == jnp.uint8 and state[0].dtype == jnp.uint8
  np.testing.assert_array_equal(np.asarray(state[0])[0], [[7, 9], [7, 9]])  # [element, time]
  np.testing.assert_array_equal(np.asarray(state[0])[1], [[7, 7], [7, 7]])  # inactive: kept


def per_sample(x, fn):
  return np.stack([fn(sample) for sample in x])


@pytest.mark.parametrize("kind,reference", [
    ("normalize", lambda s: (s - s.min()) / (s.max() - s.min() + 1e-8)),
    ("center", lambda s: 2 * (s - s.min()) / (s.max() - s.min() + 1e-8) - 1),
    ("standardize", lambda s: (s - s.mean()) / (s.std() + 1e-8)),
])
def test_per_sample_types_match_numpy(kind, reference):
  x = RNG.normal(3.0, 2.0, size=(4, 3, 5)).astype(np.float32)
  _, y = run(build_stack({"type": kind}, (3, 5)), x)
  np.testing.assert_allclose(y, per_sample(x, reference), rtol=1e-5, atol=1e-5)
  if kind == "normalize":
    assert float(y.min()) == 0.0 and abs(float(y.max()) - 1.0) < 1e-6


def test_running_standardize_equals_numpy_over_everything_seen():
  stack = build_stack({"type": "running_standardize"}, (2,))
  state, seen = stack.init(4), []
  for _ in range(5):
    x = RNG.normal([1.0, -3.0], [2.0, 0.5], size=(4, 2)).astype(np.float32)
    seen.append(x)
    state, y = run(stack, x, state=state)
  data = np.concatenate(seen)
  expected = (x - data.mean(0)) / np.sqrt(data.var(0) + 1e-4)
  np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
  # update=False: the statistics stay, and the output uses them.
  frozen, y2 = run(stack, x + 10.0, state=state, update=False)
  jax.tree.map(np.testing.assert_array_equal, frozen, state)
  np.testing.assert_allclose(y2, (x + 10 - data.mean(0)) / np.sqrt(data.var(0) + 1e-4),
                             rtol=1e-4)
  # A traced update flag works too (one compiled function for acting and evaluating).
  traced = jax.jit(lambda s, v, u: stack.process(s, v, None, update=u))
  same, _ = traced(state, x, jnp.bool_(False))
  jax.tree.map(np.testing.assert_array_equal, same, state)
  learned, _ = traced(state, x, jnp.bool_(True))
  assert float(learned[0].count) == float(state[0].count) + 4


def test_running_standardize_active_streams_and_clip():
  stack = build_stack({"type": "running_standardize", "clip": 1.5}, ())
  x = np.array([1.0, 2.0, 3.0, 100.0], np.float32)
  state, y = run(stack, x, active=np.array([True, True, True, False]))
  stats = state[0]
  assert float(stats.count) == 3
  np.testing.assert_allclose(stats.mean, 2.0, rtol=1e-6)
  np.testing.assert_allclose(stats.variance, np.var([1.0, 2.0, 3.0]), rtol=1e-5)
  assert float(y[3]) == 1.5 and float(jnp.max(jnp.abs(y))) <= 1.5


def test_grayscale_keeps_a_channel_axis():
  x = RNG.uniform(0, 255, size=(2, 4, 3, 3)).astype(np.float32)
  _, y = run(build_stack({"type": "grayscale"}, (4, 3, 3)), x)
  np.testing.assert_allclose(y, x @ np.array([0.299, 0.587, 0.114])[:, None], rtol=1e-5)
  assert y.shape == (2, 4, 3, 1)
  _, y = run(build_stack({"type": "grayscale", "weights": [0.5, 0.5]}, (3, 2)),
             x[:, 0, :, :2])
  np.testing.assert_allclose(y[..., 0], x[:, 0, :, :2].mean(-1), rtol=1e-5)


def bilinear_numpy(image, height, width):
  """Half-pixel-centre bilinear upsampling of [H, W, C] with edge clamping."""
  def coords(out, size):
    src = np.clip((np.arange(out) + 0.5) * size / out - 0.5, 0, size - 1)
    low = np.floor(src).astype(int)
    return low, np.minimum(low + 1, size - 1), src - low
  r0, r1, fr = coords(height, image.shape[0])
  c0, c1, fc = coords(width, image.shape[1])
  rows = image[r0] * (1 - fr)[:, None, None] + image[r1] * fr[:, None, None]
  return rows[:, c0] * (1 - fc)[None, :, None] + rows[:, c1] * fc[None, :, None]


def test_image_resize_bilinear_matches_numpy():
  x = RNG.uniform(size=(2, 3, 4, 2)).astype(np.float32)
  stack = build_stack({"type": "image_resize", "width": 7, "height": 5}, (3, 4, 2))
  _, y = run(stack, x)
  assert y.shape == (2, 5, 7, 2)
  for i in range(2):
    np.testing.assert_allclose(y[i], bilinear_numpy(x[i], 5, 7), rtol=1e-5, atol=1e-6)
  shrink = build_stack({"type": "image_resize", "width": 2, "height": 3}, (6, 4))
  _, y = run(shrink, np.full((2, 6, 4), 3.0, np.float32))
  np.testing.assert_allclose(y, np.full((2, 3, 2), 3.0), rtol=1e-6)


def test_divide_and_clip_with_aliases():
  x = RNG.normal(size=(3, 4)).astype(np.float32) * 5
  _, y = run(build_stack([{"type": "divide", "scale": 2.0},
                          {"type": "clip", "min": -1.0, "max_value": 0.5}], (4,)), x)
  np.testing.assert_allclose(y, np.clip(x / 2.0, -1.0, 0.5), rtol=1e-6)
  _, y = run(build_stack({"type": "clip", "max": 0.0}, (4,)), x)
  np.testing.assert_allclose(y, np.minimum(x, 0.0))


def test_reward_stack_on_scalars():
  stack = build_stack([{"type": "clip", "min_value": -1.0, "max_value": 1.0},
                       {"type": "divide", "scale": 0.5}], ())
  assert stack.processed_shape() == ()
  _, y = run(stack, np.array([-3.0, 0.25, 2.0], np.float32))
  np.testing.assert_allclose(y, [-2.0, 0.5, 2.0])


ALL_TYPES = [
    ({"type": "sequence", "length": 3}, (4, 4, 3)),
    ({"type": "standardize"}, (4, 4, 3)),
    ({"type": "normalize"}, (4, 4, 3)),
    ({"type": "center"}, (4, 4, 3)),
    ({"type": "running_standardize"}, (4, 4, 3)),
    ({"type": "grayscale"}, (4, 4, 3)),
    ({"type": "image_resize", "width": 3, "height": 2}, (4, 4, 3)),
    ({"type": "divide", "scale": 255}, (4, 4, 3)),
    ({"type": "clip", "min_value": 0, "max_value": 1}, (4, 4, 3)),
    ([{"type": "grayscale"}, {"type": "image_resize", "width": 3, "height": 2},
      {"type": "sequence", "length": 4}, {"type": "normalize"}], (4, 4, 3)),
]


@pytest.mark.parametrize("spec,shape", ALL_TYPES)
def test_processed_shape_matches_output(spec, shape):
  stack = build_stack(spec, shape, dtype_kind="uint8")
  _, y = run(stack, RNG.integers(0, 255, size=(2,) + shape).astype(np.uint8),
             reset=[True, True])
  assert y.shape == (2,) + stack.processed_shape()
  is_sequence = isinstance(spec, dict) and spec["type"] == "sequence"
  assert stack.processed_dtype() == ("int" if is_sequence else "float")
  assert y.dtype == (jnp.uint8 if is_sequence else jnp.float32)


def test_combined_stack_shape_and_identity():
  stack = build_stack([{"type": "grayscale"}, {"type": "image_resize", "width": 3, "height": 2},
                       {"type": "sequence", "length": 4}], (4, 4, 3))
  assert stack.processed_shape() == (2, 3, 1, 4)
  identity = build_stack(None, (5,), "int")
  assert identity.processed_shape() == (5,) and identity.processed_dtype() == "int"
  assert identity.init(3) == () and build_stack([], (5,)).preprocessors == ()
  x = np.arange(10).reshape(2, 5)
  np.testing.assert_array_equal(identity.process((), x, None, update=True)[1], x)


def test_state_vmaps_over_seeds():
  stack = build_stack([{"type": "sequence", "length": 2}, {"type": "running_standardize"}], (3,))
  states = jax.vmap(lambda _: stack.init(2))(jnp.arange(4))
  xs = jnp.asarray(RNG.normal(size=(4, 2, 3)), jnp.float32)
  step = jax.vmap(lambda s, x: stack.process(s, x, jnp.array([True, False]), update=True))
  states, y = jax.jit(step)(states, xs)
  assert y.shape == (4, 2, 3, 2) and states[1].count.shape == (4,)


def test_build_preprocessing_named_and_unnamed():
  shapes = {"screen": (8, 8, 3), "speed": (2,)}
  stacks = build_preprocessing({"screen": [{"type": "grayscale"}]}, shapes)
  assert stacks["screen"].processed_shape() == (8, 8, 1)
  assert stacks["speed"].preprocessors == () and stacks["speed"].processed_shape() == (2,)
  shared = build_preprocessing({"type": "divide", "scale": 2}, shapes, dtypes={"speed": "int"})
  assert all(len(s.preprocessors) == 1 for s in shared.values())
  assert shared["speed"].input_dtype == "int"
  single = build_preprocessing([{"type": "sequence"}], (3,))
  assert single.processed_shape() == (3, 2)
  assert build_preprocessing(None, (3,)).processed_shape() == (3,)


@pytest.mark.parametrize("spec,shape,match", [
    ([{"type": "divide", "scale": 2}, {"type": "normalise"}], (3,),
     r"preprocessing\[1\]: unknown preprocessor type 'normalise' \(did you mean 'normalize'\?\)"),
    ({"type": "sequence", "lenght": 3}, (3,),
     r"preprocessing\[0\] \(sequence\): unknown key 'lenght' \(did you mean 'length'\?\)"),
    ({"type": "sequence", "length": 0}, (3,), r"length must be a positive int"),
    ({"type": "divide", "scale": 0}, (3,), r"scale must not be 0"),
    ({"type": "clip"}, (3,), r"clip needs min_value and/or max_value"),
    ({"type": "clip", "min": 2, "max": 1}, (3,), r"min_value \(2.0\) is above max_value"),
    ({"type": "clip", "min": 0, "min_value": 1}, (3,), r"'min_value' given twice"),
    ({"type": "grayscale"}, (4, 4, 4), r"channel\) axis of 3"),
    ({"type": "image_resize", "width": 2, "height": 2}, (4,), r"\[H, W\] or \[H, W, C\]"),
    ({"type": "image_resize", "width": 2}, (4, 4), r"height must be a positive int"),
    ({"type": "image_resize", "width": 2, "height": 2, "method": "bilinera"}, (4, 4),
     r"did you mean 'bilinear'"),
    ({"type": "standardize"}, (), r"use running_standardize"),
    ({"type": "running_standardize", "clip": -1}, (), r"clip must be positive"),
    ([{"type": "grayscale"}, {"type": "grayscale"}], (4, 4, 3),  # checked on its input shape
     r"preprocessing\[1\] \(grayscale\): .* got input shape \(4, 4, 1\)"),
    (3, (3,), r"expected a list"),
])
def test_build_errors(spec, shape, match):
  with pytest.raises(PreprocessingSpecError, match=match):
    build_stack(spec, shape)


def test_named_errors_and_process_errors():
  with pytest.raises(PreprocessingSpecError, match=r"no state named 'scren' \(did you mean "
                                                   r"'screen'\?\)"):
    build_preprocessing({"scren": [{"type": "grayscale"}]}, {"screen": (4, 4, 3)})
  with pytest.raises(PreprocessingSpecError, match=r"reward_preprocessing"):
    build_preprocessing({"reward": [{"type": "clip", "min": -1}]}, {"screen": (4, 4, 3)})
  with pytest.raises(PreprocessingSpecError, match=r"preprocessing\['speed'\]\[0\] \(grayscale\)"):
    build_preprocessing({"speed": {"type": "grayscale"}}, {"speed": (2,)})
  with pytest.raises(PreprocessingSpecError, match=r"dtype_kind 'flaot'"):
    build_stack(None, (2,), "flaot")
  stack = build_stack({"type": "sequence"}, (3,))
  with pytest.raises(ValueError, match=r"x must be \[N, \*\(3,\)\]"):
    stack.process(stack.init(2), np.zeros((2, 4)), None, update=True)
