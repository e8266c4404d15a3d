"""The pieces an actor-critic update is built from, shared by DDPG, TD3 and SAC; each agent's
``update.py`` calls them in its own order (critic step, actor step, temperature step, target
sync). Nothing here calls back into an agent.

Shapes: ``K`` batch size, ``C`` critics. ``config`` is an ``ActorCriticConfig``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from batchrl.agents.actor_critic import observations, rewards
from batchrl.agents.actor_critic.losses import critic_loss
from batchrl.agents.actor_critic.networks import ACNetworks
from batchrl.agents.replay import updates as replay
from batchrl.agents.replay.losses import nstep_returns
from batchrl.memories import Memory, transition_window_mask
from batchrl.ops.targets import polyak_update


class Optimizers(NamedTuple):
  actor: optax.GradientTransformation
  critic: optax.GradientTransformation
  alpha: optax.GradientTransformation | None  # None unless SAC learns its temperature


def optimizers(config, learns_alpha: bool = False) -> Optimizers:
  """Adam (``adam_beta1``) for the actor and the critics (after global-norm clipping with
  ``max_grad_norm``), AdamW with ``weight_decay`` > 0 (sbx's SimBa policies; every parameter
  decays, as optax.adamw's default); and (Adam's defaults, as sbx's) for the log temperature
  when it ``learns_alpha``. Their rates decay linearly over ``learning_rate_decay_steps``
  when it is given."""
  clip = ([optax.clip_by_global_norm(config.max_grad_norm)]
          if config.max_grad_norm is not None else [])

  def scheduled(rate):  # constant, or decaying linearly (a Python check: the same program)
    if config.learning_rate_decay_steps is None:
      return rate
    return optax.linear_schedule(rate, rate * config.learning_rate_decay_to,
                                 config.learning_rate_decay_steps)

  def adam(rate):
    rate = scheduled(rate)
    if not config.weight_decay:  # a Python check: Adam's program as it always was
      return optax.chain(*clip, optax.adam(rate, b1=config.adam_beta1, eps=config.adam_epsilon))
    return optax.chain(*clip, optax.adamw(rate, b1=config.adam_beta1, eps=config.adam_epsilon,
                                          weight_decay=config.weight_decay))

  alpha = optax.adam(scheduled(config.alpha_learning_rate)) if learns_alpha else None
  return Optimizers(adam(config.learning_rate), adam(config.critic_learning_rate), alpha)


def adam_step(opt: optax.GradientTransformation, grads, opt_state, params):
  """``(params, opt_state)`` after one step of ``opt`` along ``grads``."""
  updates, opt_state = opt.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state


# ------------------------------------------------------------------- the schedule


class Schedule(NamedTuple):
  """What this update does, decided before it: whether it learns (``ready``), whether its
  learning steps move the targets (``sync``), and the boundary count behind ``sync``."""

  memory: Memory
  ready: jax.Array  # [] bool
  sync: jax.Array  # [] bool
  period: jax.Array  # [] int32 num_steps // target_update_frequency


def schedule(config, state) -> Schedule:
  """The replay gate (``first_update`` steps stored and a whole batch) and the target sync
  (a ``target_update_frequency`` boundary passed since the last one)."""
  memory = replay.memory_of(config, state.info)
  ready = replay.update_ready(config, memory.size(state.memory), state.num_steps)
  sync, period = replay.target_sync_due(config, state, ready)
  return Schedule(memory, ready, sync, period)


def gated_update(config, state, step: Callable):
  """An update: ``repeat_update`` calls of ``step(move_targets, state, key, params,
  opt_state) -> (params, opt_state, index [K], |TD| [K], metrics)`` under the replay gate
  (``schedule``), then the counters (``finish``)."""
  plan = schedule(config, state)
  key, params, opt_state, mstate, metrics = replay.gated_steps(
      config, plan.memory, state, plan.ready, functools.partial(step, plan.sync))
  return finish(state, plan, key, params, opt_state, mstate, metrics)


def finish(state, plan: Schedule, key, params, opt_state, mstate, metrics: dict):
  """The state after an update's learning steps (``replay.gated_steps``' results) and its
  counters; the metrics with the memory fill and what the update did."""
  state = state._replace(
      params=params, opt_state=opt_state, memory=mstate, key=key, pending=jnp.int32(0),
      num_updates=state.num_updates + plan.ready.astype(jnp.int32),
      last_sync=jnp.where(plan.sync, plan.period, state.last_sync))
  metrics.update(memory_size=plan.memory.size(mstate).astype(jnp.float32),
                 learning=plan.ready.astype(jnp.float32),
                 target_synced=plan.sync.astype(jnp.float32))
  return state, metrics


# ---------------------------------------------------------------- one learning step


def step_keys(key: jax.Array):
  """``(batch, target, actor)`` keys of one learning step; every agent splits three, used
  or not, so the batches drawn from a seed do not depend on the agent."""
  return jax.random.split(key, 3)


DROPOUT_STREAM = 3  # folded into a step's key for its dropout keys: step_keys' draws stay


class DropoutKeys(NamedTuple):
  """The keys of the critics' dropout masks in one learning step, one per critic pass: the
  target's, the critics' own step and the actor's (each None without dropout)."""

  target: jax.Array | None
  critic: jax.Array | None
  actor: jax.Array | None


def dropout_keys(config, key: jax.Array) -> DropoutKeys:
  """The dropout keys of the learning step of ``key`` (``critic_dropout`` > 0), drawn apart
  from ``step_keys``' so that every other draw of the step is as without dropout; all None
  without dropout (a Python check: the program as it was)."""
  if not config.critic_dropout:
    return DropoutKeys(None, None, None)
  return DropoutKeys(*jax.random.split(jax.random.fold_in(key, DROPOUT_STREAM), 3))


def policy_due(config, opt_state) -> jax.Array:
  """Whether this gradient step is one of the actor's: the ``t``-th (from 1) when ``t mod
  policy_delay == 0`` (TD3's Algorithm 1, sbx's offset), ``[]`` bool; ``opt_state.steps``
  counts the steps before it."""
  if config.policy_delay == 1:  # a Python check: every step, a constant in the program
    return jnp.bool_(True)
  return (opt_state.steps + 1) % config.policy_delay == 0


def delayed(config, learn: jax.Array, step: Callable, *operands):
  """``step(*operands)`` where ``learn``, else the operands as given: the actor's step every
  ``policy_delay`` gradient steps. ``step`` returns the new operands, then what it computed
  on the way (the actor's loss, its metrics); a held step computes none of it and returns
  ``not_computed`` in its place, as sbx computes the actor's loss only when it steps (the
  loss alone was about 7% of CrossQ's update). With ``policy_delay`` 1 a plain call of
  ``step`` (the program as without the delay)."""
  if config.policy_delay == 1:
    return step(*operands)
  computed = jax.eval_shape(step, *operands)[len(operands):]

  def held(*operands):
    return operands + not_computed(computed)

  # a real branch on CPU/GPU (both sides only under vmap)
  return jax.lax.cond(learn, step, held, *operands)


def not_computed(shapes):
  """What a step that did not run reports for ``shapes``: NaN for floats (means over steps
  and reports leave them out: ``replay.gated_steps``, ``batchrl.train.metrics``), 0 else."""
  def fill(s):
    value = jnp.nan if jnp.issubdtype(s.dtype, jnp.floating) else 0
    return jnp.full(s.shape, value, s.dtype)

  return jax.tree.map(fill, shapes)


class Batch(NamedTuple):
  """What a learning step learns from: ``items`` (transitions), ``index [K]`` (their places in
  the memory), importance ``weight [K]``, and ``discount``, the factor of the value
  bootstrapped from ``items.next_obs``: ``config.discount``, or with ``n_step > 1``
  ``discount^m [K]`` for windows of ``m`` steps, whose summed discounted rewards, last
  ``terminated`` and last ``next_obs`` the items then hold (``nstep_batch``)."""

  items: Any
  index: jax.Array
  weight: jax.Array
  discount: Any  # float or [K]


def sample_batch(config, state, key: jax.Array) -> Batch:
  """A batch of ``batch_size`` transitions (or n-step windows) from the state's replay
  memory, its ``obs`` and ``next_obs`` normalized by the state's statistics when the agent
  ``normalize_observations``, its rewards scaled when it ``normalize_rewards``."""
  memory = replay.memory_of(config, state.info)
  sample = memory.sample(state.memory, key, config.batch_size, state.num_steps)
  if config.n_step == 1:
    batch = Batch(sample.items, sample.index, sample.weight, config.discount)
  else:
    batch = nstep_batch(config, memory, state, sample)
  items = batch.items
  if config.normalize_rewards:  # linear: scaling an n-step window's sum scales each reward
    items = items._replace(reward=rewards.scaled(config, state.reward_stats, items.reward))
  if config.normalize_observations:
    norm = lambda obs: observations.normalized(config, state.obs_stats, obs)
    items = items._replace(obs=norm(items.obs), next_obs=norm(items.next_obs))
  return batch._replace(items=items)


def nstep_batch(config, memory: Memory, state, sample) -> Batch:
  """The windows of ``n_step`` stored steps from each sampled one (cut after an episode's
  end, a discontinuity or the newest stored step: ``m <= n`` steps used): the items'
  reward ``sum_l discount^l r_l``, their ``terminated`` and ``next_obs`` those of the last
  step used, and ``discount^m``."""
  window, mask = memory.windows(state.memory, sample.index, config.n_step)
  alive = transition_window_mask(window, mask)
  returns, last, _ = nstep_returns(window.reward, window.terminated, alive, config.discount)
  rows = jnp.arange(last.shape[0])
  at_last = lambda x: x[rows, last]
  items = sample.items._replace(reward=returns, terminated=at_last(window.terminated),
                                next_obs=jax.tree.map(at_last, window.next_obs))
  discount = jnp.float32(config.discount) ** (last + 1).astype(jnp.float32)
  return Batch(items, sample.index, sample.weight, discount)


class CriticStep(NamedTuple):
  params: Any
  opt_state: Any
  loss: jax.Array  # []
  q: jax.Array  # [C, K] before the step
  error: jax.Array  # [C, K] TD errors before the step
  grads: Any


def critic_step(config, nets: ACNetworks, opt, critic, opt_state, items, weight: jax.Array,
                target: jax.Array, loss: Callable | None = None) -> CriticStep:
  """One step of the ``C`` critics on their importance-weighted loss against ``target``,
  each regressing on its own: ``loss(q, target, weight [K]) -> (loss, error [C, K])``, by
  default the TD loss (Huber with ``clip_loss``) against ``target [K]``."""
  if loss is None:
    loss = lambda q, target, weight: critic_loss(q, target, weight, config.clip_loss)

  def objective(params):
    q = nets.critic(params, items.obs, items.action)
    value, error = loss(q, target, weight)
    return value, (q, error)

  (value, (q, error)), grads = jax.value_and_grad(objective, has_aux=True)(critic)
  critic, opt_state = adam_step(opt, grads, opt_state, critic)
  return CriticStep(critic, opt_state, value, q, error, grads)


def actor_step(opt, objective: Callable, actor, opt_state):
  """One step of the actor down ``objective(actor) -> (loss, aux)``: ``(actor, opt_state,
  loss, aux)``, the loss and aux of the actor before the step."""
  (loss, aux), grads = jax.value_and_grad(objective, has_aux=True)(actor)
  actor, opt_state = adam_step(opt, grads, opt_state, actor)
  return actor, opt_state, loss, aux


def delayed_actor_step(config, opt, objective: Callable, learn: jax.Array, actor, opt_state):
  """``actor_step`` where ``learn`` (``policy_due``); elsewhere nothing, its loss and aux
  ``not_computed``. ``(actor, opt_state, loss, aux)``: DDPG's and TD3's actor."""
  return delayed(config, learn, functools.partial(actor_step, opt, objective), actor,
                 opt_state)


def sync_targets(config, params, actor, critic, move: jax.Array):
  """``(target_actor, target_critic)`` moved toward the new ``actor`` and ``critic`` by
  ``update_target_weight`` where ``move``, as they were elsewhere."""
  tau = config.update_target_weight
  return (polyak_update(params.target_actor, actor, tau, move),
          polyak_update(params.target_critic, critic, tau, move))


def step_metrics(target: jax.Array, critic: CriticStep, actor_loss: jax.Array,
                 alpha: jax.Array, actor_learned: jax.Array) -> dict:
  """The metrics every actor-critic step reports."""
  return dict(critic_loss=critic.loss, actor_loss=actor_loss, q_mean=jnp.mean(critic.q),
              target_mean=jnp.mean(target), td_error=jnp.mean(jnp.abs(critic.error)),
              alpha=alpha, actor_learned=actor_learned,
              critic_grad_norm=optax.tree.norm(critic.grads))
