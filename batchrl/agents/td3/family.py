"""TD3's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.family import AgentFamily, replaces_state
from batchrl.agents.td3 import ENTRY
from batchrl.agents.td3.config import TD3Config
from batchrl.agents.td3.keys import td3_config
from batchrl.agents.td3.model import make_td3

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("td3",
                              lambda kwargs, context: make_td3(td3_config(kwargs, context)),
                              actor_critic_keys(TD3Config)),),
    make=make_td3,
    host_methods={"import_observations": replaces_state(import_observations)})
