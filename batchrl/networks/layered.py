"""TensorForce-style networks from JSON specs, with several named states as a first-class case.

A spec is one of (all JSON-friendly; the caller loads files):

1. A list of layer dicts, for ONE state: ``[{"type": "dense", "size": 32}, ...]``.
2. ``"auto"``: a branch per state chosen from its ``InputSpec``, then concat, then two
   ``dense(64, tanh)``. The per-state branch:

   ==========================  ===========================================================
   state                       branch
   ==========================  ===========================================================
   float, shape ``()``         reshape to ``(1,)``, dense(64, tanh)
   float, rank 1               dense(64, tanh)
   float, rank 2 ``[L, C]``    conv1d(32, window 3, relu, 'same'), flatten
   float, rank 3 ``[H, W, C]`` conv2d 32/8/4, 64/4/2, 64/3/1 (size/window/stride, relu,
                               'same' padding), flatten
   float, rank >= 4            flatten, dense(64, tanh)
   int or bool, any shape      embedding(32), flatten
   ==========================  ===========================================================

   So ``"auto"`` is ``{"branches": "auto", "combine": "concat", "layers": [{"type": "dense",
   "size": 64}, {"type": "dense", "size": 64}]}``.
3. Several states (TensorForce's register/retrieve layers, made plain)::

     {"branches": {"image": [{"type": "conv2d", "size": 16}, {"type": "flatten"}],
                   "position": [{"type": "dense", "size": 32}],
                   "inventory": "auto"},
      "combine": "concat",
      "layers": [{"type": "dense", "size": 64}]}

   Every state needs a branch (``"auto"`` as a branch is the table above; ``"branches":
   "auto"`` is auto for all). Each branch's output is flattened to a vector, then combined:
   ``concat`` (default), ``sum`` or ``product`` (these need equal branch sizes). ``layers``
   (optional) run on the combined vector.

Layers (``batchrl.networks.layers``): dense, linear, conv1d, conv2d, pool2d, pooling, flatten,
reshape, embedding, dropout, layer_norm, lstm, gru, nonlinearity, dueling, simba. Notes on their
semantics:

- dense / linear on a rank-0 input treat it as ``(1,)``; on rank >= 2 they act on the last axis.
- conv1d / conv2d run as image patches times the kernel on the CPU (``batchrl.networks.conv``:
  faster gradients there), XLA's convolution elsewhere; the parameters are flax's ``Conv``'s.
- ``layer_norm`` (keys ``epsilon`` = 1e-6, ``scale`` = true, ``bias`` = true) normalizes each
  sample over its last axis: ``(x - mean) / sqrt(var + epsilon) * scale + bias``, so over the
  features of a vector and over the channels at each position of a conv output. It has no
  activation: follow it with ``{"type": "nonlinearity", "name": ...}``, e.g. a PQN-style
  layer is ``dense`` with ``"activation": "none"``, ``layer_norm``, ``nonlinearity``.
- int / bool states count as numbers (float32) for every layer but ``embedding``, which must be
  the first layer of its branch and looks values ``0 .. num_values - 1`` up.
- ``pooling`` on ``[H, W, C]`` is ``pool2d``; on ``[L, C]`` it is global pooling over ``L``.
- lstm / gru process ONE time step ``[B, D] -> [B, size]`` and keep a carry (below).
- ``dueling`` (Q-values ``V + A - mean A``, ``size`` actions) must be the last layer.
- ``simba`` (keys ``size``, ``blocks`` = 1, ``activation`` = relu) is SimBa's encoder
  (``batchrl.networks.simba``): a dense layer to ``size``, ``blocks`` residual blocks of that
  width, a final LayerNorm; ``[D] -> [size]``. It takes a vector: on images, put conv2d layers
  and a flatten before it.
- The features are always flat ``[..., F]``: a spatial output is flattened at the end.

Shapes are inferred while validating, so ``validate_network_spec`` reports rank errors (and
typos, with the closest valid name) before any flax code runs.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

from batchrl.errors import did_you_mean
from batchrl.networks.layer_specs import (
  RECURRENT_TYPES,
  LayerPlan,
  NetworkSpecError,
  check_layer,
  infer_shape,
)
from batchrl.networks.layers import apply_layer, initial_layer_carry

COMBINES = ("concat", "sum", "product")
_BRANCH_FORMAT_KEYS = ("branches", "combine", "layers")
_SINGLE = "state"  # the branch name of a network built from one InputSpec


@dataclasses.dataclass(frozen=True)
class InputSpec:
  """One named state as the network sees it (per sample, no batch axis).

  ``kind`` is ``'float'``, ``'int'`` or ``'bool'``; ``num_values`` (int states) is how many
  categorical values there are, needed by ``embedding``.
  """

  shape: tuple[int, ...]
  kind: str
  num_values: int | None = None

  def __post_init__(self):
    shape = tuple(self.shape) if isinstance(self.shape, Sequence) else None
    if shape is None or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0
                            for n in shape):
      raise NetworkSpecError(f"InputSpec shape must be a tuple of ints >= 0, got {self.shape!r}")
    object.__setattr__(self, "shape", tuple(int(n) for n in shape))
    if self.kind not in ("float", "int", "bool"):
      raise NetworkSpecError(f"InputSpec kind must be 'float', 'int' or 'bool', got "
                             f"{self.kind!r}{did_you_mean(self.kind, ('float', 'int', 'bool'))}")
    if self.num_values is not None and (isinstance(self.num_values, bool) or not isinstance(
        self.num_values, (int, np.integer)) or self.num_values < 1):
      raise NetworkSpecError(f"InputSpec num_values must be an int >= 1 or None, got "
                             f"{self.num_values!r}")


def input_specs_from_space(space: gym.Space) -> dict[str, InputSpec] | InputSpec:
  """``InputSpec`` of a gymnasium space, or a dict of them for a ``Dict`` space (one level).

  Box (any dtype) -> float; Discrete -> int ``()``; MultiDiscrete -> int ``nvec.shape``;
  MultiBinary -> bool. ``num_values`` is ``max(start + n)`` so that values index an embedding
  directly (``None`` when a start is negative: then give ``num_values`` on the layer).
  """
  if isinstance(space, spaces.Dict):
    specs = {}
    for name, sub in space.spaces.items():
      if isinstance(sub, spaces.Dict):
        raise NetworkSpecError(f"state {name!r} is a nested Dict space; networks take one level "
                               "of named states, so flatten the names (e.g. 'a.b')")
      specs[name] = _leaf_input_spec(sub, f"state {name!r}")
    return specs
  return _leaf_input_spec(space, "the state")


def _leaf_input_spec(space: gym.Space, what: str) -> InputSpec:
  if isinstance(space, spaces.Box):
    return InputSpec(space.shape, "float")
  if isinstance(space, spaces.Discrete):
    start = int(space.start)
    return InputSpec((), "int", start + int(space.n) if start >= 0 else None)
  if isinstance(space, spaces.MultiDiscrete):
    top, start = np.asarray(space.nvec) + np.asarray(space.start), np.asarray(space.start)
    return InputSpec(tuple(space.nvec.shape), "int", int(top.max()) if (start >= 0).all() else None)
  if isinstance(space, spaces.MultiBinary):
    return InputSpec(tuple(space.shape), "bool")
  raise NetworkSpecError(f"{what}: {type(space).__name__} spaces are not supported; use Box, "
                         "Discrete, MultiDiscrete, MultiBinary or a Dict of them")


# ----------------------------------------------------------------------------- the plan

@dataclasses.dataclass(frozen=True)
class BranchPlan:
  """The layers one state goes through; ``out_shape`` per sample before flattening."""

  name: str
  state: InputSpec
  layers: tuple[LayerPlan, ...]
  out_shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class NetworkPlan:
  """A checked spec: branches (one per state), how they combine, the layers after."""

  branches: tuple[BranchPlan, ...]
  combine: str
  layers: tuple[LayerPlan, ...]
  output_size: int
  named: bool  # built from a dict of InputSpecs (inputs are then a dict too)

  @property
  def all_layers(self) -> tuple[LayerPlan, ...]:
    return tuple(layer for b in self.branches for layer in b.layers) + self.layers

  @property
  def recurrent_layers(self) -> tuple[LayerPlan, ...]:
    return tuple(layer for layer in self.all_layers if layer.type in RECURRENT_TYPES)


def _auto_branch(state: InputSpec) -> list[dict]:
  """The layers ``'auto'`` gives one state (see the module docstring)."""
  rank = len(state.shape)
  if state.kind != "float":
    return [{"type": "embedding", "size": 32}, {"type": "flatten"}]
  if rank == 0:
    return [{"type": "reshape", "shape": [1]}, {"type": "dense", "size": 64}]
  if rank == 1:
    return [{"type": "dense", "size": 64}]
  if rank == 2:
    return [{"type": "conv1d", "size": 32, "window": 3}, {"type": "flatten"}]
  if rank == 3:
    return [{"type": "conv2d", "size": 32, "window": 8, "stride": 4},
            {"type": "conv2d", "size": 64, "window": 4, "stride": 2},
            {"type": "conv2d", "size": 64, "window": 3, "stride": 1}, {"type": "flatten"}]
  return [{"type": "flatten"}, {"type": "dense", "size": 64}]


AUTO_SPEC = {"branches": "auto", "combine": "concat",
             "layers": [{"type": "dense", "size": 64}, {"type": "dense", "size": 64}]}


def _plan_layers(raw: Any, state: InputSpec, state_name: str, prefix: str, path: str,
                 dueling_last: bool) -> tuple[tuple[LayerPlan, ...], tuple[int, ...]]:
  """Check a layer list and walk its shapes from ``state``; ``(layers, out_shape)``."""
  if not isinstance(raw, (list, tuple)):
    raise NetworkSpecError(f"{path}: must be a list of layer dicts (or 'auto' for a branch), "
                           f"got {raw!r}")
  shape, plans = state.shape, []
  for i, layer in enumerate(raw):
    where = f"{path}[{i}]"
    kind, options = check_layer(layer, where)
    said = f"{where}: layer {i} ({kind})"
    if kind == "embedding":
      options["num_values"] = _embedding_values(options, state, state_name, said, first=i == 0)
    if kind == "dueling" and not (dueling_last and i == len(raw) - 1):
      raise NetworkSpecError(f"{said}: dueling must be the last layer of the network (it "
                             "outputs Q-values); in a {'branches': ...} spec put it last in "
                             "'layers'")
    out = infer_shape(kind, options, shape, said)
    plans.append(LayerPlan(kind, tuple(options.items()), shape, out, f"{prefix}_{i}_{kind}",
                           where))
    shape = out
  return tuple(plans), shape


def _embedding_values(options, state: InputSpec, state_name: str, said: str, first: bool) -> int:
  if not first or state.kind == "float":
    raise NetworkSpecError(
        f"{said}: embedding must be the first layer on an int or bool state (it looks the raw "
        f"values up); here its input is {'float' if first else 'the previous layer'}"
        f" (state {state_name!r} is {state.kind}); use dense for numbers")
  if options["num_values"] is not None:
    return options["num_values"]
  if state.kind == "bool":
    return 2
  if state.num_values is None:
    raise NetworkSpecError(f"{said}: 'num_values' is required: state {state_name!r} does not "
                           "say how many values it has")
  return state.num_values


def _check_inputs(inputs: Any) -> tuple[bool, dict[str, InputSpec]]:
  """``(named, {name: InputSpec})``; one InputSpec (or a non-Dict space) is not named."""
  if isinstance(inputs, gym.Space):
    inputs = input_specs_from_space(inputs)
  if isinstance(inputs, InputSpec):
    return False, {_SINGLE: inputs}
  if isinstance(inputs, Mapping) and inputs and all(
      isinstance(k, str) and isinstance(v, InputSpec) for k, v in inputs.items()):
    return True, dict(inputs)
  raise NetworkSpecError("inputs must be an InputSpec, a non-empty dict of name -> InputSpec, "
                         f"or a gymnasium space; got {inputs!r}")


def plan_network(spec: Any, inputs: Any) -> NetworkPlan:
  """Check ``spec`` against ``inputs`` and infer every shape; raises ``NetworkSpecError``."""
  named, states = _check_inputs(inputs)
  if isinstance(spec, str):
    if spec != "auto":
      raise NetworkSpecError(f"network: a string spec must be 'auto', got {spec!r} (load JSON "
                             "files before building: a spec is 'auto', a list or a dict)")
    return _plan_branches(AUTO_SPEC, states, named, "network ('auto')")
  if isinstance(spec, (list, tuple)):
    if len(states) != 1:
      raise NetworkSpecError(_one_state_message(states))
    (name, state), = states.items()
    layers, shape = _plan_layers(spec, state, name, "layers", "network", dueling_last=True)
    branch = BranchPlan(name, state, layers, shape)
    return NetworkPlan((branch,), "concat", (), math.prod(shape), named)
  if isinstance(spec, Mapping):
    return _plan_branches(spec, states, named, "network")
  raise NetworkSpecError(f"network: a spec is 'auto', a list of layer dicts or a dict with "
                         f"'branches'; got {type(spec).__name__}")


def _one_state_message(states: Mapping) -> str:
  example = {name: "auto" for name in states}
  return (f"network: a layer list takes one state, but there are {len(states)} "
          f"({', '.join(map(repr, states))}); for several states use {{'branches': {example}, "
          "'combine': 'concat', 'layers': [{'type': 'dense', 'size': 64}]}, putting a layer "
          "list in place of each 'auto' as you like, or the spec 'auto'")


def _plan_branches(spec: Mapping, states: dict[str, InputSpec], named: bool,
                   root: str) -> NetworkPlan:
  if "type" in spec and "branches" not in spec:
    raise NetworkSpecError(f"{root}: got a single layer dict; a layered network is a list: "
                           f"[{dict(spec)!r}]")
  for key in spec:
    if key not in _BRANCH_FORMAT_KEYS:
      raise NetworkSpecError(f"{root}: unknown key {key!r}"
                             f"{did_you_mean(key, _BRANCH_FORMAT_KEYS)}; valid keys: "
                             f"{list(_BRANCH_FORMAT_KEYS)}")
  branches = _branch_specs(spec, states, named, root)
  combine = spec.get("combine", "concat")
  if combine not in COMBINES:
    raise NetworkSpecError(f"{root}['combine'] must be one of {list(COMBINES)}, got "
                           f"{combine!r}{did_you_mean(combine, COMBINES)}")
  plans = []
  for name, state in states.items():
    raw = _auto_branch(state) if branches[name] == "auto" else branches[name]
    layers, shape = _plan_layers(raw, state, name, f"branch_{name}",
                                 f"{root}['branches'][{name!r}]", dueling_last=False)
    plans.append(BranchPlan(name, state, layers, shape))
  sizes = {b.name: math.prod(b.out_shape) for b in plans}
  if combine != "concat" and len(set(sizes.values())) > 1:
    raise NetworkSpecError(f"{root}['combine']: {combine!r} needs branches of equal output "
                           f"size, got {sizes}; use 'concat' or change the branch sizes")
  size = sum(sizes.values()) if combine == "concat" else next(iter(sizes.values()))
  layers, shape = _plan_layers(spec.get("layers", ()), InputSpec((size,), "float"), "combined",
                               "layers", f"{root}['layers']", dueling_last=True)
  return NetworkPlan(tuple(plans), combine, layers, math.prod(shape), named)


def _branch_specs(spec: Mapping, states: dict[str, InputSpec], named: bool, root: str) -> dict:
  branches = spec.get("branches")
  if branches == "auto":
    return {name: "auto" for name in states}
  if not named:
    raise NetworkSpecError(f"{root}: {{'branches': ...}} needs named states (a dict of "
                           "InputSpec); for one state use a list of layers or 'auto'")
  if not isinstance(branches, Mapping):
    raise NetworkSpecError(f"{root}['branches'] must be 'auto' or a dict state name -> layer "
                           f"list or 'auto', got {branches!r}")
  for name in branches:
    if name not in states:
      raise NetworkSpecError(f"{root}['branches'][{name!r}]: no state of that name"
                             f"{did_you_mean(name, states)}; states: {list(states)}")
  missing = [name for name in states if name not in branches]
  if missing:
    raise NetworkSpecError(f"{root}['branches'] has no branch for states {missing}; every "
                           "state needs one (give 'auto' for the default branch, e.g. "
                           f"{{{missing[0]!r}: 'auto'}})")
  return dict(branches)


def validate_network_spec(spec: Any, inputs: Any) -> None:
  """Raise ``NetworkSpecError`` (path, key, closest valid name) if ``spec`` cannot be built."""
  plan_network(spec, inputs)


# ----------------------------------------------------------------------------- flax

def _batch_inputs(plan: NetworkPlan, inputs: Any) -> tuple[list, tuple[int, ...]]:
  """Each state as ``[N, *shape]`` (all leading axes folded into ``N``) and those axes."""
  if not plan.named:
    if isinstance(inputs, Mapping):
      raise ValueError("this network was built from one InputSpec: pass one array "
                       "[B, *shape], not a dict")
    inputs = {_SINGLE: inputs}
  elif not isinstance(inputs, Mapping):
    raise ValueError(f"this network takes a dict of states {[b.name for b in plan.branches]}, "
                     f"got {type(inputs).__name__}")
  arrays, lead = [], None
  for branch in plan.branches:
    if branch.name not in inputs:
      raise ValueError(f"inputs have no state {branch.name!r}; got {sorted(inputs)}")
    x, shape = jnp.asarray(inputs[branch.name]), branch.state.shape
    axes = x.ndim - len(shape)
    if axes < 0 or tuple(x.shape[axes:]) != shape:
      raise ValueError(f"state {branch.name!r} has shape {x.shape}; expected [..., *{shape}]")
    if lead is not None and x.shape[:axes] != lead:
      raise ValueError(f"state {branch.name!r} has batch axes {x.shape[:axes]}, others {lead}")
    lead = x.shape[:axes]
    arrays.append(x.reshape((math.prod(lead),) + shape))
  return arrays, lead


def _run_layers(layers, x, carry: Mapping, new_carry: dict, deterministic: bool):
  for layer in layers:
    x, layer_carry = apply_layer(layer, x, carry.get(layer.name), deterministic)
    if layer_carry is not None:
      new_carry[layer.name] = layer_carry
  return x


class LayeredModule(nn.Module):
  """``(carry, inputs, *, deterministic) -> (carry, features[..., F])`` for a ``NetworkPlan``.

  ``inputs``: one array ``[..., *shape]`` or a dict of them (leading axes are batch axes; a
  recurrent network takes exactly one, ``[B, *shape]``, one time step). ``carry``: ``()`` when
  not recurrent, else a dict layer name -> ``[B, size]`` (gru) or ``(c, h)`` (lstm).
  """

  plan: NetworkPlan

  @nn.compact
  def __call__(self, carry, inputs, *, deterministic: bool = True):
    plan = self.plan
    arrays, lead = _batch_inputs(plan, inputs)
    recurrent = bool(plan.recurrent_layers)
    if recurrent and len(lead) != 1:
      raise ValueError(f"a recurrent network takes one time step with one batch axis "
                       f"[B, *shape]; got batch axes {lead}")
    carry_in, new_carry = (carry if recurrent else {}), {}
    outs = []
    for branch, x in zip(plan.branches, arrays):
      y = _run_layers(branch.layers, x, carry_in, new_carry, deterministic)
      outs.append(y.reshape((y.shape[0], -1)).astype(jnp.float32))
    if plan.combine == "concat":
      x = jnp.concatenate(outs, axis=-1) if len(outs) > 1 else outs[0]
    else:
      x = functools.reduce(jnp.add if plan.combine == "sum" else jnp.multiply, outs)
    x = _run_layers(plan.layers, x, carry_in, new_carry, deterministic)
    features = x.reshape(lead + (plan.output_size,))
    return (new_carry if recurrent else ()), features


_DUMMY_DTYPES = {"float": jnp.float32, "int": jnp.int32, "bool": jnp.bool_}


@dataclasses.dataclass(frozen=True)
class Network:
  """A built network: a flax module plus what callers need to drive it.

  ``apply(params, carry, inputs) -> (carry, features[..., output_size])``; see ``LayeredModule``
  for the shapes of ``inputs`` and ``carry``.
  """

  module: nn.Module
  output_size: int
  recurrent: bool
  plan: NetworkPlan

  @property
  def inputs(self) -> InputSpec | dict[str, InputSpec]:
    states = {b.name: b.state for b in self.plan.branches}
    return states if self.plan.named else states[_SINGLE]

  def init(self, key: jax.Array) -> Any:
    """Fresh parameters (the ``params`` collection)."""
    dummy = {b.name: jnp.zeros((1,) + b.state.shape, _DUMMY_DTYPES[b.state.kind])
             for b in self.plan.branches}
    inputs = dummy if self.plan.named else dummy[_SINGLE]
    variables = self.module.init({"params": key}, self.initial_carry(1), inputs)
    return variables.get("params", {})

  def apply(self, params, carry, inputs, *, deterministic: bool = True,
            dropout_key: jax.Array | None = None):
    """``(carry, features[..., F])``; dropout is active only with ``deterministic=False``."""
    has_dropout = any(layer.type == "dropout" for layer in self.plan.all_layers)
    if not deterministic and has_dropout and dropout_key is None:
      raise ValueError("deterministic=False turns dropout on and needs dropout_key=...")
    rngs = {"dropout": dropout_key} if dropout_key is not None and has_dropout else {}
    return self.module.apply({"params": params}, carry, inputs, deterministic=deterministic,
                             rngs=rngs)

  def initial_carry(self, batch: int) -> Any:
    """``()`` when not recurrent; else zeros per recurrent layer, leading axis ``[batch]``."""
    if not self.recurrent:
      return ()
    return {layer.name: initial_layer_carry(layer, batch) for layer in self.plan.recurrent_layers}

  def regularization(self, params) -> jax.Array:
    """``sum l1 * |W| + l2 * W**2`` over the kernels of layers that set those keys."""
    total = jnp.zeros((), jnp.float32)
    for layer in self.plan.all_layers:
      options = dict(layer.options)
      l1, l2 = options.get("l1_regularization", 0.0), options.get("l2_regularization", 0.0)
      if l1 or l2:
        kernel = params[layer.name]["kernel"]
        total = total + l1 * jnp.abs(kernel).sum() + l2 * jnp.square(kernel).sum()
    return total


def build_network(spec: Any, inputs: InputSpec | Mapping[str, InputSpec] | gym.Space) -> Network:
  """A ``Network`` from a spec (``'auto'``, a layer list or a branches dict; see module doc)."""
  plan = plan_network(spec, inputs)
  return Network(LayeredModule(plan), plan.output_size, bool(plan.recurrent_layers), plan)
