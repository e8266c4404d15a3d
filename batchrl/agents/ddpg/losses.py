"""DDPG's pure losses (Lillicrap et al. 2016). Shapes: ``K`` batch, ``A`` action size."""
from __future__ import annotations

import jax.numpy as jnp


def ddpg_next_value(config, nets, params, next_obs, key, alpha):
  """``Q'(s', mu'(s'))`` ``[K]``: the target critic at the target actor's action."""
  del config, key, alpha
  action = nets.actor(params.target_actor, next_obs)
  return nets.critic(params.target_critic, next_obs, action)[0]


def deterministic_actor_loss(config, nets, actor_params, critic_params, obs, key, alpha):
  """``-mean Q_1(s, mu(s))``: its gradient is the deterministic policy gradient
  ``-mean dQ/da * dmu/dtheta`` (the first critic's, as in TD3)."""
  del config, key, alpha
  q = nets.critic(critic_params, obs, nets.actor(actor_params, obs))[0]
  return -jnp.mean(q), ({"policy_q": jnp.mean(q)}, None)
