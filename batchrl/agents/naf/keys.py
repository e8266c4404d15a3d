"""The ``naf`` agent type of ``batchrl.Agent.create``.

Keys: the replay keys (``batchrl.agents.replay.keys``: ``memory``, ``batch_size``,
``update_frequency``, ``first_update``, ``repeat_update``, targets, loss, optimizer), plus
``NAFConfig``'s own fields:

================================================  ==============================================
key                                               meaning
================================================  ==============================================
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

from batchrl.agents.family import BuildContext
from batchrl.agents.naf.config import NAFConfig
from batchrl.agents.naf.networks import check_continuous
from batchrl.agents.replay.keys import replay_config
from batchrl.configclass import ConfigError


def naf_config(kwargs: dict, context: BuildContext) -> NAFConfig:
  """The NAFConfig of ``Agent.create(agent='naf', **kwargs)``."""
  if "double_q_model" in kwargs:
    raise ConfigError("double_q_model does not apply to naf: its next-state value V(s') is "
                      "the maximum of Q already, so no second network picks an action.")
  try:
    check_continuous(context.action_space)
  except TypeError as e:
    raise ConfigError(str(e)) from None
  return replay_config(NAFConfig, kwargs, context, "naf")
