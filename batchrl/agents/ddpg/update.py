"""DDPG's update (Lillicrap et al. 2016), top to bottom: on each of ``repeat_update`` fresh
batches, a critic step toward ``r + gamma (1 - terminated) Q'(s', mu'(s'))``, an actor step
up ``Q(s, mu(s))`` through the new critic (on every ``policy_delay``-th gradient step; 1 by
default), and the targets moved by tau when the update is due a sync. The pieces are
``batchrl.agents.actor_critic.learning``'s. Shapes: ``K`` batch."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic import learning
from batchrl.agents.actor_critic.losses import bellman_target, deterministic_actor_loss
from batchrl.agents.actor_critic.model import ACOptState, ACParams, ACState
from batchrl.agents.actor_critic.networks import ACNetworks
from batchrl.agents.ddpg.config import DDPGConfig
from batchrl.agents.ddpg.losses import ddpg_next_value


def update(config: DDPGConfig, nets: ACNetworks, state: ACState):
  """``repeat_update`` DDPG steps under the replay gate, then the counters."""
  return learning.gated_update(config, state, functools.partial(ddpg_step, config, nets))


def ddpg_step(config: DDPGConfig, nets: ACNetworks, move_targets: jax.Array, state: ACState,
              key: jax.Array, params: ACParams, opt_state: ACOptState):
  """One gradient step on a fresh batch: ``(params, opt_state, index [K], |TD| [K],
  metrics)``."""
  opts = learning.optimizers(config)
  batch_key, _, _ = learning.step_keys(key)
  dropout = learning.dropout_keys(config, key)
  batch = learning.sample_batch(config, state, batch_key)
  items = batch.items

  # critic: toward r + gamma Q'(s', mu'(s')), the target networks'
  next_value = ddpg_next_value(nets.with_dropout(dropout.target), params.target_actor,
                               params.target_critic, items.next_obs)
  target = bellman_target(items.reward, items.terminated, batch.discount, next_value)
  critic = learning.critic_step(config, nets.with_dropout(dropout.critic), opts.critic,
                                params.critic, opt_state.critic, items, batch.weight, target)

  # actor: up Q(s, mu(s)) of the new critic, every policy_delay gradient steps
  objective = functools.partial(deterministic_actor_loss, nets.with_dropout(dropout.actor),
                                critic_params=critic.params, obs=items.obs)
  learn = learning.policy_due(config, opt_state)
  actor, actor_state, actor_loss, metrics = learning.delayed_actor_step(
      config, opts.actor, objective, learn, params.actor, opt_state.actor)

  # targets: Polyak toward the new networks when due
  target_actor, target_critic = learning.sync_targets(config, params, actor, critic.params,
                                                      move_targets)

  params = ACParams(actor, critic.params, target_actor, target_critic, params.log_alpha)
  opt_state = ACOptState(actor_state, critic.opt_state, opt_state.alpha, opt_state.steps + 1)
  metrics = dict(metrics, **learning.step_metrics(target, critic, actor_loss, jnp.float32(0.0),
                                                  learn.astype(jnp.float32)))
  return params, opt_state, batch.index, jnp.abs(critic.error[0]), metrics
