"""Spec dicts <-> gymnasium spaces: exact round trips and the errors for bad specs."""
import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from batchrl.specs import EnvSpec, SpecError, from_space, to_space, validate_spec

INF = np.inf

SPACES = {
  "box_unbounded": spaces.Box(-INF, INF, (3,), np.float32),
  "box_bounded": spaces.Box(-1.0, 1.0, (2,), np.float32),
  "box_mixed_bounds": spaces.Box(np.array([0.0, -INF, -2.5], np.float32),
                                 np.array([1.0, INF, 0.1], np.float32), dtype=np.float32),
  "box_half_open": spaces.Box(0.0, INF, (2, 2), np.float32),
  "box_float64_scalar": spaces.Box(-0.1, 0.3, (), np.float64),
  "box_float16": spaces.Box(-1.5, 1.5, (4,), np.float16),
  "box_uint8_image": spaces.Box(0, 255, (8, 8, 3), np.uint8),
  "box_int64_unbounded": spaces.Box(-INF, INF, (2,), np.int64),
  "discrete": spaces.Discrete(5),
  "discrete_start": spaces.Discrete(3, start=-1),
  "discrete_int32": spaces.Discrete(4, dtype=np.int32),
  "multi_discrete": spaces.MultiDiscrete([4, 4, 4]),
  "multi_discrete_varied_2d": spaces.MultiDiscrete([[2, 3], [4, 5]]),
  "multi_discrete_start_dtype": spaces.MultiDiscrete([3, 5], start=[1, -2], dtype=np.int32),
  "multi_binary_scalar": spaces.MultiBinary(()),
  "multi_binary": spaces.MultiBinary(6),
  "multi_binary_2d": spaces.MultiBinary([2, 3]),
  "tuple": spaces.Tuple([spaces.Discrete(2), spaces.Box(-1, 1, (2,))]),
  "dict": spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "grip": spaces.Discrete(2)}),
  "nested": spaces.Dict({
    "camera": spaces.Box(0, 255, (4, 4), np.uint8),
    "parts": spaces.Tuple([spaces.MultiBinary(3),
                           spaces.Dict({"joint": spaces.MultiDiscrete([2, 2])})]),
  }),
}


def assert_same_space(a: gym.Space, b: gym.Space):
  """Same type, shape, dtype and bounds, recursively (stricter than Box.__eq__'s allclose)."""
  assert type(a) is type(b)
  if isinstance(a, spaces.Dict):
    assert list(a.spaces) == list(b.spaces)
    for key in a.spaces:
      assert_same_space(a[key], b[key])
    return
  if isinstance(a, spaces.Tuple):
    assert len(a.spaces) == len(b.spaces)
    for x, y in zip(a.spaces, b.spaces):
      assert_same_space(x, y)
    return
  assert a.shape == b.shape and a.dtype == b.dtype
  if isinstance(a, spaces.Box):
    np.testing.assert_array_equal(a.low, b.low)
    np.testing.assert_array_equal(a.high, b.high)
  if isinstance(a, spaces.Discrete):
    assert (a.n, a.start) == (b.n, b.start)
  if isinstance(a, spaces.MultiDiscrete):
    np.testing.assert_array_equal(a.nvec, b.nvec)
    np.testing.assert_array_equal(a.start, b.start)


@pytest.mark.parametrize("name", sorted(SPACES))
def test_space_round_trip_is_exact(name):
  space = SPACES[name]
  spec = from_space(space)
  validate_spec(spec)
  assert_same_space(to_space(spec), space)
  assert from_space(to_space(spec)) == spec  # the spec form is a fixed point


def test_tensorforce_forms():
  box = to_space(dict(shape=(3,), type="float"))
  assert isinstance(box, spaces.Box) and box.dtype == np.float32
  assert np.all(np.isneginf(box.low)) and np.all(np.isposinf(box.high))
  bounded = to_space(dict(type="float", shape=(2,), min_value=-1, max_value=1))
  np.testing.assert_array_equal(bounded.high, [1.0, 1.0])
  assert to_space(dict(type="int", num_actions=2)) == spaces.Discrete(2)
  assert to_space(dict(type="int", num_values=2)) == spaces.Discrete(2)
  assert to_space(dict(type="int", shape=(3,), num_actions=4)) == spaces.MultiDiscrete([4] * 3)
  assert to_space(dict(type="bool")).shape == ()
  assert to_space(dict(type="bool", shape=(5,))) == spaces.MultiBinary(5)
  assert to_space(dict(type="float", shape=4)).shape == (4,)  # an int shape means (n,)


def test_named_and_tuple_specs():
  space = to_space(dict(
    camera=dict(type="float", shape=(2, 2)),
    command=dict(type="tuple", items=[dict(type="int", num_values=3), dict(type="bool")]),
  ))
  assert isinstance(space, spaces.Dict)
  assert isinstance(space["command"], spaces.Tuple)
  assert space["command"][0] == spaces.Discrete(3)
  # A named spec may itself be called 'type': only a string 'type' makes a leaf spec.
  assert isinstance(to_space({"type": dict(type="bool")}), spaces.Dict)


BAD_SPECS = [
  (dict(type="flaot", shape=(3,)), ["'type'", "'flaot'", "did you mean 'float'", "valid types"]),
  (dict(type="float", shape=(3,), min_val=0.0), ["unknown key 'min_val'",
                                                  "did you mean 'min_value'", "valid keys"]),
  (dict(typ="float", shape=(3,)), ["needs 'type'", "'typ' looks like a misspelled 'type'"]),
  (dict(type="float", shape=(3, 0)), ["'shape'", "dimension 0 at index 1", ">= 1"]),
  (dict(type="float", shape=(-2,)), ["'shape'", "dimension -2", ">= 1"]),
  (dict(type="float", shape="3"), ["'shape'", "tuple of ints"]),
  (dict(type="int", num_actions=0), ["'num_actions'", "must be >= 1"]),
  (dict(type="int", shape=(2,), num_values=[2, -1]), ["'num_values'", "must be >= 1"]),
  (dict(type="int", num_values=2.5), ["'num_values'", "an int or an array of ints"]),
  (dict(type="int"), ["needs num_values", "min_value and max_value"]),
  (dict(type="int", num_values=2, num_actions=2), ["not both"]),
  (dict(type="int", num_values=3, min_value=0), ["'min_value'", "takes no bounds", "'start'"]),
  (dict(type="int", shape=(2,), min_value=0, max_value=300, dtype="uint8"),
   ["'max_value'", "outside the range of uint8"]),
  (dict(type="int", min_value=0, max_value=9, start=1), ["'start'", "only applies"]),
  (dict(type="float", min_value=1.0, max_value=-1.0), ["min_value 1.0 > max_value -1.0"]),
  (dict(type="float", shape=(2,), min_value=[0, 2], max_value=1), ["at index (1,)"]),
  (dict(type="float", max_value=float("nan")), ["'max_value'", "NaN"]),
  (dict(type="float", shape=(3,), max_value=[1, 2]), ["'max_value'", "does not broadcast"]),
  (dict(type="float", dtype="float33"), ["'dtype'", "did you mean 'float32'", "valid dtypes"]),
  (dict(type="float", dtype="int32"), ["'dtype'", "valid dtypes: ['float16'"]),
  (dict(type="tuple", items=dict(type="bool")), ["'items'", "list of specs"]),
  (dict(type="tuple", items=[dict(type="bool"), dict(type="int")]),
   ["spec['items'][1]", "needs num_values"]),
  (dict(pos=dict(type="float", shape=(0,))), ["spec['pos']['shape']"]),
  (dict(type=3), ["'type'", "must be a string"]),
  ([dict(type="bool")], ["expected a spec dict"]),
  ({}, ["needs 'type'"]),
]


@pytest.mark.parametrize("spec,fragments", BAD_SPECS, ids=[str(s)[:40] for s, _ in BAD_SPECS])
def test_bad_spec_errors_name_key_and_valid_values(spec, fragments):
  with pytest.raises(SpecError) as info:
    validate_spec(spec)
  for fragment in fragments:
    assert fragment in str(info.value)
  with pytest.raises(ValueError):  # SpecError is a ValueError; to_space shares the checks
    to_space(spec)


@pytest.mark.parametrize("space,fragment", [
  (spaces.Text(5), "supported spaces"),
  (spaces.MultiDiscrete(np.array(3)), "Discrete(3)"),
  (spaces.Dict({}), "empty Dict"),
  (spaces.Box(0, 1, (2,), np.bool_), "dtype bool"),
])
def test_from_space_rejects_spaces_without_spec_form(space, fragment):
  with pytest.raises(SpecError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
    from_space(space)


def test_env_spec_still_reads_spaces():
  env = gym.make("CartPole-v1")
  spec = EnvSpec.from_env(env)
  assert spec.action_space == spaces.Discrete(2) and spec.num_envs == 1
