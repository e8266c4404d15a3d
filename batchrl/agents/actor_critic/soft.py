"""The gradient step the soft actor-critics (SAC, TQC) share, top to bottom: a critic step
toward the agent's target, an actor step down the agent's objective through the new critics
and a temperature step toward the target entropy (when it learns), both on every
``policy_delay``-th gradient step (DroQ's 20), and the targets moved by tau when due. With
DroQ's ``critic_dropout`` each critic pass (the target's, the critics' step, the actor's)
drops out with a mask of its own. An agent gives what differs: its critic target, its
critics' loss and its actor objective (``batchrl.agents.sac.update``,
``batchrl.agents.tqc.update``)."""
from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic import learning, temperature
from batchrl.agents.actor_critic.model import ACOptState, ACParams, ACState
from batchrl.agents.actor_critic.networks import ACNetworks


def soft_step(config, nets: ACNetworks, move_targets: jax.Array, state: ACState,
              key: jax.Array, params: ACParams, opt_state: ACOptState, *,
              critic_target: Callable, actor_objective: Callable,
              critic_loss: Callable | None = None):
  """One gradient step on a fresh batch: ``(params, opt_state, index [K], |TD| [K],
  metrics)``. ``critic_target(config, nets, actor, target_critic, items, discount, key, alpha)`` is
  the critics' regression target (no gradient); ``critic_loss`` their loss against it
  (``learning.critic_step``'s TD loss when None); ``actor_objective(nets, actor,
  critic_params, obs, key, alpha) -> (loss, (metrics, log pi [K]))``."""
  opts = learning.optimizers(config, temperature.learns_alpha(config))
  batch_key, target_key, actor_key = learning.step_keys(key)
  dropout = learning.dropout_keys(config, key)
  batch = learning.sample_batch(config, state, batch_key)
  items = batch.items
  alpha = jnp.exp(params.log_alpha)

  # critics: toward the agent's soft target (the current actor, the target critics)
  target = critic_target(config, nets.with_dropout(dropout.target), params.actor,
                         params.target_critic, items, batch.discount, target_key, alpha)
  critic = learning.critic_step(config, nets.with_dropout(dropout.critic), opts.critic,
                                params.critic, opt_state.critic, items, batch.weight, target,
                                loss=critic_loss)

  # actor and temperature: down the actor's objective through the new critics, log alpha
  # toward the target entropy with log pi of the actor before its step; every policy_delay
  # gradient steps
  objective = functools.partial(actor_objective, nets.with_dropout(dropout.actor),
                                critic_params=critic.params, obs=items.obs, key=actor_key,
                                alpha=alpha)
  learn = learning.policy_due(config, opt_state)
  actor, actor_state, log_alpha, alpha_state, actor_loss, metrics = policy_step(
      config, nets, opts, objective, learn, params.actor, opt_state.actor, params.log_alpha,
      opt_state.alpha)

  # targets: Polyak toward the new networks when due (the target actor too, unread here: the
  # state is the one every actor-critic agent has)
  target_actor, target_critic = learning.sync_targets(config, params, actor, critic.params,
                                                      move_targets)

  params = ACParams(actor, critic.params, target_actor, target_critic, log_alpha)
  opt_state = ACOptState(actor_state, critic.opt_state, alpha_state, opt_state.steps + 1)
  metrics.update(learning.step_metrics(target, critic, actor_loss, jnp.exp(log_alpha),
                                       learn.astype(jnp.float32)))
  return params, opt_state, batch.index, jnp.abs(critic.error[0]), metrics


def policy_step(config, nets: ACNetworks, opts: learning.Optimizers, objective: Callable,
                learn: jax.Array, actor, actor_state, log_alpha, alpha_state):
  """Where ``learn`` (every step with ``policy_delay`` 1), an actor step down ``objective``
  and the temperature step; elsewhere everything held, the loss and metrics
  ``learning.not_computed``. ``(actor, actor_state, log_alpha, alpha_state, loss,
  metrics)``."""

  def step(actor, actor_state, log_alpha, alpha_state):
    actor, actor_state, loss, (metrics, log_prob) = learning.actor_step(
        opts.actor, objective, actor, actor_state)
    log_alpha, alpha_state, metrics = temperature.learn_temperature(
        config, nets, opts.alpha, log_alpha, alpha_state, log_prob, dict(metrics))
    return actor, actor_state, log_alpha, alpha_state, loss, metrics

  return learning.delayed(config, learn, step, actor, actor_state, log_alpha,
                          alpha_state)
