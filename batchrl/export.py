"""A trained policy as a file that runs without batchrl: ``agent.export(path)``, ``batchrl
export`` (``batchrl.export_run``).

What is exported is the deterministic action of independent states, exactly the computation
``agent.act(states, deterministic=True, independent=True)`` runs
(``batchrl.agent.runtime.act_fresh``, whose ``export_agent`` writes an agent's policy):
state preprocessing and observation normalization with the statistics learned so far, the
network, and the mode of the policy (argmax for int actions with action masks honoured, the
mode clipped to the bounds for float actions, as each model does). The agent's state is
baked in as constants: the file is a pure function of the states.

Formats:

- ``"onnx"`` (default): an ONNX model. Inputs: ``states`` (``[batch, *shape]``: float32 for
  float states, int32 for int states, bool for bool states), or one input per named state
  for dict states, an action mask (``action_mask``, ``<action>_mask``) being one of them.
  Outputs: ``actions`` (``[batch, *shape]``), or ``actions/<name>`` per named action.
- ``"jax"``: ``jax.export``'s serialized StableHLO, lowered for CPU, CUDA and TPU:
  ``jax.export.deserialize(data).call(states)`` returns the actions (an array, or a dict for
  named actions) with only ``jax`` installed. The batch size is symbolic in both.

Route to ONNX: ``jax2onnx`` (``pip install "batchrl[export]"``) converts the jaxpr of that
same function, so the file is the traced computation itself, not a second implementation of
each network, preprocessor and head that could drift from it; it handles every op our
models' deterministic acts use (dense, conv, tanh, argmax, where, clip, normalization), and
the tests check each agent family against ``agent.act`` through onnxruntime. Recurrent
policies (carries in and out) are not exported.
"""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import jax
import jax.extend
import numpy as np

from batchrl.errors import UserInputError, missing_extra
from batchrl.files import write_atomic
from batchrl.specs import DTYPES, named_spaces, space_kind

FORMATS = ("onnx", "jax")
JAX_PLATFORMS = ("cpu", "cuda", "tpu")  # a serialized export runs on any of these
# opset 17 in IR version 8 (what onnx 1.12 wrote): onnxruntime >= 1.12 loads the file, so
# older serving stacks do too; our graphs use nothing newer
ONNX_OPSET = 17
ONNX_IR_VERSION = 8
STATES = "states"  # the input of a single unnamed state
ACTIONS = "actions"  # the output of a single unnamed action; ``actions/<name>`` per named one


@dataclasses.dataclass(frozen=True)
class Policy:
  """A deterministic policy as a pure function, its parameters inside.

  Attributes:
    act: states ``[B, *shape]`` (an array, or a dict by state name) -> actions ``[B, ...]``
      (an array, or a dict by action name).
    inputs: ``(name, shape without the batch axis, dtype)`` per state, in input order;
      the name is ``STATES`` for a single unnamed state.
    named: whether ``act`` takes a dict of named states.
  """

  act: Callable[[Any], Any]
  inputs: tuple[tuple[str, tuple, np.dtype], ...]
  named: bool


def model_policy(model, model_state, observation_space: gym.Space) -> Policy:
  """The policy of a ``batchrl train`` run: its ``Model`` and model state, for
  observations of ``observation_space`` (one env's)."""
  if jax.tree.leaves(getattr(model_state, "carry", ())):
    raise UserInputError("exporting a recurrent policy is not supported (its carry would "
                         "be an input and an output); export a feed-forward agent.")
  key = jax.random.key(0)

  def act(states):
    return model.act(model_state, states, key, True)[0]

  return space_policy(act, observation_space)


def space_policy(act: Callable[[Any], Any], observation_space: gym.Space) -> Policy:
  """``act`` as the ``Policy`` of states of ``observation_space`` (one env's, or a
  ``batchrl.Agent``'s states)."""
  return Policy(act, _inputs(observation_space), named_spaces(observation_space) is not None)


def check_format(format: str) -> None:
  if format not in FORMATS:
    raise UserInputError(f"unknown export format {format!r}; choose one of "
                         f"{', '.join(FORMATS)}.")


def export_policy(policy: Policy, path, format: str = "onnx") -> Path:
  """Writes ``policy`` to ``path`` (parent directories made, written whole or not at all);
  returns the path."""
  check_format(format)
  path = Path(path)
  if path.is_dir():
    raise UserInputError(f"{path} is a directory: give the file to write, e.g. "
                         f"{path / 'policy.onnx'}.")
  data = onnx_bytes(policy) if format == "onnx" else jax_bytes(policy)
  return write_atomic(path, data)


def jax_bytes(policy: Policy) -> bytes:
  """``jax.export``'s serialization of ``policy.act`` for a symbolic batch size."""
  args = _unflatten(policy, _specs(policy))
  exported = jax.export.export(jax.jit(policy.act), platforms=JAX_PLATFORMS)(args)
  return bytes(exported.serialize())


def onnx_bytes(policy: Policy) -> bytes:
  """The ONNX model of ``policy.act`` (``jax2onnx``), checked by ``onnx.checker``."""
  onnx, to_onnx = _onnx_tools()
  specs = _specs(policy)
  outputs = jax.eval_shape(policy.act, _unflatten(policy, specs))
  names = [ACTIONS] if not isinstance(outputs, dict) else [
      f"{ACTIONS}/{name}" for name in sorted(outputs)]

  def flat(*arrays):
    actions = policy.act(_unflatten(policy, arrays))
    if not isinstance(actions, dict):
      return actions
    return tuple(actions[name] for name in sorted(actions))

  # Traced here by jax alone, then replayed primitive by primitive under jax2onnx: what is
  # converted is the jaxpr jax runs, untouched by jax2onnx's patches of jnp and flax calls.
  replay = jax.extend.core.jaxpr_as_fun(jax.make_jaxpr(flat)(*specs))

  with _jax_plugins_only():
    model = to_onnx(replay, specs, model_name="batchrl_policy", opset=ONNX_OPSET,
                    input_names=[name for name, _, _ in policy.inputs], output_names=names)
  model.ir_version = min(model.ir_version, ONNX_IR_VERSION)
  onnx.checker.check_model(model)
  return model.SerializeToString()


def _onnx_tools():
  """``(onnx, jax2onnx.to_onnx)``: the optional ``export`` extra, imported where it is used
  so that batchrl runs without it."""
  try:
    import onnx
    from jax2onnx import to_onnx
  except ImportError as e:
    raise missing_extra("exporting to ONNX", "export", e) from e
  return onnx, to_onnx


@contextlib.contextmanager
def _jax_plugins_only():
  """Loads only jax2onnx's plugins for jax primitives, for the duration of one conversion.

  On its first conversion jax2onnx imports all of its plugins, and some (Equinox, Flax NNX
  examples) build and compile modules at import: about a minute on 2 cores, measured with
  0.17.1. Our policies trace to jax primitives alone, whose plugins import in seconds. The
  registry is marked full only while we convert, so a later conversion of the user's own
  (Equinox, NNX) models in this process still loads the rest. Where jax2onnx's internals
  differ (another version), its own full import runs: slower, never wrong.
  """
  try:
    from jax2onnx.plugins import plugin_system as plugins
  except ImportError:
    plugins = None
  loaded = getattr(plugins, "_already_imported_plugins", None)
  import_tree = getattr(plugins, "_import_tree", None)
  if loaded is not False or import_tree is None:
    yield
    return
  import_tree(Path(plugins.__file__).parent / "jax", "jax2onnx.plugins.jax")
  plugins._already_imported_plugins = True
  try:
    yield
  finally:
    plugins._already_imported_plugins = False


def _inputs(space: gym.Space) -> tuple[tuple[str, tuple, np.dtype], ...]:
  named = named_spaces(space)
  leaves = {STATES: space} if named is None else named
  return tuple((name, tuple(sub.shape), np.dtype(DTYPES[space_kind(sub)]))
               for name, sub in leaves.items())


def _specs(policy: Policy) -> list[jax.ShapeDtypeStruct]:
  """One abstract input per state with a symbolic batch axis (a fresh symbol per export:
  a trace under one converter is never reused by another)."""
  batch, = jax.export.symbolic_shape("batch")
  return [jax.ShapeDtypeStruct((batch,) + shape, dtype) for _, shape, dtype in policy.inputs]


def _unflatten(policy: Policy, arrays):
  """Inputs in order -> what ``policy.act`` takes (one array, or a dict by name)."""
  if not policy.named:
    return arrays[0]
  return {name: array for (name, _, _), array in zip(policy.inputs, arrays)}
