"""DQFD's ``AgentFamily``: its entry with how to build it, and its host methods (the
demonstrations, pretraining)."""
from batchrl.agents.dqfd import ENTRY
from batchrl.agents.dqfd.config import DQFDConfig
from batchrl.agents.dqfd.keys import dqfd_config
from batchrl.agents.dqfd.model import growing, import_observations, make_dqfd, pretrain
from batchrl.agents.family import AgentFamily, replaces_state
from batchrl.agents.replay.keys import replay_keys

FAMILY = AgentFamily(
    ENTRY,
    api_types=(ENTRY.api_type("dqfd",
                              lambda kwargs, context: make_dqfd(dqfd_config(kwargs, context)),
                              replay_keys(DQFDConfig)),),
    make=make_dqfd,
    host_methods={"import_observations": replaces_state(import_observations),
                  # they grow the memory as needed: the agent spec follows (batchrl.Agent)
                  "import_demonstrations": growing(replace=False),
                  "set_demonstrations": growing(replace=True),
                  "pretrain": pretrain})
