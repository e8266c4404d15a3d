"""The ``crossq`` agent type of ``batchrl.Agent.create``: the shared actor-critic keys
(``batchrl.agents.actor_critic.keys``) plus SAC's temperature keys (``initial_alpha``,
``alpha_learning_rate``, ``target_entropy``) and ``num_critics``, ``policy_delay``,
``adam_beta1``, ``renorm_momentum``, ``renorm_warmup_steps``. Bounded float actions only."""
from __future__ import annotations

from batchrl.agents.actor_critic.keys import actor_critic_config
from batchrl.agents.crossq.config import CrossQConfig
from batchrl.agents.family import BuildContext


def crossq_config(kwargs: dict, context: BuildContext) -> CrossQConfig:
  """The CrossQConfig of ``Agent.create(agent='crossq', **kwargs)``."""
  return actor_critic_config(CrossQConfig, kwargs, context, "crossq")
