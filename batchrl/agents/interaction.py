"""The device side of ``batchrl.Agent``: pure functions over one ``AgentState`` pytree.

The object API keeps ``N`` streams (``parallel_interactions``). Each stream alternates
``act`` and ``observe``. A transition ``(s, a, r, terminal, s')`` is complete only when its
next state ``s'`` is known: at the stream's next ``act`` (or, for a terminal step, from
``next_states`` given to ``observe``). So rewards wait on the host and every transition is
*committed* to the model inside the next ``act`` of its stream, fused with preprocessing and
acting into one compiled call: one device call per step.

The model stores ``[N]`` rows (one transition of every stream). When all streams act
together (a batched runner, or ``N = 1``) their transitions form a row at once
(``commit='direct'``). Streams that act on their own (``parallel=[i]``, threads) go
through a small staging area ``[K, N]``; a row is handed to the model once every stream
has a staged transition (``commit='staged'``).

Shapes: ``N`` streams, ``k`` streams acting in this call, ``K`` staging depth.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from batchrl.agents.core import Model, Transition

PyTree = Any


class AgentState(NamedTuple):
  """Everything the object API keeps on the device; saved whole by ``Agent.save``."""

  model: PyTree
  preprocess: PyTree  # per named state: the stack's state (frames [N, ...], statistics)
  reward_preprocess: PyTree
  explore: PyTree  # per action: exploration state (OU noise [N, ...])
  key: jax.Array
  obs: PyTree  # [N, ...] processed state each stream last acted on
  action: PyTree  # [N, ...] action each stream last took (after exploration)
  extras: PyTree  # [N, ...] what the model's act returned with it
  stage: Transition  # [K, N, ...] committed transitions waiting for a full row
  timestep: jax.Array  # [] int32 timesteps acted (drives exploration schedules)


@dataclasses.dataclass(frozen=True)
class Parts:
  """The static pieces an ``AgentState`` is computed with."""

  model: Model
  num_streams: int
  stage_depth: int
  preprocess: Callable  # (pstate, obs[N], reset[N], active[N]|None, update) -> (pstate, obs')
  reward_preprocess: Callable  # (rstate, reward[N], active[N]|None) -> (rstate, reward')
  explore: Callable  # (xstate, key, action[N], extras[N], obs[N], timestep, active[N],
  #                     reset[N]) -> (xstate, action, extras)
  explore_init: Callable  # () -> xstate


# ------------------------------------------------------------------------- helpers


def scatter(full, rows, idx):
  """``full[idx] = rows`` for every leaf (``full`` ``[N, ...]``, ``rows`` ``[k, ...]``)."""
  return jax.tree.map(lambda f, r: f.at[idx].set(r.astype(f.dtype)), full, rows)


def gather(full, idx):
  return jax.tree.map(lambda f: f[idx], full)


def _active(idx: jax.Array, n: int) -> jax.Array:
  return jnp.zeros((n,), jnp.bool_).at[idx].set(True)


def _where_rows(mask: jax.Array, new, old):
  """Per leaf ``[N, ...]``: rows of ``new`` where ``mask[N]``, else ``old``."""
  def pick(a, b):
    return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)
  return jax.tree.map(pick, new, old)


def empty_stage(parts: Parts, obs, action, extras) -> Transition:
  """Zeros for ``[K, N]`` staged transitions, shaped like one row of ``[N]`` experience."""
  depth, n = parts.stage_depth, parts.num_streams
  zeros = lambda x: jnp.zeros((depth,) + jnp.shape(x), jnp.result_type(x))  # noqa: E731
  flags = jnp.zeros((depth, n), jnp.bool_)
  return Transition(jax.tree.map(zeros, obs), jax.tree.map(zeros, action),
                    jnp.zeros((depth, n), jnp.float32), flags, flags,
                    jax.tree.map(zeros, obs), jax.tree.map(zeros, extras))


# ------------------------------------------------------------------------- commit


def _held_transitions(parts: Parts, state: AgentState, idx, reward, terminal, next_obs):
  """The ``[k]`` transitions of the acting streams, completed with their next state."""
  rstate, reward_full = parts.reward_preprocess(
      state.reward_preprocess, jnp.zeros((parts.num_streams,), jnp.float32).at[idx].set(reward),
      _active(idx, parts.num_streams))
  transition = Transition(gather(state.obs, idx), gather(state.action, idx),
                          reward_full[idx], terminal == 1, terminal == 2, next_obs,
                          gather(state.extras, idx))
  return state._replace(reward_preprocess=rstate), transition


def commit_direct(parts: Parts, state: AgentState, transition: Transition, update: str):
  """All ``N`` streams committed together: one row straight to the model.

  ``update``: 'cond' = ``model.observe`` (updates under ``lax.cond`` when ready); for models
  with a fixed ``period`` the host counts rows instead and says 'store' (no update due) or
  'now' (this row completes the batch). That keeps ``lax.cond`` out of the step: on CPU a
  cond over the whole state copies the experience buffer on every call.
  """
  if update == "cond":
    model, metrics = parts.model.observe(state.model, transition)
    return state._replace(model=model), metrics["updated"]
  model = parts.model.store(state.model, transition)
  if update == "now":
    model, _ = parts.model.update(model)
    return state._replace(model=model), jnp.float32(1.0)
  return state._replace(model=model), jnp.float32(0.0)


def commit_staged(parts: Parts, state: AgentState, transition: Transition, idx, slots,
                  flush: int):
  """Stages ``[k]`` transitions at ``stage[slots[j], idx[j]]``, then hands the first
  ``flush`` complete rows to the model (the host counts what is staged, so ``flush`` is a
  Python int) and shifts the rest up."""
  stage = jax.tree.map(lambda s, t: s.at[slots, idx].set(t.astype(s.dtype)),
                       state.stage, transition)
  updated = jnp.float32(0.0)
  model = state.model
  for row in range(flush):
    model, metrics = parts.model.observe(model, jax.tree.map(lambda s: s[row], stage))
    updated = jnp.maximum(updated, metrics["updated"])
  if flush:
    stage = jax.tree.map(lambda s: jnp.roll(s, -flush, axis=0), stage)
  return state._replace(model=model, stage=stage), updated


# ---------------------------------------------------------------------------- act


def act_step(parts: Parts, state: AgentState, obs, idx, reward, terminal, next_obs_held,
             has_next, reset, slots, *, commit: str, flush: int, update: str,
             deterministic: bool):
  """One ``act`` of the streams ``idx`` ``[k]``: preprocess their states, commit their held
  transitions (``commit`` 'none' | 'direct' | 'staged'), then act for them.

  Args:
    obs: raw states ``[k, ...]``.
    reward, terminal: ``[k]`` what the previous ``observe`` of each stream said.
    next_obs_held: ``[k, ...]`` processed next states given to ``observe`` for steps cut
      short (terminal 2), where ``has_next[k]``; otherwise a cut step bootstraps from the
      state it acted on.
    reset: ``bool[k]``: these streams start a new episode now.
    slots: ``int[k]`` staging rows (``commit='staged'`` only).
    update: how a direct commit updates (``commit_direct``).
  Returns:
    ``(state, action[k], updated)`` with ``updated`` a float32 flag.
  """
  n = parts.num_streams
  active = _active(idx, n)
  key, act_key, explore_key = jax.random.split(state.key, 3)
  full_reset = jnp.zeros((n,), jnp.bool_).at[idx].set(reset)
  pstate, processed = parts.preprocess(state.preprocess, _raw_rows(obs, idx, n), full_reset,
                                       active, True)
  state = state._replace(preprocess=pstate, key=key)
  processed_k = gather(processed, idx)
  updated = jnp.float32(0.0)
  if commit != "none":
    ended = _where_rows(has_next, next_obs_held, gather(state.obs, idx))
    next_obs = _where_rows(terminal == 0, processed_k, ended)
    state, transition = _held_transitions(parts, state, idx, reward, terminal, next_obs)
    if commit == "direct":
      state, updated = commit_direct(parts, state, transition, update)
    else:
      state, updated = commit_staged(parts, state, transition, idx, slots, flush)
  obs_full = scatter(state.obs, processed_k, idx)
  action, extras = parts.model.act(state.model, obs_full, act_key, deterministic)
  xstate = state.explore
  if not deterministic:
    xstate, action, extras = parts.explore(xstate, explore_key, action, extras, obs_full,
                                           state.timestep, active, full_reset)
  state = state._replace(
      obs=obs_full, action=scatter(state.action, gather(action, idx), idx),
      extras=scatter(state.extras, gather(extras, idx), idx), explore=xstate,
      timestep=state.timestep + idx.shape[0])
  return state, gather(action, idx), updated


def _raw_rows(obs, idx, n: int):
  """Raw states scattered into ``[N]`` rows (other rows zero: they are inactive)."""
  def rows(x):
    full = jnp.zeros((n,) + x.shape[1:], x.dtype)
    return full.at[idx].set(x)
  return jax.tree.map(rows, obs)


def process_next(parts: Parts, state: AgentState, obs, idx):
  """Processed ``[k]`` next states for bootstrapping (statistics and stacks untouched)."""
  n = parts.num_streams
  _, processed = parts.preprocess(state.preprocess, _raw_rows(obs, idx, n),
                                  jnp.zeros((n,), jnp.bool_), _active(idx, n), False)
  return gather(processed, idx)
