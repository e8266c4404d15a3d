"""Which leaves of a model's state its ``act`` reads and its ``store`` writes, read off
their jaxprs.

``batchrl.Agent``'s fast path may act before the previous transition is stored only when
``act`` reads nothing ``store`` writes; a distributed learner ships runners only the leaves
``act`` reads.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.extend.core import Literal

from batchrl.agents.core import Model, Transition


def _live_inputs(closed) -> list[bool]:
  """Per input of a traced function: whether any output depends on it (a backward pass
  over the top-level equations; a nested call counts all its inputs, which only errs on
  the side of 'read')."""
  jaxpr = closed.jaxpr
  live = {v for v in jaxpr.outvars if not isinstance(v, Literal)}
  for eqn in reversed(jaxpr.eqns):
    if any(v in live for v in eqn.outvars):
      live.update(v for v in eqn.invars if not isinstance(v, Literal))
  return [v in live for v in jaxpr.invars]


def act_reads(model: Model, model_state, obs, key=None) -> list[bool]:
  """Per leaf of ``model_state``: whether ``model.act`` (either mode) reads it. ``obs`` may
  be arrays or ``ShapeDtypeStruct``s of a batch; ``key`` a key like those ``act`` gets."""
  key = jax.random.key(0) if key is None else key
  count = len(jax.tree.leaves(model_state))
  reads = [False] * count
  for deterministic in (False, True):
    closed = jax.make_jaxpr(lambda m, o, k, d=deterministic: model.act(m, o, k, d))(
        model_state, obs, key)
    reads = [a or b for a, b in zip(reads, _live_inputs(closed)[:count])]
  return reads


def store_writes(model: Model, model_state, obs, action, extras) -> list[bool]:
  """Per leaf of ``model_state``: whether ``model.store`` may return something else than
  it got, storing a ``[N]`` row of transitions shaped like ``obs``, ``action``, ``extras``."""
  flags = jnp.zeros((len(jax.tree.leaves(action)[0]),), jnp.bool_)
  transition = Transition(obs, action, flags.astype(jnp.float32), flags, flags, obs, extras)
  closed = jax.make_jaxpr(model.store)(model_state, transition)
  inputs = closed.jaxpr.invars[:len(jax.tree.leaves(model_state))]
  outputs = closed.jaxpr.outvars
  if len(outputs) != len(inputs):
    return [True] * len(inputs)
  return [o is not i for o, i in zip(outputs, inputs)]
