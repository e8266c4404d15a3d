"""TQC's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.family import AgentFamily, replaces_state
from batchrl.agents.tqc import ENTRY
from batchrl.agents.tqc.config import TQCConfig
from batchrl.agents.tqc.keys import tqc_config
from batchrl.agents.tqc.model import make_tqc

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("tqc",
                              lambda kwargs, context: make_tqc(tqc_config(kwargs, context)),
                              actor_critic_keys(TQCConfig)),),
    make=make_tqc,
    host_methods={"import_observations": replaces_state(import_observations)})
