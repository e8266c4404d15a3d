"""PPO's ``AgentFamily``: its entry with how to build it."""
from batchrl.agents.family import AgentFamily
from batchrl.agents.ppo import ENTRY
from batchrl.agents.ppo.keys import ppo_config
from batchrl.agents.ppo.model import make_ppo

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("ppo",
                              lambda kwargs, context: make_ppo(ppo_config(kwargs, context))),),
    make=make_ppo)
