"""TD3's pure losses (Fujimoto et al. 2018). Shapes: ``K`` batch, ``A`` action size."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def smoothed_action(action: jax.Array, noise: jax.Array, clip: float) -> jax.Array:
  """Target policy smoothing: ``clip(a + clip(noise, -c, c), -1, 1)`` ``[K, A]``."""
  return jnp.clip(action + jnp.clip(noise, -clip, clip), -1.0, 1.0)


def twin_next_value(next_q: jax.Array) -> jax.Array:
  """The smaller of the twin target critics ``[2, K] -> [K]`` (clipped double Q)."""
  return jnp.min(next_q, axis=0)


def td3_next_value(config, nets, target_actor, target_critic, next_obs, key):
  """``min_i Q'_i(s', smoothed mu'(s'))`` ``[K]``, the noise ``target_noise`` times a normal
  draw of ``key`` clipped to ``target_noise_clip``."""
  action = nets.actor(target_actor, next_obs)
  noise = config.target_noise * jax.random.normal(key, action.shape, action.dtype)
  action = smoothed_action(action, noise, config.target_noise_clip)
  return twin_next_value(nets.critic(target_critic, next_obs, action))
