"""TD3's update (Fujimoto et al. 2018), top to bottom: on each of ``repeat_update`` fresh
batches, a critic step of the twins toward ``r + gamma (1 - terminated) min_i Q'_i(s', a')``
at the smoothed target action ``a'``; on every ``policy_delay``-th gradient step an actor
step up ``Q(s, mu(s))`` (``actor_q``: Q1 or the smaller twin) through the new critics; and
the targets moved by tau when the update is due a sync, on the actor's steps only
(``targets_with_actor``, the paper's) or on every step (sbx's). The pieces are
``batchrl.agents.actor_critic.learning``'s. Shapes: ``K`` batch."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic import learning
from batchrl.agents.actor_critic.losses import (
  bellman_target,
  deterministic_actor_loss,
  first_critic,
  smallest_critic,
)
from batchrl.agents.actor_critic.model import ACOptState, ACParams, ACState
from batchrl.agents.actor_critic.networks import ACNetworks
from batchrl.agents.td3.config import ACTOR_Q_CHOICES, TD3Config
from batchrl.agents.td3.losses import td3_next_value

# TD3Config.actor_q -> the critic the actor climbs, Q1 or the smaller of the two
ACTOR_Q = {"first": first_critic, "min": smallest_critic}
assert tuple(ACTOR_Q) == ACTOR_Q_CHOICES, "TD3Config.actor_q and ACTOR_Q name other critics"


def update(config: TD3Config, nets: ACNetworks, state: ACState):
  """``repeat_update`` TD3 steps under the replay gate, then the counters."""
  return learning.gated_update(config, state, functools.partial(td3_step, config, nets))


def td3_step(config: TD3Config, nets: ACNetworks, move_targets: jax.Array, state: ACState,
             key: jax.Array, params: ACParams, opt_state: ACOptState):
  """One gradient step on a fresh batch: ``(params, opt_state, index [K], |TD| [K],
  metrics)``."""
  opts = learning.optimizers(config)
  batch_key, target_key, _ = learning.step_keys(key)
  dropout = learning.dropout_keys(config, key)
  batch = learning.sample_batch(config, state, batch_key)
  items = batch.items

  # critics: toward the smaller twin target at the smoothed target action
  next_value = td3_next_value(config, nets.with_dropout(dropout.target), params.target_actor,
                              params.target_critic, items.next_obs, target_key)
  target = bellman_target(items.reward, items.terminated, batch.discount, next_value)
  critic = learning.critic_step(config, nets.with_dropout(dropout.critic), opts.critic,
                                params.critic, opt_state.critic, items, batch.weight, target)

  # actor: on gradient step t (from 1) when t mod policy_delay == 0 (Algorithm 1)
  objective = functools.partial(deterministic_actor_loss, nets.with_dropout(dropout.actor),
                                critic_params=critic.params, obs=items.obs,
                                q_of=ACTOR_Q[config.actor_q])
  learn_actor = learning.policy_due(config, opt_state)
  actor, actor_state, actor_loss, metrics = learning.delayed_actor_step(
      config, opts.actor, objective, learn_actor, params.actor, opt_state.actor)

  # targets: Polyak toward the new networks when due (and, the paper's, on actor steps)
  move = move_targets & learn_actor if config.targets_with_actor else move_targets
  target_actor, target_critic = learning.sync_targets(config, params, actor, critic.params,
                                                      move)

  params = ACParams(actor, critic.params, target_actor, target_critic, params.log_alpha)
  opt_state = ACOptState(actor_state, critic.opt_state, opt_state.alpha, opt_state.steps + 1)
  metrics = dict(metrics, **learning.step_metrics(target, critic, actor_loss, jnp.float32(0.0),
                                                  learn_actor.astype(jnp.float32)))
  return params, opt_state, batch.index, jnp.abs(critic.error[0]), metrics

