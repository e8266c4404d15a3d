"""The model core shared by every agent (PPO, VPG, TRPO, DQN, NAF, DQFD, ...).

In TensorForce's words the *Model* computes actions and updates, and the *Agent*
(``batchrl.Agent``, the object users drive) handles interaction: preprocessing, exploration,
per-stream buffering. A model is a bundle of pure functions over one explicit state pytree. Nothing
is hidden in Python objects, so every function can be ``jax.jit``-ed, ``jax.vmap``-ed over seeds,
and the whole state is what a checkpoint saves.

Shapes: ``B`` is ``spec.num_envs`` (the batch of environments acted for at once), ``T`` time.

    state = agent.init(key, spec)
    action, extras = agent.act(state, obs[B], key, deterministic)
    state, metrics = agent.observe(state, transition)        # store + update when ready

``observe`` is ``store`` followed by ``update`` under ``lax.cond`` when ``ready``. Drivers that
know the agent's ``period`` (stores between updates) may instead scan ``period`` steps of
``store`` and then call ``update`` once: the same result without a ``cond`` per step, which
matters under ``vmap`` over seeds (a batched ``cond`` becomes a ``select`` and runs both sides).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from batchrl.agents.update_pieces import UpdatePieces
from batchrl.specs import EnvSpec

PyTree = Any
Metrics = dict  # str -> scalar array


class Transition(NamedTuple):
  """One batched step of experience; fields are ``[B, ...]`` (``[T, B, ...]`` when stacked).

  ``next_obs`` is the observation the action led to. When an episode ended on this step it
  is the episode's *final* observation (not the first one of the next episode), so agents
  can bootstrap from it on truncation.
  """

  obs: PyTree
  action: PyTree
  reward: jax.Array  # [B] float32
  terminated: jax.Array  # [B] bool: a true end, the value after it is 0
  truncated: jax.Array  # [B] bool: cut (time limit, env restart): bootstrap from next_obs
  next_obs: PyTree
  extras: dict  # what ``act`` returned besides the action (log-probs, values, carries...)

  @property
  def done(self) -> jax.Array:
    return jnp.logical_or(self.terminated, self.truncated)


def _identity_track(state, transition):
  del transition
  return state


@dataclasses.dataclass(frozen=True)
class Model:
  """Pure functions of an agent's model. Build one with e.g. ``make_ppo(config)``.

  Attributes:
    init: ``(key, spec) -> state``.
    act: ``(state, obs, key, deterministic) -> (action, extras)``; ``deterministic`` is a
      Python bool (the policy mode, no exploration noise).
    store: ``(state, transition) -> state``: record experience, advance internals
      (recurrent carries, counters, running statistics).
    update: ``(state) -> (state, metrics)``: learn from what was stored.
    ready: ``(state) -> bool[]``: whether ``update`` should run now.
    track: ``(state, transition) -> state``: advance internals without recording or
      learning (evaluation episodes); identity for agents without internals.
    period: number of ``store`` calls between updates when that is fixed, else None.
    name: the agent name (``Agent.create``), for logs and checkpoints.
    summarize: optional ``(state) -> {"scalars": {...}, "histograms": {...}}`` of what is
      worth plotting about the state (normalizer statistics, recent actions...), for
      TensorBoard.
    on_policy: whether ``update`` must only see experience from the current parameters
      (PPO, VPG, TRPO). Replay agents (DQN, NAF, DQFD) set False: distributed drivers may
      then act with parameters a few updates old and overlap acting with learning.
    learned_updates: for models whose ``update`` may run without learning (replay agents
      before ``first_update``, VPG waiting for whole episodes), ``(state) -> int[]``: the
      count of updates that learned. None: every update learns.
    update_pieces: for an update of epochs of minibatch steps, the same update as pure
      pieces (``batchrl.agents.update_pieces.UpdatePieces``) whose composition in one scan
      ``update`` is; a driver may run the pieces otherwise (``batchrl.train.host_update``:
      each a top-level program). None: ``update`` is the only form.
    scratch: names of state fields (the state is a NamedTuple) that hold nothing between
      updates: overwritten before they are read again (PPO's rollout buffer). Run
      checkpoints, written between updates, leave them out (``without_scratch``) and take
      them from a fresh state when restored (``with_scratch``).
    memory: names of state fields holding a replay memory (``batchrl.memories``: the
      experience sampled by updates, most of a replay agent's state: ``sac_mujoco``'s 1M
      transitions are 158 MiB of a 162 MiB checkpoint); a dotted name reaches into a nested
      state (DQFD's ``dqn.memory``). Run checkpoints keep them in the newest checkpoint only
      (``batchrl.train.rundir.save_sim``); an older one resumes with a fresh state's
      (empty) memory. The memory's fill counters live inside it, so they reset with it.
  """

  init: Callable[[jax.Array, EnvSpec], PyTree]
  act: Callable[..., tuple[PyTree, dict]]
  store: Callable[[PyTree, Transition], PyTree]
  update: Callable[[PyTree], tuple[PyTree, Metrics]]
  ready: Callable[[PyTree], jax.Array]
  track: Callable[[PyTree, Transition], PyTree] = _identity_track
  period: int | None = None
  name: str = "agent"
  summarize: Callable[[PyTree], dict] | None = None
  on_policy: bool = True
  learned_updates: Callable[[PyTree], jax.Array] | None = None
  update_pieces: UpdatePieces | None = None
  scratch: tuple[str, ...] = ()
  memory: tuple[str, ...] = ()

  def observe(self, state: PyTree, transition: Transition) -> tuple[PyTree, Metrics]:
    """Store the transition; update under ``lax.cond`` when a batch is ready.

    Returns the new state and the update's metrics, all zeros when no update ran (plus
    ``metrics["updated"]`` in {0., 1.}).
    """
    state = self.store(state, transition)
    template = jax.eval_shape(self.update, state)[1]
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), template)

    def learn(s):
      s, metrics = self.update(s)
      return s, dict(metrics, updated=jnp.float32(1.0))

    def wait(s):
      return s, dict(zeros, updated=jnp.float32(0.0))

    return jax.lax.cond(self.ready(state), learn, wait, state)


def never_ready(state) -> jax.Array:
  del state
  return jnp.bool_(False)


def no_update(state):
  return state, {}


def no_store(state, transition):
  del transition
  return state


def without_scratch(model: Model, state: PyTree) -> PyTree:
  """``state`` with ``model.scratch``'s fields emptied (``()``), as run checkpoints store it."""
  return state._replace(**{name: () for name in model.scratch}) if model.scratch else state


def with_scratch(model: Model, kept: PyTree, fresh: PyTree) -> PyTree:
  """``kept`` (``without_scratch``'s) with ``model.scratch``'s fields taken from ``fresh``."""
  if not model.scratch:
    return kept
  return kept._replace(**{name: getattr(fresh, name) for name in model.scratch})


def without_memory(model: Model, state: PyTree) -> PyTree:
  """``state`` with ``model.memory``'s fields emptied (``()``): what run checkpoints older
  than the newest keep."""
  for name in model.memory:
    state = _replaced(state, name.split("."), ())
  return state


def _replaced(state: PyTree, path: list[str], value) -> PyTree:
  """``state`` (nested NamedTuples) with the field at ``path`` set to ``value``."""
  head, rest = path[0], path[1:]
  inner = _replaced(getattr(state, head), rest, value) if rest else value
  return state._replace(**{head: inner})
