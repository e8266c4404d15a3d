"""SimbaV2's update (Lee et al. 2025), top to bottom, in the reference's order: on each of
``repeat_update`` fresh batches (rewards scaled, observations normalized), an actor step
down ``alpha log pi(a|s) - min_i Q_i(s, a)`` through the critics before their step, the
actor's weights projected back on the sphere, and a temperature step toward the target
entropy (every ``policy_delay``-th gradient step, 1 by default); then a critic step on the
cross entropy toward the target distribution of the new actor and temperature
(``losses.py``), the critics' weights projected; and the target critics moved by tau toward
them when the update is due a sync (the target actor is not read). Shapes: ``K`` batch."""
from __future__ import annotations

import functools

import jax.numpy as jnp
import optax

from batchrl.agents.actor_critic import learning, temperature
from batchrl.agents.actor_critic.model import ACOptState, ACParams, ACState
from batchrl.agents.actor_critic.networks import ACNetworks
from batchrl.agents.actor_critic.soft import policy_step
from batchrl.agents.simbav2.config import SimbaV2Config
from batchrl.agents.simbav2.losses import (
  categorical_loss,
  expected_values,
  simbav2_actor_loss,
  simbav2_target,
  support,
)
from batchrl.networks.hyperspherical import project
from batchrl.ops.targets import polyak_update


def update(config: SimbaV2Config, nets: ACNetworks, state: ACState):
  """``repeat_update`` SimbaV2 steps under the replay gate, then the counters."""
  return learning.gated_update(config, state, functools.partial(simbav2_step, config, nets))


def simbav2_step(config: SimbaV2Config, nets: ACNetworks, move_targets, state: ACState, key,
                 params: ACParams, opt_state: ACOptState):
  """One gradient step on a fresh batch: ``(params, opt_state, index [K], |TD| [K],
  metrics)``."""
  opts = learning.optimizers(config, temperature.learns_alpha(config))
  batch_key, target_key, actor_key = learning.step_keys(key)
  batch = learning.sample_batch(config, state, batch_key)
  items = batch.items

  # actor and temperature: through the critics before their step, log alpha toward the
  # target entropy with log pi of the actor before its step
  objective = functools.partial(simbav2_actor_loss, config, nets, critic_params=params.critic,
                                obs=items.obs, key=actor_key, alpha=jnp.exp(params.log_alpha))
  learn = learning.policy_due(config, opt_state)
  actor, actor_state, log_alpha, alpha_state, actor_loss, metrics = policy_step(
      config, nets, opts, objective, learn, params.actor, opt_state.actor, params.log_alpha,
      opt_state.alpha)
  actor = project(actor)
  alpha = jnp.exp(log_alpha)

  # critics: toward the target distribution of the new actor and temperature
  atoms = support(*config.support, config.num_bins)
  target = simbav2_target(config, nets, actor, params.target_critic, items, batch.discount,
                          target_key, alpha)
  critic = learning.critic_step(config, nets, opts.critic, params.critic, opt_state.critic,
                                items, batch.weight, target,
                                loss=functools.partial(categorical_loss, atoms))
  critic_params = project(critic.params)

  # the target critics: Polyak toward the projected critics when due (not projected
  # themselves, as the reference's)
  target_critic = polyak_update(params.target_critic, critic_params,
                                config.update_target_weight, move_targets)

  params = ACParams(actor, critic_params, params.target_actor, target_critic, log_alpha)
  opt_state = ACOptState(actor_state, critic.opt_state, alpha_state, opt_state.steps + 1)
  metrics.update(
      critic_loss=critic.loss, actor_loss=actor_loss,
      q_mean=jnp.mean(expected_values(critic.q, atoms)),
      target_mean=jnp.mean(jnp.sum(target * atoms, axis=-1)),
      td_error=jnp.mean(jnp.abs(critic.error)), alpha=alpha,
      actor_learned=learn.astype(jnp.float32), critic_grad_norm=optax.tree.norm(critic.grads))
  return params, opt_state, batch.index, jnp.abs(critic.error[0]), metrics
