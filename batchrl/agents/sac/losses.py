"""SAC's pure losses: continuous (Haarnoja et al. 2018) and, for one Discrete action of ``n``
values, discrete (Christodoulou 2019, "Soft Actor-Critic for Discrete Action Settings"; as
CleanRL's sac_atari): with the whole policy ``pi(.|s)`` at hand, expectations over actions are
sums instead of samples. Shapes: ``K`` batch, ``A`` action size, ``n`` values. The temperature
loss is ``batchrl.agents.actor_critic.losses.temperature_objective``; the discrete losses hand
it ``sum_a pi log pi`` (minus the exact entropy) as ``log pi``."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic.losses import bellman_target
from batchrl.agents.actor_critic.networks import squashed_sample


def soft_value(q: jax.Array, log_prob: jax.Array, alpha) -> jax.Array:
  """``min_i Q_i - alpha log pi``: ``q [2, K]``, ``log_prob [K]`` -> ``[K]``."""
  return jnp.min(q, axis=0) - alpha * log_prob


def policy(logits: jax.Array):
  """``(pi, log pi)`` ``[K, n]`` of (masked) logits. A masked action has ``pi`` exactly 0 and
  ``log pi`` 0 here instead of the lowest float: ``pi log pi`` is 0 either way, but its
  derivative in ``pi``, ``log pi`` scaled by alpha > 1, would overflow to inf and ``0 * inf``
  would make every gradient NaN."""
  log_pi = jax.nn.log_softmax(logits, axis=-1)
  pi = jnp.exp(log_pi)
  return pi, jnp.where(pi > 0, log_pi, 0.0)


def discrete_soft_value(q: jax.Array, logits: jax.Array, alpha):
  """``sum_a pi(a) (min_i Q_i(a) - alpha log pi(a))``: ``q [2, K, n]``, ``logits [K, n]`` ->
  ``(value [K], sum_a pi log pi [K])``; a masked action (``pi`` 0) adds an exact 0 to both
  and nothing to their gradients."""
  pi, log_pi = policy(logits)
  neg_entropy = jnp.sum(pi * log_pi, axis=-1)
  return jnp.sum(pi * jnp.min(q, axis=0), axis=-1) - alpha * neg_entropy, neg_entropy


def sac_next_value(nets, actor_params, target_critic, next_obs, key, alpha):
  """The soft value of ``s'`` under the current actor and the target critics ``[K]``;
  discrete: the expectation over the policy, summed."""
  if nets.discrete:
    logits = nets.actor(actor_params, next_obs)
    return discrete_soft_value(nets.q_values(target_critic, next_obs), logits, alpha)[0]
  action, log_prob = squashed_sample(key, *nets.actor(actor_params, next_obs))
  return soft_value(nets.critic(target_critic, next_obs, action), log_prob, alpha)


def sac_target(config, nets, actor_params, target_critic, items, discount, key, alpha):
  """The critics' soft target ``r + discount (1 - terminated) V(s')`` ``[K]``
  (``sac_next_value``; ``discount`` the batch's: gamma, or gamma^m after m-step windows), no
  gradient."""
  next_value = sac_next_value(nets, actor_params, target_critic, items.next_obs, key, alpha)
  return bellman_target(items.reward, items.terminated, discount, next_value)


def sac_actor_loss(nets, actor_params, critic_params, obs, key, alpha):
  """``mean(alpha log pi(a|s) - min_i Q_i(s, a))``, ``a`` reparameterized; aux: metrics and
  ``log pi [K]`` for the temperature. Discrete: ``mean_s sum_a pi(a|s) (alpha log pi(a|s) -
  min_i Q_i(s, a))``, exact, and ``sum_a pi log pi [K]`` for the temperature."""
  if nets.discrete:
    value, neg_entropy = discrete_soft_value(nets.q_values(critic_params, obs),
                                             nets.actor(actor_params, obs), alpha)
    return -jnp.mean(value), ({"log_prob": jnp.mean(neg_entropy)}, neg_entropy)
  action, log_prob = squashed_sample(key, *nets.actor(actor_params, obs))
  value = soft_value(nets.critic(critic_params, obs, action), log_prob, alpha)
  return -jnp.mean(value), ({"log_prob": jnp.mean(log_prob)}, log_prob)
