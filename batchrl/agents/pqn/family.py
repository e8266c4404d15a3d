"""PQN's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.family import AgentFamily
from batchrl.agents.pqn import ENTRY
from batchrl.agents.pqn.keys import pqn_config, pqn_keys
from batchrl.agents.pqn.model import make_pqn

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("pqn",
                              lambda kwargs, context: make_pqn(pqn_config(kwargs, context)),
                              pqn_keys()),),
    make=make_pqn)
