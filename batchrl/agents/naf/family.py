"""NAF's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.family import AgentFamily, replaces_state
from batchrl.agents.naf import ENTRY
from batchrl.agents.naf.config import NAFConfig
from batchrl.agents.naf.keys import naf_config
from batchrl.agents.naf.model import import_observations, make_naf
from batchrl.agents.replay.keys import replay_keys

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("naf",
                              lambda kwargs, context: make_naf(naf_config(kwargs, context)),
                              replay_keys(NAFConfig)),),
    make=make_naf,
    host_methods={"import_observations": replaces_state(import_observations)})
