"""The TensorForce keys every replay agent (DQN, DDQN, DQFD, NAF, DDPG, TD3, SAC) shares in
the object API, turned into its config (``replay_config``); each agent's ``keys.py`` adds its
own keys and checks. TensorForce 0.3 names first, later names after:

================================================  ==============================================
key                                               meaning
================================================  ==============================================
``memory``                                        'replay', 'prioritized_replay',
                                                  'naive_prioritized_replay', or a dict with
                                                  ``type`` and ``capacity``,
                                                  ``prioritization_weight``,
                                                  ``prioritization_constant``, ``beta_initial``,
                                                  ``beta_steps``
``memory_capacity``                               transitions the memory holds
``batch_size``                                    transitions per gradient step
``update_frequency``                              timesteps between updates, summed over the
                                                  parallel streams (rounded to whole rows of
                                                  ``parallel_interactions``)
``first_update``                                  timesteps before the first update
``repeat_update``                                 gradient steps per update
``target_update_frequency``,                      timesteps between target updates
``target_sync_frequency``
``update_target_weight``, ``target_update_weight``  tau of the target update
``clip_loss``, ``huber_loss``                     Huber bound (0 = squared loss)
``discount``, ``learning_rate``                   as in the agent's config
``optimizer``                                     'adam' or ``{"type": "adam",
                                                  "learning_rate": x}`` (the updates are Adam)
================================================  ==============================================

TensorForce's plumbing keys (``device``, ``session``, ``tf_summary`` ...) are accepted and
ignored.
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
from batchrl.configclass import ConfigError

TENSORFORCE_PLUMBING = ("device", "session", "distributed", "global_model", "tf_summary",
                        "tf_summary_level", "tf_summary_interval", "scope", "summary_spec",
                        "saver_spec", "distributed_spec")
ALIASES = {
    "target_update_frequency": ("target_sync_frequency",),
    "update_target_weight": ("target_update_weight",),
    "clip_loss": ("huber_loss",),
    "exploration": ("actions_exploration", "explorations_spec"),
}
_MEMORY_KEYS = {"capacity": "memory_capacity", "prioritization_weight": "prioritization_weight",
                "prioritization_constant": "prioritization_constant",
                "beta_initial": "beta_initial", "beta_steps": "beta_steps"}
# the flat layout's MLP fields do not apply: the object API builds from a network spec
_FLAT_LAYOUT = {"network", "hidden_layers", "activation"}


def replay_keys(config_class: type) -> tuple[str, ...]:
  """The keys of a replay agent whose config is ``config_class``."""
  own = {f.name for f in dataclasses.fields(config_class)} - _FLAT_LAYOUT - {"exploration"}
  aliases = {a for names in ALIASES.values() for a in names}
  return tuple(sorted(own | aliases | {"optimizer"} | set(TENSORFORCE_PLUMBING)))


def replay_config(config_class: type, kwargs: dict, context: BuildContext, agent: str,
                  defaults: dict | None = None, forced: dict | None = None):
  """The ``config_class`` of ``Agent.create(agent=agent, **kwargs)``: aliases, ``memory`` and
  ``optimizer`` dicts, ``update_frequency`` in timesteps over all streams, and ``forced``
  values the agent type fixes (``ddqn``: double_dqn)."""
  kwargs = {k: v for k, v in kwargs.items()
            if k not in IGNORED_KEYS and k not in TENSORFORCE_PLUMBING}
  check_keys(kwargs, replay_keys(config_class), agent)
  values = dict(defaults or {})
  for target, aliases in ALIASES.items():
    value = take_aliases(kwargs, target, aliases)
    if value is not dataclasses.MISSING:
      values[target] = value
  if "exploration" in values:
    values["exploration"] = (None if values["exploration"] is None
                             else json.dumps(values["exploration"]))
  merge_learning_rate(kwargs, kwargs.pop("optimizer", None), "optimizer")
  memory = kwargs.pop("memory", None)
  values.update(kwargs)
  if memory is not None:
    memory_values(values, memory)
  for key, value in (forced or {}).items():
    if key in values and values[key] != value:
      raise ConfigError(f"agent {agent!r} sets {key}={value!r}; got {key}={values[key]!r} "
                        f"(use agent 'dqn' to choose it).")
    values[key] = value
  frequency = values.get("update_frequency",
                         config_class.__dataclass_fields__["update_frequency"].default)
  values["update_frequency"] = max(1, round(frequency / context.num_streams))
  values["network"] = json.dumps(context.network)
  return build_config(config_class, values, agent)


def memory_values(values: dict, spec) -> None:
  """TensorForce's ``memory``: a type name or a dict with ``type`` and options -> config
  ``values``."""
  if isinstance(spec, str):
    values["memory"] = spec
    return
  if not isinstance(spec, dict) or "type" not in spec:
    raise ConfigError(f"memory must be a type name or a dict with 'type', got {spec!r}.")
  for key, value in spec.items():
    if key == "type":
      values["memory"] = value
    elif key in _MEMORY_KEYS:
      field = _MEMORY_KEYS[key]
      if field in values and values[field] != value:
        raise ConfigError(f"{field} is given twice (also as memory[{key!r}]) with different "
                          "values; give one.")
      values[field] = value
    else:
      valid = ", ".join(["type", *_MEMORY_KEYS])
      raise ConfigError(f"unknown memory key {key!r}; valid: {valid}.")
