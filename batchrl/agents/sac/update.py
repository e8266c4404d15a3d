"""SAC's update (Haarnoja et al. 2018; on one Discrete action Christodoulou 2019), top to
bottom: on each of ``repeat_update`` fresh batches, a critic step of the twins toward the
soft target ``r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s'))``,
``a' ~ pi(s')``; an actor step down ``alpha log pi(a|s) - min_i Q_i(s, a)`` through the new
critics; a temperature step of ``log alpha`` toward ``target_entropy`` (when it learns);
and the targets moved by tau when the update is due a sync. The pieces are
``batchrl.agents.actor_critic.learning``'s; the losses ``losses.py``'s. Shapes: ``K``
batch."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic import learning, temperature
from batchrl.agents.actor_critic.losses import bellman_target
from batchrl.agents.actor_critic.model import ACOptState, ACParams, ACState
from batchrl.agents.actor_critic.networks import ACNetworks
from batchrl.agents.replay import updates as replay
from batchrl.agents.sac.config import SACConfig
from batchrl.agents.sac.losses import sac_actor_loss, sac_next_value


def update(config: SACConfig, nets: ACNetworks, state: ACState):
  """``repeat_update`` SAC steps under the replay gate, then the counters."""
  plan = learning.schedule(config, state)
  key, params, opt_state, mstate, metrics = replay.gated_steps(
      config, plan.memory, state, plan.ready,
      functools.partial(sac_step, config, nets, plan.sync))
  return learning.finish(state, plan, key, params, opt_state, mstate, metrics)


def sac_step(config: SACConfig, nets: ACNetworks, move_targets: jax.Array, state: ACState,
             key: jax.Array, params: ACParams, opt_state: ACOptState):
  """One gradient step on a fresh batch: ``(params, opt_state, index [K], |TD| [K],
  metrics)``."""
  opts = learning.optimizers(config, temperature.learns_alpha(config))
  batch_key, target_key, actor_key = learning.step_keys(key)
  batch = learning.sample_batch(config, state, batch_key)
  items = batch.items
  alpha = jnp.exp(params.log_alpha)

  # critics: toward the soft value of s' (the current actor, the target critics)
  next_value = sac_next_value(nets, params.actor, params.target_critic, items.next_obs,
                              target_key, alpha)
  target = bellman_target(items.reward, items.terminated, config.discount, next_value)
  critic = learning.critic_step(config, nets, opts.critic, params.critic, opt_state.critic,
                                items, batch.weight, target)

  # actor: down alpha log pi - min_i Q_i through the new critics
  objective = functools.partial(sac_actor_loss, nets, critic_params=critic.params,
                                obs=items.obs, key=actor_key, alpha=alpha)
  actor, actor_state, actor_loss, (metrics, log_prob) = learning.actor_step(
      opts.actor, objective, params.actor, opt_state.actor)

  # temperature: log alpha toward the target entropy, with log pi of the actor before its step
  log_alpha, alpha_state, metrics = temperature.learn_temperature(
      config, nets, opts.alpha, params.log_alpha, opt_state.alpha, log_prob, dict(metrics))

  # targets: Polyak toward the new networks when due (the target actor too, unread by SAC:
  # the state is the one every actor-critic agent has)
  target_actor, target_critic = learning.sync_targets(config, params, actor, critic.params,
                                                      move_targets)

  params = ACParams(actor, critic.params, target_actor, target_critic, log_alpha)
  opt_state = ACOptState(actor_state, critic.opt_state, alpha_state, opt_state.steps + 1)
  metrics.update(learning.step_metrics(target, critic, actor_loss, jnp.exp(log_alpha),
                                       jnp.float32(1.0)))
  return params, opt_state, batch.index, jnp.abs(critic.error[0]), metrics
