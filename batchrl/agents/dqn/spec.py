"""The ``dqn``, ``ddqn`` and ``dqn_nstep`` agent types of ``batchrl.Agent.create``.

Keys (TensorForce 0.3 names first, later names, then ``DQNConfig``'s own fields):

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
``double_dqn``                                    Double DQN targets (``ddqn`` forces True)
``clip_loss``, ``huber_loss``                     Huber bound (0 = squared loss)
``n_step``                                        n-step returns (``dqn_nstep``: default 3)
``dueling``                                       a dueling head on the network (or end the
                                                  network with a ``dueling`` layer)
``discount``, ``learning_rate``                   as in DQNConfig
``optimizer``                                     'adam' or ``{"type": "adam",
                                                  "learning_rate": x}`` (DQN's update is Adam)
``actions_exploration``, ``explorations_spec``    the model's epsilon-greedy schedule (a
                                                  ``batchrl.exploration`` spec; None = greedy)
================================================  ==============================================

Exploration: DQN explores inside its own ``act`` (epsilon 1.0 -> 0.1 over 10000 timesteps by
default), so it explores the same way in every driver. The object API's ``exploration=``
argument would act on top of it; give the schedule through ``actions_exploration`` instead.
TensorForce's plumbing keys (``device``, ``session``, ``tf_summary`` ...) are accepted and
ignored.
"""
from __future__ import annotations

import dataclasses
import json

from batchrl.agents.core import Model
from batchrl.agents.dqn.config import DQNConfig
from batchrl.agents.dqn.networks import check_discrete
from batchrl.agents.registry import (IGNORED_KEYS, AgentType, BuildContext, _take_aliases,
                                     check_keys)
from batchrl.configclass import ConfigError

TENSORFORCE_PLUMBING = ("device", "session", "distributed", "global_model", "tf_summary",
                        "tf_summary_level", "tf_summary_interval", "scope", "summary_spec",
                        "saver_spec", "distributed_spec")
_ALIASES = {
    "target_update_frequency": ("target_sync_frequency",),
    "update_target_weight": ("target_update_weight",),
    "clip_loss": ("huber_loss",),
    "exploration": ("actions_exploration", "explorations_spec"),
}
_MEMORY_KEYS = {"capacity": "memory_capacity", "prioritization_weight": "prioritization_weight",
                "prioritization_constant": "prioritization_constant",
                "beta_initial": "beta_initial", "beta_steps": "beta_steps"}
# the flat layout's MLP fields do not apply: the object API builds from a network spec
_OWN = {f.name for f in dataclasses.fields(DQNConfig)} - {"network", "hidden_layers",
                                                           "activation"}


def dqn_keys() -> tuple[str, ...]:
  aliases = {a for names in _ALIASES.values() for a in names}
  return tuple(sorted((_OWN - {"exploration"}) | aliases | {"optimizer"}
                      | set(TENSORFORCE_PLUMBING)))


def memory_values(values: dict, spec) -> None:
  """TensorForce's ``memory`` (a name or a dict) into config ``values``; shared with NAF."""
  """``memory`` as a type name or a dict with ``type`` and options -> config fields."""
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


def optimizer_values(values: dict, spec) -> None:
  """TensorForce's ``optimizer`` ('adam' or a dict) into config ``values``; shared with NAF."""
  if spec is None:
    return
  if spec == "adam":
    return
  if not isinstance(spec, dict) or spec.get("type", "adam") != "adam":
    raise ConfigError(f"optimizer must be 'adam' or {{'type': 'adam', 'learning_rate': x}} "
                      f"(the update is Adam), got {spec!r}.")
  unknown = set(spec) - {"type", "learning_rate"}
  if unknown:
    raise ConfigError(f"unknown optimizer keys {sorted(unknown)}; valid: type, learning_rate.")
  if "learning_rate" in spec:
    if "learning_rate" in values and values["learning_rate"] != spec["learning_rate"]:
      raise ConfigError("learning_rate is given twice (also in optimizer) with different "
                        "values; give one.")
    values["learning_rate"] = spec["learning_rate"]


def dqn_config(kwargs: dict, context: BuildContext, agent: str = "dqn",
               forced: dict | None = None, defaults: dict | None = None) -> DQNConfig:
  """The DQNConfig of ``Agent.create(agent='dqn', **kwargs)``."""
  kwargs = {k: v for k, v in kwargs.items()
            if k not in IGNORED_KEYS and k not in TENSORFORCE_PLUMBING}
  check_keys(kwargs, dqn_keys(), agent)
  try:
    check_discrete(context.action_space)
  except TypeError as e:
    raise ConfigError(str(e)) from None
  values = dict(defaults or {})
  for target, aliases in _ALIASES.items():
    value = _take_aliases(kwargs, target, aliases)
    if value is not dataclasses.MISSING:
      values[target] = value
  if "exploration" in values:
    values["exploration"] = (None if values["exploration"] is None
                             else json.dumps(values["exploration"]))
  optimizer_values(kwargs, kwargs.pop("optimizer", None))
  memory = kwargs.pop("memory", None)
  values.update(kwargs)
  if memory is not None:
    memory_values(values, memory)
  for key, value in (forced or {}).items():
    if key in values and values[key] != value:
      raise ConfigError(f"agent {agent!r} sets {key}={value!r}; got {key}={values[key]!r} "
                        f"(use agent 'dqn' to choose it).")
    values[key] = value
  streams = context.num_streams
  frequency = values.get("update_frequency", DQNConfig.__dataclass_fields__[
      "update_frequency"].default)
  values["update_frequency"] = max(1, round(frequency / streams))
  values["network"] = json.dumps(context.network)
  try:
    return DQNConfig(**values)
  except (TypeError, ValueError) as e:
    raise ConfigError(f"invalid {agent} setting: {e}") from None


def _builder(agent: str, forced: dict | None = None, defaults: dict | None = None):
  def build(kwargs: dict, context: BuildContext) -> Model:
    from batchrl.agents.dqn.agent import make_dqn
    return make_dqn(dqn_config(kwargs, context, agent, forced, defaults), name=agent)
  return build


AGENT_TYPES = [
    AgentType("dqn", "Deep Q-network (replay memory, target network; double, dueling, "
              "n-step and prioritized options)", _builder("dqn"), dqn_keys()),
    AgentType("ddqn", "Double DQN (double_dqn forced)", _builder("ddqn", {"double_dqn": True}),
              dqn_keys()),
    AgentType("dqn_nstep", "DQN with n-step returns (n_step 3 by default)",
              _builder("dqn_nstep", defaults={"n_step": 3}), dqn_keys()),
]
