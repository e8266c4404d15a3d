"""The entropy temperature of the soft actor-critic agents (SAC, TQC): ``alpha = exp(log
alpha)`` learned toward a target entropy (Haarnoja et al. 2018, "SAC algorithms and
applications"), the default target, and the check that a Discrete action's target is
reachable. ``config`` is a ``StochasticActorConfig``; errors name its fields with the agent's
prefix (``sac.target_entropy``)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from batchrl.agents.actor_critic.learning import adam_step
from batchrl.agents.actor_critic.losses import temperature_objective
from batchrl.agents.actor_critic.networks import ACNetworks
from batchrl.configclass import ConfigError

# The default target entropy of a categorical policy over n actions, as a fraction of the
# largest entropy log n (as CleanRL's sac_atari, whose target_entropy_scale is 0.89;
# Christodoulou (2019) used 0.98). Measured on fused CartPole (n = 2, seed 0, 20k steps, 2x64
# MLPs): with 0.89 the target was out of reach (a policy that balances is decided in the
# states near a fall) and alpha grew without end, to 1500; with 0.72 alpha held near 1.3;
# with 0.5 and 0.3 it settled lower and the greedy policy stayed near 200-350. With 0.7 the
# CartPole named configs reach 500 (batchrl.configs.sac).
DISCRETE_TARGET_ENTROPY_SCALE = 0.7


def learns_alpha(config) -> bool:
  """Whether the temperature learns (``alpha_learning_rate > 0``)."""
  return config.alpha_learning_rate > 0


def target_entropy(config, nets: ACNetworks) -> float:
  """``config.target_entropy``, or when None ``-target_entropy_scale * A`` (``A`` the action
  size) for float actions and ``DISCRETE_TARGET_ENTROPY_SCALE * log n`` for a Discrete
  action of n values. A discrete target at or above ``log n`` (no policy's entropy is
  higher) is a ConfigError."""
  given = config.target_entropy
  if not nets.discrete:
    if given is None:
      return -config.target_entropy_scale * float(nets.actions.size)
    return float(given)
  largest = math.log(nets.actions.n)
  if given is None:
    return DISCRETE_TARGET_ENTROPY_SCALE * largest
  if not float(given) < largest:
    prefix = type(config).__name__.removesuffix("Config").lower()
    raise ConfigError(f"{prefix}.target_entropy must be below log {nets.actions.n} = "
                      f"{largest:.4g} (the entropy of the uniform policy over the "
                      f"{nets.actions.n} actions: alpha would grow without end), got "
                      f"{given!r}.")
  return float(given)


def temperature_step(config, nets: ACNetworks, opt, log_alpha, opt_state, log_prob):
  """One step of ``log alpha`` down ``-log alpha mean(log pi + target_entropy)``:
  ``(log_alpha, opt_state)``; ``log_prob [K]`` (discrete: ``sum_a pi log pi``)."""
  grad = jax.grad(temperature_objective)(log_alpha, log_prob, target_entropy(config, nets))
  return adam_step(opt, grad, opt_state, log_alpha)


def learn_temperature(config, nets: ACNetworks, opt, log_alpha, opt_state, log_prob,
                      metrics: dict):
  """The temperature step when it learns (``opt`` not None), with ``log pi [K]`` of the actor
  before its step; ``(log_alpha, opt_state, metrics)``, the policy's entropy added to a copy
  of ``metrics`` then; else all as given."""
  if opt is None:
    return log_alpha, opt_state, metrics
  log_alpha, opt_state = temperature_step(config, nets, opt, log_alpha, opt_state, log_prob)
  return log_alpha, opt_state, {**metrics, "entropy": -jnp.mean(log_prob)}
