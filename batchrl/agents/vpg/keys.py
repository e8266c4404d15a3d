"""The ``vpg`` agent type of ``batchrl.Agent.create`` and JSON agent specs.

TensorForce keys (0.3 names first, later ones after) and what they become in ``VPGConfig``:

==============================  ==========================================================
key                             meaning
==============================  ==========================================================
``batch_size``                  timesteps per update, summed over the parallel streams
                                (``rollout_length = batch_size / parallel_interactions``)
``update``                      TensorForce 0.6: ``{'unit': 'timesteps', 'batch_size':
                                n}`` (or ``n``) is ``batch_size``; ``{'unit':
                                'episodes', 'batch_size': n}`` learns from whole episodes,
                                ``n`` or more per update (``batch_unit='episodes'``,
                                ``batch_episodes=n``) and needs ``max_episode_timesteps``
                                (agent key); the agent checks every ``rollout_length``
                                steps per stream (default 1024 / parallel_interactions)
``keep_last``                   accepted (true or false) and without effect: a batch always
                                keeps the observation after its last step and bootstraps
                                from it, which is what keep_last was for
``baseline``                    ``'mlp'`` / ``'linear'`` / ``'cnn'`` / ``'auto'``, ``{'type':
                                'mlp', 'sizes': [..]}``, ``{'type': 'cnn', 'conv_sizes': [..],
                                'dense_sizes': [..]}``, ``{'type': 'network', 'network':
                                spec}`` or a network spec: the 'states' baseline's network
                                (giving it alone means ``baseline_mode='states'``; ``None``
                                means no baseline)
``baseline_mode``               ``None`` / ``'states'`` / ``'network'`` (a value head on the
                                policy's network, trained with it: ``baseline_coef``)
``baseline_optimizer``          ``{'type': 'adam', 'learning_rate': x}`` or ``{'type':
                                'multi_step', 'optimizer': {...}, 'num_steps': n}`` ->
                                ``baseline_learning_rate`` / ``baseline_steps``
``gae_rewards``, ``gae_lambda``  GAE on (with ``gae_lambda``, default 0.97) or off
                                (discounted returns minus the baseline)
``normalize_rewards``           standardize the advantages over each batch
``discount``                    reward discount
``learning_rate``,              the policy's Adam step size (``optimizer`` = ``'adam'`` or
``optimizer``                   ``{'type': 'adam', 'learning_rate': x}``)
``entropy_regularization``      entropy bonus weight (``entropy_coef``)
==============================  ==========================================================

Besides these, every ``VPGConfig`` field but ``network``/``policy_layers`` (the network is
``Agent.create``'s ``network=``) is a valid key.
"""
from __future__ import annotations

from batchrl.agents.family import IGNORED_KEYS, BuildContext, adam_learning_rate, check_keys
from batchrl.agents.policy_gradient import keys as pg_keys
from batchrl.agents.vpg.config import VPGConfig
from batchrl.configclass import ConfigError
from batchrl.errors import did_you_mean

# Object-API defaults (VPGConfig's own stay for named configs).
VPG_DEFAULTS = dict(pg_keys.API_DEFAULTS, learning_rate=1e-3)
VPG_KEYS = ("learning_rate", "optimizer", "step_optimizer", "update")
UPDATE_UNITS = ("timesteps", "episodes")


def vpg_keys() -> tuple[str, ...]:
  return tuple(sorted(pg_keys.own_keys(VPGConfig) | set(pg_keys.TF_KEYS)
                      | set(VPG_KEYS)))


def vpg_config(kwargs: dict, context: BuildContext):
  """The VPGConfig of ``Agent.create(agent='vpg', **kwargs)``."""
  kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_KEYS}
  check_keys(kwargs, vpg_keys(), "vpg")
  values, optimized = dict(VPG_DEFAULTS), {}
  optimizers = [k for k in ("optimizer", "step_optimizer") if k in kwargs]
  if len(optimizers) > 1:
    raise ConfigError("optimizer and step_optimizer mean the same thing; give one of them.")
  for key in optimizers:
    rate = adam_learning_rate(kwargs.pop(key), key)
    if rate is not None:
      optimized["learning_rate"] = rate
  if "update" in kwargs:
    _update_key(kwargs, values, kwargs.pop("update"))
  if values.get("batch_unit") == "episodes" or kwargs.get("batch_unit") == "episodes":
    limit = context.max_episode_timesteps  # Agent.create's, when passed
    if "max_episode_timesteps" not in kwargs:
      if limit is None:
        raise ConfigError("batches of whole episodes need max_episode_timesteps, the longest "
                          "episode, which sizes the buffer: give it among the agent's keys "
                          "(e.g. {'type': 'vpg', 'max_episode_timesteps': 500, 'update': "
                          "{'unit': 'episodes', 'batch_size': 8}}), or to Agent.create "
                          "(max_episode_timesteps=500, or an environment= with a time "
                          "limit).")
      values["max_episode_timesteps"] = limit
  pg_keys.shared_tf_keys(kwargs, values, context.num_streams, optimized)
  return pg_keys.build_config(VPGConfig, kwargs, values, optimized, context.network)


def _update_key(kwargs: dict, values: dict, update) -> None:
  """TensorForce 0.6's ``update``: ``n`` or ``{'unit': 'timesteps', 'batch_size': n}`` is
  ``batch_size=n``; ``{'unit': 'episodes', 'batch_size': n}`` counts whole episodes."""
  if isinstance(update, int) and not isinstance(update, bool):
    update = {"unit": "timesteps", "batch_size": update}
  if not isinstance(update, dict):
    raise ConfigError(f"update must be a batch size (timesteps) or a dict such as "
                      f"{{'unit': 'episodes', 'batch_size': 8}}, got {update!r}.")
  unknown = sorted(set(update) - {"unit", "batch_size"})
  if unknown:
    raise ConfigError(f"unknown update keys {unknown}; valid: unit, batch_size.")
  unit = update.get("unit", "timesteps")
  if unit not in UPDATE_UNITS:
    raise ConfigError(f"update unit must be one of {UPDATE_UNITS}, got "
                      f"{unit!r}{did_you_mean(unit, UPDATE_UNITS)}.")
  if "batch_size" not in update:
    raise ConfigError(f"update needs batch_size ({unit} per update), e.g. "
                      f"{{'unit': {unit!r}, 'batch_size': 8}}.")
  size = update["batch_size"]
  if not isinstance(size, int) or isinstance(size, bool) or size < 1:
    raise ConfigError(f"update batch_size must be an int >= 1 ({unit} per update), got "
                      f"{size!r}.")
  for key in ("batch_size", "batch_unit", "batch_episodes"):
    if key in kwargs:
      raise ConfigError(f"update and {key} both say how large a batch is; give one of them.")
  if unit == "timesteps":
    kwargs["batch_size"] = size
    return
  values["batch_unit"] = "episodes"
  values["batch_episodes"] = size
