"""CrossQ's pure losses (Bhatt et al. 2024). Shapes: ``K`` batch, ``C`` critics.

No target networks: the critics' target is made from the critics' own values at ``(s', a')``,
``a' ~ pi(s')``, taken from the same training pass as ``Q(s, a)`` (``joint_critic_values``),
so that Batch Renormalization normalizes the two by the statistics of their mixture (the
paper's point: ``(s', a')`` batches are distributed unlike ``(s, a)`` ones, and normalized
by ``(s, a)``'s statistics alone they look out of distribution). The target's values carry
no gradient. The actor is SAC's, its values taken from the critics' inference pass.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic.losses import bellman_target, critic_loss
from batchrl.agents.actor_critic.networks import Renormed, squashed_sample


def joined(a, b):
  """Two batches (arrays or trees of them) ``[K, ...]`` as one ``[2K, ...]``."""
  return jax.tree.map(lambda x, y: jnp.concatenate([x, y], axis=0), a, b)


def joint_critic_values(nets, critic: Renormed, obs, action, next_obs, next_action):
  """``(Q(s, a) [C, K], Q(s', a') [C, K], new stats)`` from one training pass over the
  ``2K`` joined rows."""
  q, stats = nets.critic_train(critic, joined(obs, next_obs), joined(action, next_action))
  now, later = jnp.split(q, 2, axis=1)
  return now, later, stats


def soft_target(reward, terminated, discount, next_q, next_log_prob, alpha) -> jax.Array:
  """``r + discount (1 - terminated) (min_i Q_i(s', a') - alpha log pi(a'|s'))`` ``[K]``
  (``discount`` the batch's: gamma, or gamma^m after m-step windows), no gradient."""
  value = jnp.min(next_q, axis=0) - alpha * next_log_prob
  return jax.lax.stop_gradient(bellman_target(reward, terminated, discount, value))


def crossq_critic_loss(config, nets, critic_params, critic_stats, items, weight, discount,
                       next_action, next_log_prob, alpha):
  """The critics' TD loss (summed over critics, as SAC's) toward ``soft_target``, both
  sides from one joint training pass; aux: ``(q [C, K], error [C, K], target [K],
  new stats)``."""
  q, next_q, stats = joint_critic_values(nets, Renormed(critic_params, critic_stats),
                                         items.obs, items.action, items.next_obs, next_action)
  target = soft_target(items.reward, items.terminated, discount, next_q, next_log_prob, alpha)
  value, error = critic_loss(q, target, weight, config.clip_loss)
  return value, (q, error, target, stats)


def crossq_actor_loss(nets, actor_params, actor_stats, critic: Renormed, obs, key, alpha):
  """``mean(alpha log pi(a|s) - min_i Q_i(s, a))``, ``a`` reparameterized from the actor's
  training pass, ``Q`` the critics' inference pass; aux: metrics, ``log pi [K]`` for the
  temperature, and the actor's new statistics."""
  (mean, log_std), stats = nets.actor_train(Renormed(actor_params, actor_stats), obs)
  action, log_prob = squashed_sample(key, mean, log_std)
  value = jnp.min(nets.critic(critic, obs, action), axis=0) - alpha * log_prob
  return -jnp.mean(value), ({"log_prob": jnp.mean(log_prob)}, log_prob, stats)
