"""The gradient step the soft actor-critics (SAC, TQC) share, top to bottom: a critic step
toward the agent's target, an actor step down the agent's objective through the new critics,
a temperature step toward the target entropy (when it learns), and the targets moved by tau
when due. An agent gives what differs: its critic target, its critics' loss and its actor
objective (``batchrl.agents.sac.update``, ``batchrl.agents.tqc.update``)."""
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
  batch = learning.sample_batch(config, state, batch_key)
  items = batch.items
  alpha = jnp.exp(params.log_alpha)

  # critics: toward the agent's soft target (the current actor, the target critics)
  target = critic_target(config, nets, params.actor, params.target_critic, items,
                         batch.discount, target_key, alpha)
  critic = learning.critic_step(config, nets, opts.critic, params.critic, opt_state.critic,
                                items, batch.weight, target, loss=critic_loss)

  # actor: down its objective through the new critics
  objective = functools.partial(actor_objective, nets, critic_params=critic.params,
                                obs=items.obs, key=actor_key, alpha=alpha)
  actor, actor_state, actor_loss, (metrics, log_prob) = learning.actor_step(
      opts.actor, objective, params.actor, opt_state.actor)

  # temperature: log alpha toward the target entropy, with log pi of the actor before its step
  log_alpha, alpha_state, metrics = temperature.learn_temperature(
      config, nets, opts.alpha, params.log_alpha, opt_state.alpha, log_prob, dict(metrics))

  # targets: Polyak toward the new networks when due (the target actor too, unread here: the
  # state is the one every actor-critic agent has)
  target_actor, target_critic = learning.sync_targets(config, params, actor, critic.params,
                                                      move_targets)

  params = ACParams(actor, critic.params, target_actor, target_critic, log_alpha)
  opt_state = ACOptState(actor_state, critic.opt_state, alpha_state, opt_state.steps + 1)
  metrics.update(learning.step_metrics(target, critic, actor_loss, jnp.exp(log_alpha),
                                       jnp.float32(1.0)))
  return params, opt_state, batch.index, jnp.abs(critic.error[0]), metrics
