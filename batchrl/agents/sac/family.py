"""SAC's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.family import AgentFamily, replaces_state
from batchrl.agents.sac import ENTRY
from batchrl.agents.sac.config import SACConfig
from batchrl.agents.sac.keys import sac_config
from batchrl.agents.sac.model import make_sac

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("sac",
                              lambda kwargs, context: make_sac(sac_config(kwargs, context)),
                              actor_critic_keys(SACConfig)),),
    make=make_sac,
    host_methods={"import_observations": replaces_state(import_observations)})
