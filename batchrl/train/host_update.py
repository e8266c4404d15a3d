"""An update given as pure pieces (``Model.update_pieces``) run from the host: each piece a
top-level compiled program, the independent calls side by side over the cores.

Why: XLA:CPU runs convolution gradients about 10x slower inside any ``lax.scan``/``while``
body than in a top-level program (jax issue #12868; measured here, a Nature-CNN Adam step of
128 frames: 0.21 CPU-s top-level, 3.5 CPU-s inside a scan), and a training chunk holds the
update inside its loop of iterations. ``ppo_atari`` on the CPU (``batchrl.configs.atari``).

- ``on_host(model)``: whether drivers run the model's update so: its pieces ask for it
  (``loop='host'``), or leave it to the driver (``'auto'``) on the CPU backend.
- ``schedule(model)``: the model with ``update`` run so when ``on_host``, through one
  ``jax.pure_callback`` (``through_host``): it may still be called from a compiled program,
  and under ``vmap`` (one seed after the other). The drivers build their models with it
  (``batchrl.train.build.build_model``, the object API's runtime), and
  ``fused.make_run_chunk`` runs each such update as its own top-level program between
  compiled rollouts.
- ``host_update(pieces, state)``: the loop. The same steps in the same order as the agent's
  own ``update`` (``batchrl.agents.update_pieces.scan_update``), so the same result up to
  float rounding (tested).
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from batchrl import measured, programs
from batchrl.agents.core import Model
from batchrl.agents.update_pieces import Prepared, UpdatePieces, minibatch_step, scan_update
from batchrl.networks import conv
from batchrl.parts import LaneSplit, PartRunner, largest_divisor


def on_host(model: Model) -> bool:
  """Whether drivers run ``model``'s update from the host (``host_update``): its pieces'
  ``loop`` is ``'host'``, or ``'auto'`` on the CPU backend."""
  pieces = model.update_pieces
  if pieces is None:
    return False
  if pieces.loop == "auto":
    return jax.default_backend() == "cpu"
  return pieces.loop == "host"


def schedule(model: Model) -> Model:
  """``model`` with its update run from the host when ``on_host`` (else ``model``); a model
  scheduled already is scheduled the same way again (its pieces are unchanged)."""
  if not on_host(model):
    return model
  return dataclasses.replace(model, update=functools.partial(through_host,
                                                             model.update_pieces))


def through_host(pieces: UpdatePieces, state):
  """``host_update`` as one ``pure_callback``; RNG keys cross as their raw data (callbacks
  take plain arrays only)."""
  leaves, treedef = jax.tree.flatten(state)
  impls = [jax.random.key_impl(x) if _is_key(x) else None for x in leaves]

  def raw(s):
    return jax.tree.unflatten(treedef, [x if impl is None else jax.random.key_data(x)
                                        for x, impl in zip(jax.tree.leaves(s), impls)])

  def typed(s):
    return jax.tree.unflatten(treedef, [
        x if impl is None else jax.random.wrap_key_data(x, impl=impl)
        for x, impl in zip(jax.tree.leaves(s), impls)])

  def on_the_host(raw_state):
    # on the device once: every piece takes the state (its unused arrays cost nothing there)
    new_state, metrics = host_update(pieces, jax.device_put(typed(raw_state)))
    return jax.device_get((raw(new_state), metrics))

  def scan_raw(s):
    new_state, metrics = scan_update(pieces, s)
    return raw(new_state), metrics

  shapes = jax.eval_shape(scan_raw, state)
  new_state, metrics = jax.pure_callback(on_the_host, shapes, raw(state),
                                         vmap_method="sequential")
  return typed(new_state), metrics


def _is_key(x) -> bool:
  return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def host_update(pieces: UpdatePieces, state):
  """The update as a host loop of top-level compiled calls: ``prepare`` (its values in
  chunks, ``values_in_chunks``), every minibatch step (its gradient in equal shares over
  the cores, ``gradient_shares``), ``finish``."""
  prepared = _prepare(pieces, state, values_in_chunks(pieces, state))
  shapes = _batches.eval_shape(pieces, state, prepared.data, prepared.epoch_keys[0])
  shares = gradient_shares(pieces, jax.tree.leaves(shapes)[0].shape[1])
  with PartRunner(LaneSplit.for_backend(shares.count)) as runner:
    carry, steps = _epochs(pieces, state, prepared, shares, runner)
  metrics = {name: [m[name] for m in steps] for name in steps[0]}
  return _finish(pieces, state, prepared.data, carry, metrics)


def _epochs(pieces: UpdatePieces, state, prepared: Prepared, shares: LaneSplit,
            runner: PartRunner):
  """Every epoch's minibatch steps in order: the final carry and each step's metrics."""
  carry, steps = prepared.carry, []
  for epoch_key in prepared.epoch_keys:
    batches = _batches(pieces, state, prepared.data, epoch_key)
    for i in range(jax.tree.leaves(batches)[0].shape[0]):
      batch = jax.tree.map(lambda x: x[i], batches)
      if shares.count == 1:
        carry, metrics = _step(pieces, state, carry, batch)
      else:
        each = runner.map(functools.partial(_gradients, pieces, state, carry),
                          shares.split(batch))
        carry, metrics = _apply_mean(pieces, state, carry, *map(list, zip(*each)))
      steps.append(metrics)
  return carry, steps


def values_in_chunks(pieces: UpdatePieces, state) -> tuple:
  """The values of each of ``pieces.value_frames(state)`` ``[T, B]``, in equal calls of at
  most ``measured.VALUE_CHUNK_FRAMES`` frames (``T`` cut at a divisor; at least one step per
  call) over one thread per usable core. The same values, up to float rounding, as
  ``prepare``'s own."""
  frames = pieces.value_frames(state)
  steps, batch = jax.tree.leaves(frames[0])[0].shape[:2]
  per_call = largest_divisor(steps, measured.VALUE_CHUNK_FRAMES // batch)
  cuts = [(start, start + per_call) for start in range(0, steps, per_call)]

  def values_of(tree, runner):
    call = lambda cut: _values(pieces, state, jax.tree.map(lambda x: x[cut[0]:cut[1]], tree))
    return jnp.concatenate(runner.map(call, cuts))

  with PartRunner(LaneSplit.for_backend(len(cuts))) as runner:
    return tuple(values_of(tree, runner) for tree in frames)


def gradient_shares(pieces: UpdatePieces, items: int) -> LaneSplit:
  """The equal shares ``host_update`` differentiates a minibatch of ``items`` items in, side
  by side on the usable cores (it averages their gradients): shares of at most
  ``measured.GRADIENT_SHARE_FRAMES`` frames (at least one item), a multiple of the cores
  that divide the minibatch. Only where the loss is a mean over items
  (``pieces.mean_of_shares``): otherwise whole minibatches."""
  if not pieces.mean_of_shares:
    return LaneSplit(items, 1)
  threads = LaneSplit.unpadded(items).count
  share = largest_divisor(items // threads,
                          measured.GRADIENT_SHARE_FRAMES // pieces.item_frames)
  return LaneSplit(items, items // share)


def _top_level(fun):
  """``fun`` traced with ``conv.top_level_program()``: its convolutions as XLA's own, the
  faster outside a loop (``batchrl.networks.conv``)."""
  @functools.wraps(fun)
  def traced(*args):
    with conv.top_level_program():
      return fun(*args)
  return traced


# The pieces as top-level compiled programs (the pieces static).
@functools.partial(programs.jit, kind="loop", static_argnums=0)
@_top_level
def _prepare(pieces: UpdatePieces, state, values) -> Prepared:
  return pieces.prepare(state, values)


@functools.partial(programs.jit, kind="loop", static_argnums=0)
@_top_level
def _values(pieces: UpdatePieces, state, frames):
  return pieces.values(state, frames)


@functools.partial(programs.jit, kind="loop", static_argnums=0)
def _batches(pieces: UpdatePieces, state, data, key):
  return pieces.batches(state, data, key)


@functools.partial(programs.jit, kind="loop", static_argnums=0)
@_top_level
def _step(pieces: UpdatePieces, state, carry, batch):
  return minibatch_step(pieces, state, carry, batch)


@functools.partial(programs.jit, kind="loop", static_argnums=0)
@_top_level
def _gradients(pieces: UpdatePieces, state, carry, share):
  return pieces.gradients(state, carry, share)


@functools.partial(programs.jit, kind="loop", static_argnums=0)
def _apply_mean(pieces: UpdatePieces, state, carry, grads: list, metrics: list):
  mean = lambda *shares: jnp.mean(jnp.stack(shares), axis=0)
  return pieces.apply(state, carry, jax.tree.map(mean, *grads), jax.tree.map(mean, *metrics))


@functools.partial(programs.jit, kind="loop", static_argnums=0)
@_top_level
def _finish(pieces: UpdatePieces, state, data, carry, metrics):
  metrics = jax.tree.map(lambda m: jnp.mean(jnp.stack(m)), metrics,
                         is_leaf=lambda m: isinstance(m, list))
  return pieces.finish(state, data, carry, metrics)
