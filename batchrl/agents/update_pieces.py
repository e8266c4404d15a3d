"""An update of epochs of minibatch optimizer steps as pure pieces, and their composition.

An on-policy update (PPO's) is: prepare the rollout (values before the update, returns,
advantages) -> for each epoch, for each minibatch, a gradient and an optimizer step -> finish
(the new policy's KL, adapted coefficients, metrics). ``scan_update`` composes the pieces into
the update as one compiled computation (``lax.scan`` over epochs and minibatches): that is
the agent's ``Model.update``. How else the same pieces may be run (each as a top-level program,
a minibatch's gradient in shares over threads, the whole through a host callback) is a
driver's choice (``batchrl.train.host_update``); nothing here schedules anything.

Shapes: ``T`` steps, ``B`` envs of the rollout; ``E`` epochs; ``M`` minibatches of ``N``
items (sequences) each.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp

PyTree = Any


class Prepared(NamedTuple):
  """What the minibatch steps start from (``UpdatePieces.prepare``)."""

  data: PyTree  # the training data and whatever ``finish`` needs of the preparation
  epoch_keys: jax.Array  # [E] one key per epoch (its minibatches' shuffle)
  carry: PyTree  # what the steps update, e.g. ``(params, opt_state)``


@dataclasses.dataclass(frozen=True)
class UpdatePieces:
  """The pure pieces of an update; each takes the state the update started from first.

  Attributes:
    prepare: ``(state, values) -> Prepared``; ``values`` is a tuple with the values of each
      of ``value_frames(state)`` (``[T, B]`` each) when computed already, or None (computed
      inside).
    value_frames: ``(state) -> tuple`` of ``[T, B, ...]`` trees whose values ``prepare``
      needs.
    values: ``(state, frames[t, B, ...]) -> [t, B]``: the values of any ``t`` steps of one
      of ``value_frames``, under the parameters before the update.
    batches: ``(state, data, key) -> [M, N, ...]``: one epoch's minibatches.
    gradients: ``(state, carry, batch[n, ...]) -> (grads, metrics)`` of the loss at the
      carry's parameters on a minibatch, or on an equal share of one (``mean_of_shares``).
    apply: ``(state, carry, grads, metrics) -> (carry, metrics)``: one optimizer step.
    finish: ``(state, data, carry, metrics) -> (state, metrics)``: the new state, given the
      steps' metrics averaged over all steps.
    mean_of_shares: whether the gradients and metrics of equal shares of a minibatch average
      to the whole minibatch's (every term of the loss a mean over items).
    item_frames: frames (env steps) in one item of a minibatch (a sequence's length).
    loop: what the agent's config asks of drivers (a declaration: drivers decide):
      ``"scan"`` runs ``scan_update``; ``"host"`` the pieces as top-level programs;
      ``"auto"`` leaves the choice to the driver.
  """

  prepare: Callable[[PyTree, tuple | None], Prepared]
  value_frames: Callable[[PyTree], tuple]
  values: Callable[[PyTree, PyTree], jax.Array]
  batches: Callable[[PyTree, PyTree, jax.Array], PyTree]
  gradients: Callable[[PyTree, PyTree, PyTree], tuple[PyTree, dict]]
  apply: Callable[[PyTree, PyTree, PyTree, dict], tuple[PyTree, dict]]
  finish: Callable[[PyTree, PyTree, PyTree, dict], tuple[PyTree, dict]]
  mean_of_shares: bool
  item_frames: int
  loop: Literal["scan", "host", "auto"] = "scan"


def minibatch_step(pieces: UpdatePieces, state, carry, batch):
  """One optimizer step on one minibatch: its gradient, then ``apply``."""
  grads, metrics = pieces.gradients(state, carry, batch)
  return pieces.apply(state, carry, grads, metrics)


def scan_update(pieces: UpdatePieces, state) -> tuple[PyTree, dict]:
  """The update: ``prepare``, then ``E`` epochs of ``M`` minibatch steps in one ``lax.scan``,
  then ``finish`` with the steps' metrics averaged."""
  prepared = pieces.prepare(state, None)

  def step(carry, batch):
    return minibatch_step(pieces, state, carry, batch)

  def epoch(carry, key):
    return jax.lax.scan(step, carry, pieces.batches(state, prepared.data, key))

  carry, metrics = jax.lax.scan(epoch, prepared.carry, prepared.epoch_keys)
  return pieces.finish(state, prepared.data, carry, jax.tree.map(jnp.mean, metrics))
