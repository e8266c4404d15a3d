"""TQC's update (Kuznetsov et al. 2020), top to bottom: on each of ``repeat_update`` fresh
batches, a critic step of the ``C`` quantile critics on the quantile Huber loss toward the
truncated mixture target (``losses.tqc_target``: the target critics' pooled quantiles at
``a' ~ pi(s')``, the largest ``C * drop_quantiles`` dropped, minus ``alpha log pi``); an
actor step down ``alpha log pi(a|s) - mean Z(s, a)`` through the new critics; a temperature
step toward ``target_entropy`` (when it learns); and the targets moved by tau when the
update is due a sync. SAC's update with quantile critics in place of the twins' minimum.
Shapes: ``K`` batch."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic import learning, temperature
from batchrl.agents.actor_critic.model import ACOptState, ACParams, ACState
from batchrl.agents.actor_critic.networks import ACNetworks
from batchrl.agents.replay import updates as replay
from batchrl.agents.tqc.config import TQCConfig
from batchrl.agents.tqc.losses import quantile_huber_loss, tqc_actor_loss, tqc_target


def update(config: TQCConfig, nets: ACNetworks, state: ACState):
  """``repeat_update`` TQC steps under the replay gate, then the counters."""
  plan = learning.schedule(config, state)
  key, params, opt_state, mstate, metrics = replay.gated_steps(
      config, plan.memory, state, plan.ready,
      functools.partial(tqc_step, config, nets, plan.sync))
  return learning.finish(state, plan, key, params, opt_state, mstate, metrics)


def tqc_step(config: TQCConfig, nets: ACNetworks, move_targets: jax.Array, state: ACState,
             key: jax.Array, params: ACParams, opt_state: ACOptState):
  """One gradient step on a fresh batch: ``(params, opt_state, index [K], |TD| [K],
  metrics)``."""
  opts = learning.optimizers(config, temperature.learns_alpha(config))
  batch_key, target_key, actor_key = learning.step_keys(key)
  batch = learning.sample_batch(config, state, batch_key)
  items = batch.items
  alpha = jnp.exp(params.log_alpha)

  # critics: quantile regression toward the truncated mixture of the target critics
  target = tqc_target(config, nets, params.actor, params.target_critic, items, target_key,
                      alpha)
  critic = learning.critic_step(config, nets, opts.critic, params.critic, opt_state.critic,
                                items, batch.weight, target, loss=quantile_huber_loss)

  # actor: down alpha log pi - mean of every quantile through the new critics
  objective = functools.partial(tqc_actor_loss, nets, critic_params=critic.params,
                                obs=items.obs, key=actor_key, alpha=alpha)
  actor, actor_state, actor_loss, (metrics, log_prob) = learning.actor_step(
      opts.actor, objective, params.actor, opt_state.actor)

  # temperature: log alpha toward the target entropy, with log pi of the actor before its step
  log_alpha, alpha_state, metrics = temperature.learn_temperature(
      config, nets, opts.alpha, params.log_alpha, opt_state.alpha, log_prob, dict(metrics))

  # targets: Polyak toward the new networks when due (the target actor is unread, as SAC's)
  target_actor, target_critic = learning.sync_targets(config, params, actor, critic.params,
                                                      move_targets)

  params = ACParams(actor, critic.params, target_actor, target_critic, log_alpha)
  opt_state = ACOptState(actor_state, critic.opt_state, alpha_state, opt_state.steps + 1)
  metrics.update(learning.step_metrics(target, critic, actor_loss, jnp.exp(log_alpha),
                                       jnp.float32(1.0)))
  return params, opt_state, batch.index, jnp.abs(critic.error[0]), metrics
