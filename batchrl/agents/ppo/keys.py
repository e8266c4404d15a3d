"""The ``ppo`` agent type of ``batchrl.Agent.create`` and JSON agent specs: TensorForce's keys
(0.3 names, then later ones, then ours) with their documented meaning, besides
``PPOConfig``'s own field names; an unknown key is an error naming the closest valid one.

=========================================  =================================================
key                                        meaning
=========================================  =================================================
``batch_size``                             timesteps per update, summed over the parallel
                                           streams (TensorForce's meaning; each stream
                                           contributes ``batch_size / parallel_interactions``)
``optimizer_batch_size``                   timesteps per minibatch (PPOConfig.batch_size)
``epochs``, ``optimization_steps``         passes over the batch per update
``learning_rate``, ``step_optimizer``      Adam step size (``step_optimizer`` =
                                           ``{"type": "adam", "learning_rate": x}``)
``entropy_penalty``,                       entropy bonus weight
``entropy_regularization``
``loss_clipping``,                         clipped-objective epsilon
``likelihood_ratio_clipping``
``discount``, ``gae_lambda``               as in PPOConfig
=========================================  =================================================
"""
from __future__ import annotations

import dataclasses
import json

from batchrl.agents.family import (
  IGNORED_KEYS,
  BuildContext,
  build_config,
  check_keys,
  merge_learning_rate,
  take_aliases,
)
from batchrl.agents.ppo.config import PPOConfig
from batchrl.configclass import ConfigError

_PPO_ALIASES = {
    "update_epochs": ("epochs", "optimization_steps"),
    "entropy_coef": ("entropy_penalty", "entropy_regularization"),
    "clip_range": ("loss_clipping", "likelihood_ratio_clipping"),
}
# TensorForce-flavoured defaults for the object API: the clipped objective and the values
# modern PPO implementations share. BatchPPO's own defaults stay those of PPOConfig.
_PPO_DEFAULTS = dict(
    policy_objective="clip", learning_rate=1e-3, update_epochs=10, discount=0.99,
    gae_lambda=0.95, value_target="lambda_return", value_coef=0.5, entropy_coef=0.01,
    activation="tanh", init_output_factor=0.01, init_std=0.5, max_grad_norm=0.5,
    normalize_observations=False, normalize_rewards=False, adam_epsilon=1e-5)
_PPO_BATCH_DEFAULT = 1024  # timesteps per update
_PPO_MINIBATCH_DEFAULT = 256


def ppo_keys() -> tuple[str, ...]:
  own = {f.name for f in dataclasses.fields(PPOConfig)} - {"batch_size", "network",
                                                              "recurrent", "policy_layers",
                                                              "value_layers"}
  aliases = {a for names in _PPO_ALIASES.values() for a in names}
  return tuple(sorted(own | aliases | {"batch_size", "optimizer_batch_size",
                                       "step_optimizer"}))


def ppo_config(kwargs: dict, context: BuildContext):
  """The PPOConfig of ``Agent.create(agent='ppo', **kwargs)``."""
  kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_KEYS}
  check_keys(kwargs, ppo_keys(), "ppo")
  merge_learning_rate(kwargs, kwargs.pop("step_optimizer", None), "step_optimizer")
  values = dict(_PPO_DEFAULTS)
  for target, aliases in _PPO_ALIASES.items():
    value = take_aliases(kwargs, target, aliases)
    if value is not dataclasses.MISSING:
      values[target] = value
  if "loss_clipping" in kwargs or "likelihood_ratio_clipping" in kwargs:
    values["policy_objective"] = "clip"
  batch = kwargs.pop("batch_size", _PPO_BATCH_DEFAULT)
  minibatch = kwargs.pop("optimizer_batch_size", None)
  values.update(kwargs)
  streams = context.num_streams
  if "rollout_length" not in kwargs:
    if not isinstance(batch, int) or batch < 1 or batch % streams:
      raise ConfigError(f"batch_size ({batch!r} timesteps per update) must be a positive "
                        f"multiple of parallel_interactions ({streams}): each stream "
                        "contributes batch_size / parallel_interactions timesteps.")
    values["rollout_length"] = batch // streams
  total = values["rollout_length"] * streams
  if minibatch is None:
    minibatch = _default_minibatch(total)
  if not isinstance(minibatch, int) or minibatch < 1 or total % minibatch:
    raise ConfigError(f"optimizer_batch_size ({minibatch!r}) must divide batch_size "
                      f"({total} timesteps per update).")
  values["batch_size"] = minibatch
  values["network"] = json.dumps(context.network)
  return build_config(PPOConfig, values, "ppo")


def _default_minibatch(total: int) -> int:
  """The largest divisor of the batch up to 256 timesteps (256 for powers of two)."""
  return max(d for d in range(1, min(_PPO_MINIBATCH_DEFAULT, total) + 1) if total % d == 0)
