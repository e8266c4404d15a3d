"""The ``naf`` agent type of ``batchrl.Agent.create``.

Keys (TensorForce 0.3 names first, later names, then ``NAFConfig``'s own fields):

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
``discount``, ``learning_rate``                   as in NAFConfig
``optimizer``                                     'adam' or ``{"type": "adam",
                                                  "learning_rate": x}``
``actions_exploration``, ``explorations_spec``    the model's noise (a ``batchrl.exploration``
                                                  spec for float actions, e.g.
                                                  ``{"type": "ornstein_uhlenbeck", "sigma":
                                                  0.3}``; None = no noise), in normalized
                                                  units: finite bounds mapped to [-1, 1]
================================================  ==============================================

NAF explores inside its own ``act`` (Ornstein-Uhlenbeck noise, sigma 0.3, theta 0.15, by
default) so every driver explores alike; the object API's ``exploration=`` argument would add
noise on top of it. ``double_q_model`` (TensorForce 0.3 accepted it for NAF) is refused: V is
the maximum of Q, so there is nothing for a second network to pick. Discrete action spaces
are an error that names DQN.
"""
from __future__ import annotations

import dataclasses
import json

from batchrl.agents.core import Model
from batchrl.agents.dqn.spec import (TENSORFORCE_PLUMBING, memory_values,
                                     optimizer_values)
from batchrl.agents.naf.config import NAFConfig
from batchrl.agents.naf.networks import check_continuous
from batchrl.agents.registry import (IGNORED_KEYS, AgentType, BuildContext, _take_aliases,
                                     check_keys)
from batchrl.configclass import ConfigError

_ALIASES = {
    "target_update_frequency": ("target_sync_frequency",),
    "update_target_weight": ("target_update_weight",),
    "clip_loss": ("huber_loss",),
    "exploration": ("actions_exploration", "explorations_spec"),
}
# the flat layout's MLP fields do not apply: the object API builds from a network spec
_OWN = {f.name for f in dataclasses.fields(NAFConfig)} - {"network", "hidden_layers",
                                                           "activation"}


def naf_keys() -> tuple[str, ...]:
  aliases = {a for names in _ALIASES.values() for a in names}
  return tuple(sorted((_OWN - {"exploration"}) | aliases | {"optimizer"}
                      | set(TENSORFORCE_PLUMBING)))


def naf_config(kwargs: dict, context: BuildContext) -> NAFConfig:
  """The NAFConfig of ``Agent.create(agent='naf', **kwargs)``."""
  kwargs = {k: v for k, v in kwargs.items()
            if k not in IGNORED_KEYS and k not in TENSORFORCE_PLUMBING}
  if "double_q_model" in kwargs:
    raise ConfigError("double_q_model does not apply to naf: its next-state value V(s') is "
                      "the maximum of Q already, so no second network picks an action.")
  check_keys(kwargs, naf_keys(), "naf")
  try:
    check_continuous(context.action_space)
  except TypeError as e:
    raise ConfigError(str(e)) from None
  values = {}
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
  frequency = values.get("update_frequency",
                         NAFConfig.__dataclass_fields__["update_frequency"].default)
  values["update_frequency"] = max(1, round(frequency / context.num_streams))
  values["network"] = json.dumps(context.network)
  try:
    return NAFConfig(**values)
  except (TypeError, ValueError) as e:
    raise ConfigError(f"invalid naf setting: {e}") from None


def _build(kwargs: dict, context: BuildContext) -> Model:
  from batchrl.agents.naf.agent import make_naf
  return make_naf(naf_config(kwargs, context))


AGENT_TYPES = [
    AgentType("naf", "Normalized advantage functions: Q-learning for continuous actions "
              "(quadratic advantage, target network, replay memory, OU/Gaussian noise)",
              _build, naf_keys()),
]
