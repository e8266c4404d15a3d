"""The ``tqc`` agent type of ``batchrl.Agent.create``: the shared actor-critic keys
(``batchrl.agents.actor_critic.keys``) plus SAC's temperature keys (``initial_alpha``,
``alpha_learning_rate``, ``target_entropy``) and ``num_critics``, ``num_quantiles``,
``drop_quantiles``. Bounded float actions only."""
from __future__ import annotations

from batchrl.agents.actor_critic.keys import actor_critic_config
from batchrl.agents.family import BuildContext
from batchrl.agents.tqc.config import TQCConfig


def tqc_config(kwargs: dict, context: BuildContext) -> TQCConfig:
  """The TQCConfig of ``Agent.create(agent='tqc', **kwargs)``."""
  return actor_critic_config(TQCConfig, kwargs, context, "tqc")
