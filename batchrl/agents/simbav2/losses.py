"""SimbaV2's pure losses (Lee et al. 2025; the reference's ``simbaV2_update.py``). Shapes:
``K`` batch, ``C`` critics, ``B`` bins, ``A`` action size.

Each critic gives a categorical distribution over the fixed ``support [B]`` (evenly spaced
over ``[low, high]``); its value is the distribution's mean. The critics learn by cross
entropy toward the target distribution: the atoms ``r + discount (1 - terminated) (z_j -
alpha log pi(a'|s'))``, clipped to the support, with the probabilities of the target critic
whose expected value is smallest at ``(s', a')``, ``a' ~ pi(s')``, projected back on the
support (C51's projection, Bellemare et al. 2017). The actor climbs ``min_i Q_i(s, a) -
alpha log pi(a|s)``, ``Q_i`` the critics' expected values.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic.networks import squashed_sample


def support(low: float, high: float, bins: int) -> jax.Array:
  """The ``[B]`` atoms ``low, ..., high``, evenly spaced."""
  return jnp.linspace(low, high, bins, dtype=jnp.float32)


def expected_values(logits: jax.Array, atoms: jax.Array) -> jax.Array:
  """The means of the distributions of ``logits [..., B]`` over ``atoms [B]``: ``[...]``."""
  return jnp.sum(jax.nn.softmax(logits, axis=-1) * atoms, axis=-1)


def projected(probs: jax.Array, values: jax.Array, atoms: jax.Array) -> jax.Array:
  """The distribution ``probs [K, B]`` at ``values [K, B]`` (within the support) moved onto
  ``atoms [B]``: each value's mass split between the two atoms around it, in proportion to
  its nearness (all of it to an atom it sits on): ``[K, B]``, each row summing to 1."""
  spacing = (atoms[-1] - atoms[0]) / (atoms.shape[0] - 1)
  position = (values - atoms[0]) / spacing  # [K, B] in atom units
  share = jax.nn.relu(1.0 - jnp.abs(position[..., None] - jnp.arange(atoms.shape[0])))
  return jnp.einsum("kj,kji->ki", probs, share)  # [K, B(from), B(to)] summed over from


def smallest_distribution(logits: jax.Array, atoms: jax.Array) -> jax.Array:
  """Per sample, the distribution ``[K, B]`` of the critic (of ``logits [C, K, B]``) whose
  expected value is smallest."""
  probs = jax.nn.softmax(logits, axis=-1)
  pick = jnp.argmin(jnp.sum(probs * atoms, axis=-1), axis=0)  # [K]
  return jnp.take_along_axis(probs, pick[None, :, None], axis=0)[0]


def simbav2_target(config, nets, actor_params, target_critic, items, discount, key,
                   alpha) -> jax.Array:
  """The critics' target distribution ``[K, B]`` (no gradient): the smallest target
  critic's distribution at ``a' ~ pi(s')``, its atoms moved to ``r + discount (1 -
  terminated) (z_j - alpha log pi(a'|s'))`` (``discount`` the batch's: gamma, or gamma^m
  ``[K]`` after m-step windows), clipped to the support and projected back on it."""
  atoms = support(*config.support, config.num_bins)
  action, log_prob = squashed_sample(key, *nets.actor(actor_params, items.next_obs))
  probs = smallest_distribution(nets.critic(target_critic, items.next_obs, action), atoms)
  alive = 1.0 - items.terminated.astype(jnp.float32)
  scale = jnp.reshape(discount * alive, (-1, 1))
  values = items.reward[:, None] + scale * (atoms[None] - alpha * log_prob[:, None])
  values = jnp.clip(values, atoms[0], atoms[-1])
  return jax.lax.stop_gradient(projected(probs, values, atoms))


def categorical_loss(atoms: jax.Array, logits: jax.Array, target: jax.Array,
                     weight: jax.Array):
  """The critics' loss: for each critic the importance-weighted (``weight [K]``) mean over
  samples of the cross entropy ``-sum_j target_j log p_j`` of ``logits [C, K, B]`` against
  ``target [K, B]``, summed over critics. ``(loss, error [C, K])``, the error the target's
  mean minus each critic's (the TD error of the values, for priorities)."""
  cross_entropy = -jnp.sum(target[None] * jax.nn.log_softmax(logits, axis=-1), axis=-1)
  loss = jnp.sum(jnp.mean(weight[None] * cross_entropy, axis=-1))
  error = jnp.sum(target * atoms, axis=-1)[None] - expected_values(logits, atoms)
  return loss, error


def simbav2_actor_loss(config, nets, actor_params, critic_params, obs, key, alpha):
  """``mean(alpha log pi(a|s) - min_i Q_i(s, a))``, ``a`` reparameterized, ``Q_i`` the
  critics' expected values; aux: metrics and ``log pi [K]`` for the temperature."""
  atoms = support(*config.support, config.num_bins)
  action, log_prob = squashed_sample(key, *nets.actor(actor_params, obs))
  q = jnp.min(expected_values(nets.critic(critic_params, obs, action), atoms), axis=0)
  return (jnp.mean(alpha * log_prob - q),
          ({"log_prob": jnp.mean(log_prob), "policy_q": jnp.mean(q)}, log_prob))
