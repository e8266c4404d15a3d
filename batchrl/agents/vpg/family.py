"""VPG's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.family import AgentFamily
from batchrl.agents.vpg import ENTRY
from batchrl.agents.vpg.keys import vpg_config, vpg_keys
from batchrl.agents.vpg.model import make_vpg

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("vpg",
                              lambda kwargs, context: make_vpg(vpg_config(kwargs, context)),
                              vpg_keys()),),
    make=make_vpg)
