"""CrossQ's update (Bhatt et al. 2024), top to bottom: on each of ``repeat_update`` fresh
batches, a critic step in which ``(s, a)`` and ``(s', a')``, ``a' ~ pi(s')`` from the actor's
inference pass, go through the critics in one training pass (Batch Renormalization over
their mixture) and ``Q(s, a)`` regresses on ``r + gamma (1 - terminated) (min_i Q_i(s', a')
- alpha log pi(a'|s'))`` from that same pass, without gradient (``losses``); then, on every
``policy_delay``-th gradient step, an actor step (its training pass) down ``alpha log
pi(a|s) - min_i Q_i(s, a)`` through the new critics' inference pass, and a temperature step
toward ``target_entropy`` (when it learns). No target networks, so nothing to sync. Each
training pass moves its network's running statistics; the optimizers move the parameters.
Shapes: ``K`` batch."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic import learning, temperature
from batchrl.agents.actor_critic.model import ACOptState, ACParams, ACState
from batchrl.agents.actor_critic.networks import ACNetworks, Renormed, squashed_sample
from batchrl.agents.crossq.config import CrossQConfig
from batchrl.agents.crossq.losses import crossq_actor_loss, crossq_critic_loss


def update(config: CrossQConfig, nets: ACNetworks, state: ACState):
  """``repeat_update`` CrossQ steps under the replay gate, then the counters."""
  return learning.gated_update(config, state, functools.partial(crossq_step, config, nets))


def crossq_step(config: CrossQConfig, nets: ACNetworks, move_targets: jax.Array,
                state: ACState, key: jax.Array, params: ACParams, opt_state: ACOptState):
  """One gradient step on a fresh batch: ``(params, opt_state, index [K], |TD| [K],
  metrics)``. ``move_targets`` is not read: there are no targets."""
  del move_targets
  opts = learning.optimizers(config, temperature.learns_alpha(config))
  batch_key, next_key, actor_key = learning.step_keys(key)
  batch = learning.sample_batch(config, state, batch_key)
  items = batch.items
  alpha = jnp.exp(params.log_alpha)

  # critics: (s, a) and (s', a') in one training pass, the target from the same pass
  next_action, next_log_prob = squashed_sample(next_key,
                                               *nets.actor(params.actor, items.next_obs))
  critic, target = critic_step(config, nets, opts.critic, params.critic, opt_state.critic,
                               items, batch.weight, batch.discount, next_action, next_log_prob,
                               alpha)

  # actor and temperature: on gradient step t (from 1) when t mod policy_delay == 0 (sbx's)
  learn = learning.policy_due(config, opt_state)
  objective = functools.partial(crossq_actor_loss, nets, actor_stats=params.actor.stats,
                                critic=critic.params, obs=items.obs, key=actor_key,
                                alpha=alpha)
  actor, actor_state, log_alpha, alpha_state, actor_loss, metrics = delayed_policy_step(
      config, nets, opts, objective, learn, params.actor, opt_state.actor, params.log_alpha,
      opt_state.alpha)

  params = ACParams(actor, critic.params, params.target_actor, params.target_critic,
                    log_alpha)
  opt_state = ACOptState(actor_state, critic.opt_state, alpha_state, opt_state.steps + 1)
  metrics.update(learning.step_metrics(target, critic, actor_loss, jnp.exp(log_alpha),
                                       learn.astype(jnp.float32)))
  return params, opt_state, batch.index, jnp.abs(critic.error[0]), metrics


def critic_step(config: CrossQConfig, nets: ACNetworks, opt, critic: Renormed, opt_state,
                items, weight: jax.Array, discount, next_action: jax.Array,
                next_log_prob: jax.Array,
                alpha: jax.Array) -> tuple[learning.CriticStep, jax.Array]:
  """One step of the critics' parameters down ``crossq_critic_loss``, their statistics those
  of its training pass: ``(CriticStep with Renormed params, target [K])``."""
  objective = functools.partial(crossq_critic_loss, config, nets, critic_stats=critic.stats,
                                items=items, weight=weight, discount=discount,
                                next_action=next_action,
                                next_log_prob=next_log_prob, alpha=alpha)
  (loss, (q, error, target, stats)), grads = jax.value_and_grad(objective, has_aux=True)(
      critic.params)
  new_params, opt_state = learning.adam_step(opt, grads, opt_state, critic.params)
  return learning.CriticStep(Renormed(new_params, stats), opt_state, loss, q, error,
                             grads), target


def delayed_policy_step(config: CrossQConfig, nets: ACNetworks, opts: learning.Optimizers,
                        objective, learn: jax.Array, actor: Renormed, actor_state, log_alpha,
                        alpha_state):
  """Where ``learn``, an actor step down ``objective`` (its training pass's statistics kept)
  and the temperature step; elsewhere everything held, the loss and metrics
  ``learning.not_computed``.
  ``(actor, actor_state, log_alpha, alpha_state, loss, metrics)``."""

  def step(actor, actor_state, log_alpha, alpha_state):
    params, actor_state, loss, (metrics, log_prob, stats) = learning.actor_step(
        opts.actor, objective, actor.params, actor_state)
    log_alpha, alpha_state, metrics = temperature.learn_temperature(
        config, nets, opts.alpha, log_alpha, alpha_state, log_prob, dict(metrics))
    return Renormed(params, stats), actor_state, log_alpha, alpha_state, loss, metrics

  return learning.delayed(config, learn, step, actor, actor_state, log_alpha,
                          alpha_state)
