"""DQN's ``AgentFamily`` (``dqn``, ``ddqn``, ``dqn_nstep``): its entry with how to build it."""
from batchrl.agents.dqn import ENTRY
from batchrl.agents.dqn.keys import api_type
from batchrl.agents.dqn.model import make_dqn
from batchrl.agents.family import AgentFamily, replaces_state
from batchrl.agents.replay.q_learning import import_observations

FAMILY = AgentFamily(
    ENTRY,
    api_types=(api_type("dqn"), api_type("ddqn", forced={"double_dqn": True}),
               api_type("dqn_nstep", defaults={"n_step": 3})),
    make=make_dqn,
    host_methods={"import_observations": replaces_state(import_observations)})
