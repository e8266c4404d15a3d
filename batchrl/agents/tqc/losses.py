"""TQC's pure losses (Kuznetsov et al. 2020). Shapes: ``K`` batch, ``C`` critics, ``Q``
quantiles per critic, ``M`` target quantiles kept (``C * (Q - drop)``).

The critics regress on the quantile Huber loss (Dabney et al. 2018, kappa 1) between each
critic's ``Q`` quantiles and the ``M`` target atoms; the target is the pooled, sorted
quantiles of the target critics at ``a' ~ pi(s')`` with the largest ``C * drop`` dropped,
minus ``alpha log pi(a'|s')``. The actor climbs the mean of every quantile of every critic.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic.losses import bellman_target
from batchrl.agents.actor_critic.networks import squashed_sample


def truncated_quantiles(quantiles: jax.Array, drop: int) -> jax.Array:
  """The ``[C, K, Q]`` quantiles of ``C`` critics pooled per sample, sorted and the largest
  ``C * drop`` dropped: ``[K, C * (Q - drop)]``."""
  num_critics, batch, num_quantiles = quantiles.shape
  pooled = jnp.moveaxis(quantiles, 0, 1).reshape(batch, num_critics * num_quantiles)
  return jnp.sort(pooled, axis=-1)[:, :num_critics * (num_quantiles - drop)]


def quantile_fractions(num_quantiles: int) -> jax.Array:
  """The fractions ``(i + 0.5) / Q`` the ``Q`` outputs of a critic estimate ``[Q]``."""
  return (jnp.arange(num_quantiles, dtype=jnp.float32) + 0.5) / num_quantiles


def quantile_huber_loss(quantiles: jax.Array, target: jax.Array, weight: jax.Array):
  """The critics' loss: for each critic, the mean over samples (weighted by ``weight [K]``),
  quantiles and target atoms of ``|tau_i - 1{delta < 0}| huber(delta)``, ``delta = target_j -
  quantile_i``; summed over critics (each learns its own regression, as sbx's separate
  critic states). ``quantiles [C, K, Q]``, ``target [K, M]`` -> ``(loss, error [C, K])``,
  the error ``mean(target) - mean(quantiles)`` (the TD error of the means, for
  priorities)."""
  fractions = quantile_fractions(quantiles.shape[-1])
  delta = target[None, :, None, :] - quantiles[..., None]  # [C, K, Q, M]
  size = jnp.abs(delta)
  huber = jnp.where(size > 1.0, size - 0.5, 0.5 * jnp.square(delta))
  per_pair = jnp.abs(fractions[:, None] - (delta < 0).astype(jnp.float32)) * huber
  per_sample = jnp.mean(per_pair, axis=(2, 3))  # [C, K]
  loss = jnp.sum(jnp.mean(weight[None] * per_sample, axis=-1))
  return loss, jnp.mean(target, axis=-1)[None] - jnp.mean(quantiles, axis=-1)


def tqc_target(config, nets, actor_params, target_critic, items, discount, key,
               alpha) -> jax.Array:
  """``r + discount (1 - terminated) (z'_j - alpha log pi(a'|s'))`` for the kept target atoms
  ``z'`` of the target critics at ``a' ~ pi(s')`` (``truncated_quantiles``; ``discount`` the
  batch's: gamma, or gamma^m ``[K]`` after m-step windows): ``[K, M]``, no gradient."""
  action, log_prob = squashed_sample(key, *nets.actor(actor_params, items.next_obs))
  kept = truncated_quantiles(nets.critic(target_critic, items.next_obs, action),
                             config.drop_quantiles)
  return bellman_target(items.reward[:, None], items.terminated[:, None],
                        jnp.reshape(discount, (-1, 1)), kept - alpha * log_prob[:, None])


def tqc_actor_loss(nets, actor_params, critic_params, obs, key, alpha):
  """``mean(alpha log pi(a|s) - mean_{c, i} Z_{c, i}(s, a))``, ``a`` reparameterized; aux:
  metrics and ``log pi [K]`` for the temperature."""
  action, log_prob = squashed_sample(key, *nets.actor(actor_params, obs))
  value = jnp.mean(nets.critic(critic_params, obs, action), axis=(0, 2))
  return jnp.mean(alpha * log_prob - value), ({"log_prob": jnp.mean(log_prob)}, log_prob)
