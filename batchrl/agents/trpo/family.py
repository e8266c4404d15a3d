"""TRPO's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.family import AgentFamily
from batchrl.agents.trpo import ENTRY
from batchrl.agents.trpo.keys import trpo_config, trpo_keys
from batchrl.agents.trpo.model import make_trpo

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("trpo",
                              lambda kwargs, context: make_trpo(trpo_config(kwargs, context)),
                              trpo_keys()),),
    make=make_trpo)
