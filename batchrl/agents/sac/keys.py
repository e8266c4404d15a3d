"""The ``sac`` agent type of ``batchrl.Agent.create``: the shared actor-critic keys
(``batchrl.agents.actor_critic.keys``) plus ``initial_alpha``, ``alpha_learning_rate``,
``target_entropy`` and ``log_std_head`` (TQC and CrossQ take them too). SAC explores by
sampling its policy, so it has no exploration keys. It takes bounded float actions or one
Discrete action (discrete SAC)."""
from __future__ import annotations

from batchrl.agents.actor_critic.keys import actor_critic_config
from batchrl.agents.family import BuildContext
from batchrl.agents.sac.config import SACConfig


def sac_config(kwargs: dict, context: BuildContext) -> SACConfig:
  """The SACConfig of ``Agent.create(agent='sac', **kwargs)``."""
  return actor_critic_config(SACConfig, kwargs, context, "sac", discrete=True)
