"""The ``dpg`` and ``ddpg`` agent types of ``batchrl.Agent.create`` (one family, the same
keys: ``batchrl.agents.actor_critic.keys``, plus ``exploration`` through TensorForce's
``actions_exploration`` / ``explorations_spec``)."""
from __future__ import annotations

from batchrl.agents.actor_critic.keys import actor_critic_config
from batchrl.agents.ddpg.config import DDPGConfig
from batchrl.agents.family import BuildContext


def ddpg_config(kwargs: dict, context: BuildContext, agent: str = "ddpg") -> DDPGConfig:
  """The DDPGConfig of ``Agent.create(agent='ddpg' or 'dpg', **kwargs)``."""
  return actor_critic_config(DDPGConfig, kwargs, context, agent)
