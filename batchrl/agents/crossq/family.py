"""CrossQ's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.crossq import ENTRY
from batchrl.agents.crossq.config import CrossQConfig
from batchrl.agents.crossq.keys import crossq_config
from batchrl.agents.crossq.model import make_crossq
from batchrl.agents.family import AgentFamily, replaces_state

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("crossq",
                              lambda kwargs, context: make_crossq(crossq_config(kwargs, context)),
                              actor_critic_keys(CrossQConfig)),),
    make=make_crossq,
    host_methods={"import_observations": replaces_state(import_observations)})
