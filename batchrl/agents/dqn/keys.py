"""The ``dqn``, ``ddqn`` and ``dqn_nstep`` agent types of ``batchrl.Agent.create``; their keys
(the replay keys plus ``DQNConfig``'s own) are read by ``batchrl.agents.replay.q_keys``, which
DQFD shares."""
from __future__ import annotations

from batchrl.agents.core import Model
from batchrl.agents.dqn import ENTRY
from batchrl.agents.dqn.model import make_dqn
from batchrl.agents.family import AgentType, BuildContext
from batchrl.agents.replay.keys import replay_keys
from batchrl.agents.replay.q_config import DQNConfig
from batchrl.agents.replay.q_keys import dqn_config


def api_type(agent: str, forced: dict | None = None, defaults: dict | None = None) -> AgentType:
  """The ``Agent.create`` name ``agent`` of DQN's entry, with ``forced`` / ``defaults``
  values."""
  def build(kwargs: dict, context: BuildContext) -> Model:
    return make_dqn(dqn_config(kwargs, context, agent, forced, defaults), name=agent)
  return ENTRY.api_type(agent, build, replay_keys(DQNConfig))
