"""SAC's pure losses (Haarnoja et al. 2018). Shapes: ``K`` batch, ``A`` action size. The
temperature loss is ``batchrl.agents.actor_critic.losses.temperature_objective``."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic.networks import squashed_sample


def soft_value(q: jax.Array, log_prob: jax.Array, alpha) -> jax.Array:
  """``min_i Q_i - alpha log pi``: ``q [2, K]``, ``log_prob [K]`` -> ``[K]``."""
  return jnp.min(q, axis=0) - alpha * log_prob


def sac_next_value(config, nets, params, next_obs, key, alpha):
  """The soft value of ``s'`` under the current actor and the target critics ``[K]``."""
  del config
  action, log_prob = squashed_sample(key, *nets.actor(params.actor, next_obs))
  return soft_value(nets.critic(params.target_critic, next_obs, action), log_prob, alpha)


def sac_actor_loss(config, nets, actor_params, critic_params, obs, key, alpha):
  """``mean(alpha log pi(a|s) - min_i Q_i(s, a))``, ``a`` reparameterized; aux: metrics and
  ``log pi [K]`` for the temperature."""
  del config
  action, log_prob = squashed_sample(key, *nets.actor(actor_params, obs))
  value = soft_value(nets.critic(critic_params, obs, action), log_prob, alpha)
  return -jnp.mean(value), ({"log_prob": jnp.mean(log_prob)}, log_prob)
