"""The TensorForce keys DDPG, TD3 and SAC share in ``Agent.create`` (TensorForce 0.6's
``dpg`` names where it had them), turned into their configs by ``actor_critic_config``.

====================================  ==========================================================
key                                   meaning
====================================  ==========================================================
``memory``, ``memory_capacity``,      as for the replay agents (``batchrl.agents.replay.keys``)
``batch_size``, ``update_frequency``,
``first_update``, ``repeat_update``
``target_sync_frequency``,            timesteps between updates that move the targets
``target_update_frequency``
``update_target_weight``,             tau of the soft target update
``target_update_weight``
``optimizer``                         the actor's: 'adam' or ``{"type": "adam",
                                      "learning_rate": x}`` (``learning_rate``)
``critic_optimizer``                  the critic's, same forms (``critic_learning_rate``)
``network``, ``actor_network``,       the torso of the actor and each critic is built from the
``critic_network``                    ``network=`` argument; the other two may only be 'auto'
                                      or repeat it
``critic_layers``, ``discount``, ...  the config's own fields
====================================  ==========================================================

Discrete actions are an error naming the agents for them (SAC takes one Discrete action:
``discrete=True``); unbounded float actions an error asking for bounds (the actors end in
tanh) unless ``action_bounds`` gives them. DDPG and TD3
explore inside their own ``act`` (their ``exploration`` field) so every driver explores alike;
the object API's ``exploration=`` argument would add noise on top of it.
"""
from __future__ import annotations

import json

from batchrl.agents.actor_critic.networks import actor_critic_actions
from batchrl.agents.family import IGNORED_KEYS, BuildContext, adam_learning_rate, check_keys
from batchrl.agents.replay.keys import replay_config, replay_keys
from batchrl.configclass import ConfigError

_OWN_KEYS = ("critic_optimizer", "actor_network", "critic_network")
_NOT_KEYS = {"actor_layers"}  # the flat layout's actor MLP; the object API uses network=


def actor_critic_keys(config_class: type) -> tuple[str, ...]:
  """The ``Agent.create`` keys of an actor-critic agent whose config is ``config_class``."""
  return tuple(sorted((set(replay_keys(config_class)) - _NOT_KEYS) | set(_OWN_KEYS)))


def actor_critic_config(config_class: type, kwargs: dict, context: BuildContext, agent: str,
                        discrete: bool = False):
  """The ``config_class`` of ``Agent.create(agent=agent, **kwargs)``; ``discrete``: the agent
  also takes one Discrete action (SAC)."""
  try:
    actor_critic_actions(context.action_space, agent, kwargs.get("action_bounds"), discrete)
  except (TypeError, ValueError) as e:
    raise ConfigError(str(e)) from None
  kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_KEYS}
  check_keys(kwargs, actor_critic_keys(config_class), agent)
  for key in ("actor_network", "critic_network"):
    spec = kwargs.pop(key, "auto")
    if spec != "auto" and json.dumps(spec, sort_keys=True) != json.dumps(context.network,
                                                                         sort_keys=True):
      raise ConfigError(f"{key} differs from network=: {agent} builds the actor and the "
                        f"critics from the one network= spec; give it there (got {spec!r}).")
  critic = kwargs.pop("critic_optimizer", None)
  rate = None if critic is None else adam_learning_rate(critic, "critic_optimizer")
  if rate is not None:
    if kwargs.get("critic_learning_rate", rate) != rate:
      raise ConfigError("critic_learning_rate is given twice (also in critic_optimizer) with "
                        "different values; give one.")
    kwargs["critic_learning_rate"] = rate
  return replay_config(config_class, kwargs, context, agent)
