"""The ``simbav2`` agent type of ``batchrl.Agent.create``: the shared actor-critic keys
(``batchrl.agents.actor_critic.keys``) plus SAC's temperature keys and ``num_critics``,
``num_bins``, ``c_shift``. Bounded float actions and vector observations only; ``network``
may only be 'auto' (its networks are its own)."""
from __future__ import annotations

from batchrl.agents.actor_critic.keys import actor_critic_config
from batchrl.agents.family import BuildContext
from batchrl.agents.simbav2.config import SimbaV2Config


def simbav2_config(kwargs: dict, context: BuildContext) -> SimbaV2Config:
  """The SimbaV2Config of ``Agent.create(agent='simbav2', **kwargs)``."""
  return actor_critic_config(SimbaV2Config, kwargs, context, "simbav2")
