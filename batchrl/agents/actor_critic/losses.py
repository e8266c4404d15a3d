"""Pure losses DDPG, TD3 and SAC share. Shapes: ``K`` batch, ``C`` critics."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from batchrl.agents.replay.losses import td_loss


def bellman_target(reward: jax.Array, terminated: jax.Array, discount: float,
                   next_value: jax.Array) -> jax.Array:
  """``r + gamma (1 - terminated) V(s')`` ``[K]``, no gradient (truncated steps bootstrap)."""
  alive = 1.0 - terminated.astype(jnp.float32)
  return jax.lax.stop_gradient(reward + discount * alive * next_value)


def critic_loss(q: jax.Array, target: jax.Array, weight: jax.Array, clip: float):
  """Each critic's importance-weighted TD loss ``q [C, K]`` against ``target [K]``, summed
  over critics (each learns its own regression); returns ``(loss, error [C, K])``."""
  error = target[None] - q
  return jnp.sum(jnp.mean(weight[None] * td_loss(error, clip), axis=-1)), error


def first_critic(q: jax.Array) -> jax.Array:
  """``Q [C, K] -> Q_1 [K]``: the critic DDPG's and (in the paper) TD3's actor climbs."""
  return q[0]


def smallest_critic(q: jax.Array) -> jax.Array:
  """``Q [C, K] -> min_i Q_i [K]``: the one sbx's TD3 actor climbs."""
  return jnp.min(q, axis=0)


def deterministic_actor_loss(nets, actor_params, critic_params, obs, q_of=first_critic):
  """``-mean Q(s, mu(s))`` (DDPG's and TD3's actor loss), ``Q = q_of(critics)``: its
  gradient is the deterministic policy gradient ``-mean dQ/da * dmu/dtheta``. Returns
  ``(loss, metrics)``."""
  q = q_of(nets.critic(critic_params, obs, nets.actor(actor_params, obs)))
  return -jnp.mean(q), {"policy_q": jnp.mean(q)}


def temperature_objective(log_alpha, log_prob, target_entropy: float):
  """SAC's temperature loss ``-log alpha * mean(log pi + target_entropy)``: alpha grows
  while the policy's entropy ``-log pi`` is below the target, shrinks while above."""
  return -log_alpha * jnp.mean(jax.lax.stop_gradient(log_prob) + target_entropy)
