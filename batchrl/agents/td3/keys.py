"""The ``td3`` agent type of ``batchrl.Agent.create``: the shared actor-critic keys
(``batchrl.agents.actor_critic.keys``) plus ``target_noise``, ``target_noise_clip`` and
``policy_delay``."""
from __future__ import annotations

from batchrl.agents.actor_critic.keys import actor_critic_config
from batchrl.agents.family import BuildContext
from batchrl.agents.td3.config import TD3Config


def td3_config(kwargs: dict, context: BuildContext) -> TD3Config:
  """The TD3Config of ``Agent.create(agent='td3', **kwargs)``."""
  return actor_critic_config(TD3Config, kwargs, context, "td3")
