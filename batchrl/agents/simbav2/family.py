"""SimbaV2's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.family import AgentFamily, replaces_state
from batchrl.agents.simbav2 import ENTRY
from batchrl.agents.simbav2.config import SimbaV2Config
from batchrl.agents.simbav2.keys import simbav2_config
from batchrl.agents.simbav2.model import make_simbav2

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("simbav2",
                              lambda kwargs, context: make_simbav2(simbav2_config(kwargs,
                                                                                  context)),
                              actor_critic_keys(SimbaV2Config)),),
    make=make_simbav2,
    host_methods={"import_observations": replaces_state(import_observations)})
