"""The JSON network builder: each layer against numpy, several states, 'auto', carries, errors."""
import json

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from batchrl.networks import conv as conv_module
from batchrl.networks.conv import Conv, convolve
from batchrl.networks.layer_specs import NetworkSpecError
from batchrl.networks.layered import (
  InputSpec,
  build_network,
  input_specs_from_space,
  validate_network_spec,
)

RNG = np.random.default_rng(0)
KEY = jax.random.key(0)
VEC = InputSpec((4,), "float")


def run(spec, inputs, x, carry=(), key=KEY):
  """Build, init and apply once (jitted: one compile beats op-by-op dispatch of the
  initialisers); returns ``(network, params, carry, features)``."""
  network = build_network(spec, inputs)
  params = jax.jit(network.init)(key)
  carry, features = jax.jit(network.apply)(params, carry, x)
  return network, params, carry, np.asarray(features)


def shapes(spec, inputs, x):
  """``(network, param shapes, feature shape)`` without compiling anything."""
  network = build_network(spec, inputs)
  params = jax.eval_shape(network.init, KEY)
  features = jax.eval_shape(network.apply, params, network.initial_carry(2), x)[1]
  return network, jax.tree_util.tree_map(lambda a: a.shape, params), features.shape


def floats(*shape):
  return RNG.normal(size=shape).astype(np.float32)


# ----------------------------------------------------------------------------- layers

@pytest.mark.parametrize("activation, fn", [
    ("tanh", np.tanh), ("relu", lambda v: np.maximum(v, 0)), ("none", lambda v: v),
    ("sigmoid", lambda v: 1 / (1 + np.exp(-v))),
    ("leaky_relu", lambda v: np.where(v > 0, v, 0.01 * v))])
def test_dense_is_activation_of_x_w_plus_b(activation, fn):
  x = floats(2, 4)
  _, params, _, out = run([{"type": "dense", "size": 3, "activation": activation}], VEC, x)
  layer = params["layers_0_dense"]
  np.testing.assert_allclose(out, fn(x @ np.asarray(layer["kernel"]) + layer["bias"]),
                             rtol=1e-5, atol=1e-6)


def test_dense_default_is_tanh_and_linear_has_no_activation_nor_bias():
  x = floats(2, 4)
  _, params, _, out = run([{"type": "dense", "size": 5},
                           {"type": "linear", "size": 2, "bias": False}], VEC, x)
  hidden = np.tanh(x @ np.asarray(params["layers_0_dense"]["kernel"])
                   + params["layers_0_dense"]["bias"])
  assert set(params["layers_1_linear"]) == {"kernel"}
  np.testing.assert_allclose(out, hidden @ np.asarray(params["layers_1_linear"]["kernel"]),
                             rtol=1e-5, atol=1e-6)


def test_nonlinearity_on_a_scalar_state_gives_features_of_size_one():
  x = floats(2)
  network, _, _, out = run([{"type": "nonlinearity", "name": "relu"}], InputSpec((), "float"), x)
  assert network.output_size == 1
  np.testing.assert_allclose(out, np.maximum(x, 0)[:, None])


def test_conv1d_valid_matches_a_numpy_correlation():
  x = floats(2, 8, 2)
  spec = [{"type": "conv1d", "size": 4, "window": 3, "stride": 2, "padding": "valid",
           "activation": "none"}]
  network, params, _, out = run(spec, InputSpec((8, 2), "float"), x)
  kernel, bias = np.asarray(params["layers_0_conv1d"]["kernel"]), params["layers_0_conv1d"]["bias"]
  expected = np.stack([np.einsum("bwc,wcf->bf", x[:, t:t + 3], kernel) for t in (0, 2, 4)], 1)
  assert network.plan.branches[0].out_shape == (3, 4) and network.output_size == 12
  np.testing.assert_allclose(out, (expected + bias).reshape(2, 12), rtol=1e-5, atol=1e-5)


def test_conv2d_and_pool2d_shapes():
  spec = [{"type": "conv2d", "size": 6, "window": [3, 2], "stride": 2},
          {"type": "pool2d", "pooling_type": "average"},
          {"type": "conv2d", "size": 2, "window": 2, "padding": "valid"}]
  network, params, out = shapes(spec, InputSpec((9, 9, 3), "float"), floats(2, 9, 9, 3))
  assert [layer.out_shape for layer in network.plan.branches[0].layers] == [(5, 5, 6), (3, 3, 6),
                                                                     (2, 2, 2)]
  assert params["layers_0_conv2d"]["kernel"] == (3, 2, 3, 6)
  assert out == (2, 8) and network.output_size == 8
  assert network.plan.branches[0].layers[0].opt("activation") == "relu"  # the conv default


@pytest.mark.parametrize("shape, window, stride, padding", [
    ((3, 10, 10, 4), (3, 3), (1, 1), "VALID"),  # MinAtar's conv
    ((2, 9, 7, 3), (3, 2), (2, 1), "SAME"),
    ((2, 12, 3), (3,), (2,), "SAME"),
    ((2, 20, 20, 4), (8, 8), (4, 4), "VALID")])  # the Nature CNN's first conv, smaller
def test_conv_is_flax_conv_same_params_values_and_gradients(shape, window, stride, padding):
  """Patches times kernel (the CPU path) and XLA's convolution both equal ``nn.Conv``: the
  parameter tree and initial values exactly (checkpoints load across), outputs and
  gradients to float rounding."""
  x = jnp.asarray(floats(*shape))
  flax_conv = nn.Conv(5, window, strides=stride, padding=padding, name="c")
  ours = Conv(5, window, stride, padding, name="c")
  params = flax_conv.init(KEY, x)
  assert jax.tree.all(jax.tree.map(lambda a, b: bool((a == b).all()), params,
                                   ours.init(KEY, x)))
  params = jax.tree.map(lambda a: a + jnp.asarray(floats(*a.shape)), params)  # a nonzero bias
  expected = np.asarray(flax_conv.apply(params, x))
  kernel = params["params"]["kernel"]
  for patches in (True, False):
    out = np.asarray(convolve(x, kernel, stride, padding, patches=patches))
    np.testing.assert_allclose(out + np.asarray(params["params"]["bias"]), expected,
                               rtol=1e-5, atol=1e-5)
    grads = jax.grad(lambda k, x: jnp.sum(jnp.sin(convolve(x, k, stride, padding,
                                                           patches=patches))),
                     argnums=(0, 1))(kernel, x)
    references = jax.grad(lambda k, x: jnp.sum(jnp.sin(flax_conv.apply(
        {"params": {"kernel": k, "bias": jnp.zeros(5)}}, x))), argnums=(0, 1))(kernel, x)
    for grad, reference in zip(grads, references):  # the kernel's and the input's
      np.testing.assert_allclose(grad, reference, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(ours.apply(params, x), expected, rtol=1e-5, atol=1e-5)


def test_conv_runs_as_patches_on_the_cpu_but_as_xla_conv_in_a_top_level_program():
  """Patches inside loops (XLA:CPU's convolution gradients are slow there), XLA's own
  convolution where a program says it runs at the top level (faster there)."""
  x, kernel = jnp.asarray(floats(2, 6, 6, 3)), jnp.asarray(floats(3, 3, 3, 4))

  def primitives():
    return {e.primitive.name for e in jax.make_jaxpr(
        lambda x, k: convolve(x, k, (1, 1), "VALID"))(x, kernel).jaxpr.eqns}

  on_cpu = jax.default_backend() == "cpu"
  assert ("conv_general_dilated" in primitives()) is not on_cpu
  with conv_module.top_level_program():
    assert "conv_general_dilated" in primitives()
  assert ("conv_general_dilated" in primitives()) is not on_cpu  # reset on leaving


def layer_norm_reference(x, scale, bias, epsilon):
  mean = x.mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + epsilon) * scale + bias


def test_layer_norm_normalizes_the_last_axis_as_numpy():
  x = floats(3, 5) * 4 + 2
  _, params, _, out = run([{"type": "layer_norm"}], InputSpec((5,), "float"), x)
  assert jax.tree.map(np.shape, params) == {"layers_0_layer_norm": {"bias": (5,),
                                                                    "scale": (5,)}}
  np.testing.assert_allclose(out, layer_norm_reference(x, 1.0, 0.0, 1e-6), rtol=1e-4,
                             atol=1e-5)
  # a conv output: over the channels at each position; learned scale and bias, epsilon
  image = floats(2, 3, 3, 4)
  spec = [{"type": "layer_norm", "epsilon": 0.5}, {"type": "nonlinearity", "name": "relu"}]
  network = build_network(spec, InputSpec((3, 3, 4), "float"))
  params = {"layers_0_layer_norm": {"scale": jnp.asarray(floats(4)),
                                    "bias": jnp.asarray(floats(4))}}
  _, out = jax.jit(network.apply)(params, (), image)
  norm = params["layers_0_layer_norm"]
  expected = np.maximum(layer_norm_reference(image, np.asarray(norm["scale"]),
                                             np.asarray(norm["bias"]), 0.5), 0)
  assert out.shape == (2, 36)
  np.testing.assert_allclose(out, expected.reshape(2, 36), rtol=1e-4, atol=1e-5)
  _, params, _ = shapes([{"type": "layer_norm", "scale": False, "bias": False}],
                        InputSpec((5,), "float"), x)
  assert params == {}


def test_max_pool_values_and_global_pooling():
  x = floats(2, 4, 4, 1)
  _, _, _, out = run([{"type": "pooling"}], InputSpec((4, 4, 1), "float"), x)
  np.testing.assert_allclose(out, x.reshape(2, 2, 2, 2, 2).max(axis=(2, 4)).reshape(2, 4))
  seq = floats(2, 5, 3)
  for kind, reduce in (("max", np.max), ("average", np.mean)):
    _, _, _, out = run([{"type": "pooling", "pooling_type": kind}], InputSpec((5, 3), "float"), seq)
    np.testing.assert_allclose(out, reduce(seq, axis=1), rtol=1e-6)


def test_flatten_and_reshape():
  x = floats(2, 3, 4)
  network, _, _, out = run([{"type": "reshape", "shape": [2, -1]}, {"type": "flatten"}],
                           InputSpec((3, 4), "float"), x)
  assert [layer.out_shape for layer in network.plan.branches[0].layers] == [(2, 6), (12,)]
  np.testing.assert_array_equal(out, x.reshape(2, 12))


def test_embedding_looks_values_up():
  ids = np.array([[0, 4, 2], [1, 1, 3]])
  network, params, _, out = run([{"type": "embedding", "size": 2}], InputSpec((3,), "int", 5), ids)
  table = np.asarray(params["layers_0_embedding"]["embedding"])
  assert table.shape == (5, 2) and network.output_size == 6
  np.testing.assert_array_equal(out, table[ids].reshape(2, 6))
  # bool states default to 2 values
  _, params, _, out = run([{"type": "embedding", "size": 3}], InputSpec((), "bool"),
                          np.array([True, False]))
  np.testing.assert_array_equal(out, np.asarray(params["layers_0_embedding"]["embedding"])[[1, 0]])


def test_dueling_is_value_plus_centred_advantage():
  x = floats(2, 4)
  network, params, _, q = run([{"type": "dense", "size": 6}, {"type": "dueling", "size": 3}],
                              VEC, x)
  h = np.tanh(x @ np.asarray(params["layers_0_dense"]["kernel"]) + params["layers_0_dense"]["bias"])
  duel = params["layers_1_dueling"]
  value = h @ np.asarray(duel["value"]["kernel"]) + duel["value"]["bias"]
  advantage = h @ np.asarray(duel["advantage"]["kernel"]) + duel["advantage"]["bias"]
  assert network.output_size == 3
  np.testing.assert_allclose(q, value + advantage - advantage.mean(-1, keepdims=True),
                             rtol=1e-5, atol=1e-6)


def test_dropout_is_off_unless_asked_with_a_key():
  network = build_network([{"type": "dropout", "rate": 0.5}], VEC)
  params, x = network.init(KEY), jnp.ones((2, 4))
  assert params == {}
  np.testing.assert_array_equal(network.apply(params, (), x)[1], x)
  np.testing.assert_array_equal(network.apply(params, (), x, deterministic=True,
                                              dropout_key=KEY)[1], x)
  dropped = np.asarray(network.apply(params, (), x, deterministic=False, dropout_key=KEY)[1])
  assert set(np.unique(dropped)) <= {0.0, 2.0} and (dropped == 0).any()
  with pytest.raises(ValueError, match="dropout_key"):
    network.apply(params, (), x, deterministic=False)


def test_recurrent_carries_of_gru_and_lstm():
  network = build_network([{"type": "dense", "size": 3}, {"type": "gru", "size": 5},
                           {"type": "lstm", "size": 4}], VEC)
  assert network.recurrent and network.output_size == 4
  carry = network.initial_carry(2)
  shapes_of = lambda tree: jax.tree_util.tree_map(lambda a: a.shape, tree)
  assert shapes_of(carry) == {"layers_1_gru": (2, 5), "layers_2_lstm": ((2, 4), (2, 4))}
  assert all((np.asarray(leaf) == 0).all() for leaf in jax.tree_util.tree_leaves(carry))
  params = jax.jit(network.init)(KEY)
  step = jax.jit(network.apply)
  carry1, out1 = step(params, carry, floats(2, 4))
  carry2, _ = step(params, carry1, floats(2, 4))
  assert out1.shape == (2, 4) and shapes_of(carry1) == shapes_of(carry)
  np.testing.assert_array_equal(out1, carry1["layers_2_lstm"][1])  # the output is lstm's h
  for before, after in zip(jax.tree_util.tree_leaves(carry1), jax.tree_util.tree_leaves(carry2)):
    assert not np.allclose(before, after)
  with pytest.raises(ValueError, match="one batch axis"):
    network.apply(params, carry, floats(3, 2, 4))


def test_int_and_bool_states_count_as_numbers_without_embedding():
  network = build_network([], InputSpec((3,), "int", 4))
  carry, out = network.apply(network.init(KEY), (), np.array([[1, 2, 3]]))
  assert network.output_size == 3 and out.dtype == jnp.float32
  np.testing.assert_array_equal(out, [[1.0, 2.0, 3.0]])


def test_feedforward_has_empty_carry_and_takes_any_leading_axes():
  network = build_network([{"type": "dense", "size": 3}], VEC)
  params = {"layers_0_dense": {"kernel": floats(4, 3), "bias": floats(3)}}  # no init to compile
  assert network.initial_carry(4) == () and not network.recurrent
  x = floats(3, 2, 4)
  carry, out = network.apply(params, (), x)
  assert carry == () and out.shape == (3, 2, 3)
  np.testing.assert_allclose(out[1], network.apply(params, (), x[1])[1], rtol=1e-6)
  assert network.apply(params, (), x[0, 0])[1].shape == (3,)


def test_regularization_sums_l1_and_l2_of_the_chosen_kernels():
  network = build_network([{"type": "dense", "size": 3, "l2_regularization": 0.1},
                           {"type": "dense", "size": 2},
                           {"type": "linear", "size": 2, "l1_regularization": 0.5}], VEC)
  params = jax.tree_util.tree_map(lambda a: floats(*a.shape), jax.eval_shape(network.init, KEY))
  k0, k2 = params["layers_0_dense"]["kernel"], params["layers_2_linear"]["kernel"]
  np.testing.assert_allclose(network.regularization(params),
                             0.1 * (k0 ** 2).sum() + 0.5 * np.abs(k2).sum(), rtol=1e-5)
  plain = build_network([{"type": "dense", "size": 3}], VEC)
  assert float(plain.regularization(jax.eval_shape(plain.init, KEY))) == 0.0


# ----------------------------------------------------------------------------- several states

STATES = {"image": InputSpec((6, 6, 2), "float"), "position": InputSpec((3,), "float"),
          "inventory": InputSpec((2,), "int", 4)}
BRANCHES_SPEC = {
  "branches": {"image": [{"type": "conv2d", "size": 4, "window": 3}, {"type": "flatten"}],
               "position": [{"type": "dense", "size": 8}],
               "inventory": "auto"},
  "combine": "concat",
  "layers": [{"type": "dense", "size": 5}]}


def state_batch():
  return {"image": floats(2, 6, 6, 2), "position": floats(2, 3),
          "inventory": np.array([[0, 3], [2, 1]])}


@pytest.fixture(scope="module")
def branched():
  network = build_network(BRANCHES_SPEC, STATES)
  return network, jax.jit(network.init)(KEY)


def test_branches_shapes_and_gradients_reach_every_branch(branched):
  network, params = branched
  assert network.output_size == 5
  assert params["layers_0_dense"]["kernel"].shape == (6 * 6 * 4 + 8 + 2 * 32, 5)
  grads = jax.jit(jax.grad(lambda p: network.apply(p, (), state_batch())[1].sum()))(params)
  for name in ("branch_image_0_conv2d", "branch_position_0_dense",
               "branch_inventory_0_embedding", "layers_0_dense"):
    assert all(np.abs(leaf).sum() > 0 for leaf in jax.tree_util.tree_leaves(grads[name])), name


@pytest.mark.parametrize("combine, op", [("sum", np.add), ("product", np.multiply)])
def test_combine_sum_and_product(combine, op):
  states = {"a": InputSpec((3,), "float"), "b": InputSpec((2,), "float")}
  spec = {"branches": {"a": [{"type": "linear", "size": 4}], "b": [{"type": "linear", "size": 4}]},
          "combine": combine}
  x = {"a": floats(2, 3), "b": floats(2, 2)}
  network, params, _, out = run(spec, states, x)
  a, b = (x[n] @ np.asarray(params[f"branch_{n}_0_linear"]["kernel"])
          + params[f"branch_{n}_0_linear"]["bias"] for n in "ab")
  assert network.output_size == 4
  np.testing.assert_allclose(out, op(a, b), rtol=1e-5, atol=1e-6)


def test_auto_on_named_states():
  states = {"vector": VEC, "image": InputSpec((16, 16, 3), "float"),
            "item": InputSpec((), "int", 5)}
  x = {"vector": floats(2, 4), "image": floats(2, 16, 16, 3), "item": np.array([0, 4])}
  network, params, out = shapes("auto", states, x)
  layers = {b.name: [layer.type for layer in b.layers] for b in network.plan.branches}
  assert layers == {"vector": ["dense"], "image": ["conv2d"] * 3 + ["flatten"],
                    "item": ["embedding", "flatten"]}
  assert [layer.out_shape for layer in network.plan.branches[1].layers] == [
      (4, 4, 32), (2, 2, 64), (2, 2, 64), (256,)]
  assert params["branch_image_0_conv2d"]["kernel"] == (8, 8, 3, 32)
  assert params["branch_item_0_embedding"]["embedding"] == (5, 32)
  assert params["layers_0_dense"]["kernel"] == (64 + 256 + 32, 64)
  assert params["layers_1_dense"]["kernel"] == (64, 64)
  assert out == (2, 64) and network.output_size == 64


def test_auto_on_one_scalar_state():
  network, _, out = shapes("auto", InputSpec((), "float"), floats(2))
  assert out == (2, 64)
  assert [layer.type for layer in network.plan.branches[0].layers] == ["reshape", "dense"]


def test_json_round_trip_builds_the_same_network(branched):
  network, params = branched
  again = build_network(json.loads(json.dumps(BRANCHES_SPEC)), STATES)
  assert again.plan == network.plan and again.module == network.module
  x = state_batch()
  np.testing.assert_array_equal(jax.jit(network.apply)(params, (), x)[1],
                                jax.jit(again.apply)(params, (), x)[1])
  as_tuple = tuple(BRANCHES_SPEC["branches"]["position"])
  assert build_network(as_tuple, STATES["position"]).output_size == 8


def test_input_specs_from_spaces():
  space = gym.spaces.Dict({
      "box": gym.spaces.Box(0, 255, (4, 4, 3), np.uint8), "pick": gym.spaces.Discrete(3),
      "many": gym.spaces.MultiDiscrete([2, 5, 3]), "flags": gym.spaces.MultiBinary(4)})
  assert input_specs_from_space(space) == {
      "box": InputSpec((4, 4, 3), "float"), "pick": InputSpec((), "int", 3),
      "many": InputSpec((3,), "int", 5), "flags": InputSpec((4,), "bool")}
  assert input_specs_from_space(gym.spaces.Box(-1, 1, (2,))) == InputSpec((2,), "float")
  nested = gym.spaces.Dict({"a": gym.spaces.Dict({"b": gym.spaces.Discrete(2)})})
  with pytest.raises(NetworkSpecError, match="nested Dict"):
    input_specs_from_space(nested)
  network = build_network("auto", space)  # a space is accepted as inputs too
  assert network.output_size == 64 and set(network.inputs) == set(space.spaces)


# ----------------------------------------------------------------------------- errors

@pytest.mark.parametrize("spec, inputs, match", [
    ([{"type": "dence", "size": 3}], VEC, r"network\[0\]: unknown layer type 'dence' \(did you "
                                          r"mean 'dense'\?\)"),
    ([{"type": "dense", "sise": 3}], VEC, r"unknown key 'sise' \(did you mean 'size'\?\)"),
    ([{"type": "dense"}], VEC, r"network\[0\] \(dense\): missing required key 'size'"),
    ([{"type": "dense", "size": "64"}], VEC, r"key 'size' must be an int >= 1, got '64'"),
    ([{"type": "dense", "size": 3, "activation": "rel"}], VEC, r"did you mean 'relu'"),
    ([{"type": "dense", "size": 3}, {"type": "conv2d", "size": 4}], VEC,
     r"network\[1\]: layer 1 \(conv2d\) needs an input of rank 3 \[height, width, channels\], "
     r"got shape \(3,\)"),
    ([{"type": "dueling", "size": 2}, {"type": "dense", "size": 3}], VEC,
     r"network\[0\]: layer 0 \(dueling\): dueling must be the last layer"),
    ([{"type": "dropout", "rate": 1.0}], VEC, r"0 <= rate < 1"),
    ([{"type": "embedding", "size": 3}], VEC, r"embedding must be the first layer on an int"),
    ([{"type": "embedding", "size": 3}], InputSpec((), "int"), r"'num_values' is required"),
    ([{"type": "conv2d", "size": 2, "window": 5, "padding": "valid"}],
     InputSpec((3, 3, 1), "float"), r"larger than its input"),
    ([{"type": "gru", "size": 2}], InputSpec((3, 2), "float"), r"add \{'type': 'flatten'\}"),
    ([{"type": "layer_norm"}], InputSpec((), "float"),
     r"network\[0\]: layer 0 \(layer_norm\) needs an input with a feature axis, got a scalar"),
    ([{"type": "layer_norm", "epsilon": 0}], VEC, r"key 'epsilon' must be a number > 0, got 0"),
    ({"type": "dense", "size": 3}, VEC, r"a layered network is a list"),
    ("mlp", VEC, r"must be 'auto'"),
])
def test_spec_errors_name_the_place_and_the_fix(spec, inputs, match):
  with pytest.raises(NetworkSpecError, match=match):
    validate_network_spec(spec, inputs)


def test_errors_for_several_states():
  two = {"image": STATES["image"], "position": STATES["position"]}
  with pytest.raises(NetworkSpecError, match=r"a layer list takes one state.*'branches'"):
    build_network([{"type": "dense", "size": 3}], two)
  with pytest.raises(NetworkSpecError, match=r"no branch for states \['position'\]"):
    build_network({"branches": {"image": "auto"}}, two)
  with pytest.raises(NetworkSpecError, match=r"\['branches'\]\['positon'\]: no state of that "
                                             r"name \(did you mean 'position'\?\)"):
    build_network({"branches": {"image": "auto", "position": "auto", "positon": "auto"}}, two)
  unequal = {"branches": {"image": [{"type": "flatten"}], "position": "auto"}, "combine": "sum"}
  with pytest.raises(NetworkSpecError, match=r"'sum' needs branches of equal output size, got "
                                             r"\{'image': 72, 'position': 64\}"):
    build_network(unequal, two)
  bad_branch = {"branches": {"image": [{"type": "flatten"}, {"type": "conv2d", "size": 2}],
                             "position": "auto"}}
  with pytest.raises(NetworkSpecError, match=r"network\['branches'\]\['image'\]\[1\]: layer 1 "
                                             r"\(conv2d\) needs an input of rank 3"):
    build_network(bad_branch, two)
  with pytest.raises(NetworkSpecError, match=r"unknown key 'combin' \(did you mean 'combine'\?\)"):
    build_network({"branches": "auto", "combin": "sum"}, two)
  dueling_in_branch = {"branches": {"image": "auto", "position": [{"type": "dueling", "size": 2}]}}
  with pytest.raises(NetworkSpecError, match="put it last in 'layers'"):
    build_network(dueling_in_branch, two)
