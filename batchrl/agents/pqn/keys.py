"""The ``pqn`` agent type of ``batchrl.Agent.create`` and JSON agent specs: TensorForce-style
keys where one exists, besides ``PQNConfig``'s own field names; an unknown key is an error
naming the closest valid one.

==========================================  ===============================================
key                                         meaning
==========================================  ===============================================
``batch_size``                              timesteps per update, summed over the parallel
                                            streams (TensorForce's meaning:
                                            ``rollout_length = batch_size /
                                            parallel_interactions``); or give
                                            ``rollout_length`` (``num_steps``) per stream
``epochs``, ``optimization_steps``          passes over the batch per update
                                            (``update_epochs``)
``num_minibatches``                         minibatches per pass (default: as many as
                                            divide the batch into minibatches of >= 32)
``lambda``                                  ``td_lambda``
``optimizer``, ``step_optimizer``           ``'radam'``, ``'adam'`` or ``{'type': ...,
                                            'learning_rate': x}``
``discount``, ``learning_rate``             as in PQNConfig
==========================================  ===============================================

The network is ``Agent.create``'s ``network=``: ``'auto'`` (the ``hidden_layers`` MLP) or a
list of dense / conv2d / flatten layers, each followed by LayerNorm.
"""
from __future__ import annotations

import dataclasses
import json

from batchrl.agents.family import IGNORED_KEYS, BuildContext, build_config, check_keys, take_aliases
from batchrl.agents.pqn.config import PQNConfig, num_minibatches_for
from batchrl.agents.pqn.networks import check_discrete
from batchrl.configclass import ConfigError

ALIASES = {
    "rollout_length": ("num_steps",),
    "update_epochs": ("epochs", "optimization_steps"),
    "td_lambda": ("lambda",),
}
OPTIMIZER_KEYS = ("optimizer", "step_optimizer")
MIN_MINIBATCH = 32  # transitions; the paper's MinAtar/Atari minibatches hold 128


def pqn_keys() -> tuple[str, ...]:
  own = {f.name for f in dataclasses.fields(PQNConfig)} - {"network", "optimizer"}
  aliases = {a for names in ALIASES.values() for a in names}
  return tuple(sorted(own | aliases | set(OPTIMIZER_KEYS) | {"batch_size"}))


def pqn_config(kwargs: dict, context: BuildContext) -> PQNConfig:
  """The PQNConfig of ``Agent.create(agent='pqn', **kwargs)``."""
  check_discrete(context.action_space)
  kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_KEYS}
  check_keys(kwargs, pqn_keys(), "pqn")
  values = {}
  for target, aliases in ALIASES.items():
    value = take_aliases(kwargs, target, aliases)
    if value is not dataclasses.MISSING:
      values[target] = value
  optimizer = take_aliases(kwargs, "optimizer", ("step_optimizer",))
  if optimizer is not dataclasses.MISSING:
    values.update(_optimizer(optimizer))
  batch = kwargs.pop("batch_size", None)
  for key, value in kwargs.items():
    if key in values and values[key] != value:
      raise ConfigError(f"{key} is given twice with different values; give it once.")
    values[key] = value
  streams = context.num_streams
  if batch is not None:
    if "rollout_length" in values:
      raise ConfigError("give batch_size (timesteps per update over all streams) or "
                        "rollout_length (per stream), not both.")
    if not isinstance(batch, int) or batch < 1 or batch % streams:
      raise ConfigError(f"batch_size ({batch!r} timesteps per update) must be a positive "
                        f"multiple of parallel_interactions ({streams}): each stream "
                        "contributes batch_size / parallel_interactions timesteps.")
    values["rollout_length"] = batch // streams
  network = context.network
  if network not in (None, "auto"):
    values["network"] = json.dumps(network)
  config = build_config(PQNConfig, values, "pqn")
  if "num_minibatches" not in values:
    total = config.rollout_length * streams
    most = max(1, total // MIN_MINIBATCH)
    config = config.replace(
        num_minibatches=max(d for d in range(1, most + 1) if total % d == 0))
  num_minibatches_for(config, streams)
  return config


def _optimizer(spec) -> dict:
  """``'radam'`` / ``'adam'`` or ``{'type': ..., 'learning_rate': x}`` -> config values."""
  if isinstance(spec, str):
    spec = {"type": spec}
  if not isinstance(spec, dict) or spec.get("type") not in ("radam", "adam"):
    raise ConfigError(f"optimizer must be 'radam', 'adam' or {{'type': 'radam' | 'adam', "
                      f"'learning_rate': x}}, got {spec!r}.")
  unknown = set(spec) - {"type", "learning_rate"}
  if unknown:
    raise ConfigError(f"unknown optimizer keys {sorted(unknown)}; valid: type, learning_rate.")
  values = {"optimizer": spec["type"]}
  if "learning_rate" in spec:
    values["learning_rate"] = spec["learning_rate"]
  return values
