"""DDPG's ``AgentFamily`` (``ddpg`` and ``dpg``): its entry with how to build it."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.ddpg import ENTRY
from batchrl.agents.ddpg.config import DDPGConfig
from batchrl.agents.ddpg.keys import ddpg_config
from batchrl.agents.ddpg.model import make_ddpg
from batchrl.agents.family import AgentFamily, AgentType, replaces_state


def _api_type(name: str) -> AgentType:
  return ENTRY.api_type(name, lambda kwargs, context: make_ddpg(ddpg_config(kwargs, context, name),
                                                                 name),
                        actor_critic_keys(DDPGConfig))


FAMILY = AgentFamily(
    ENTRY, api_types=(_api_type("ddpg"), _api_type("dpg")), make=make_ddpg,
    host_methods={"import_observations": replaces_state(import_observations)})
