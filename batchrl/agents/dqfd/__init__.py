"""DQFD (deep Q-learning from demonstrations): DQN plus a demonstration memory, pretraining
and a large-margin supervised loss, as a pure ``Model``; TensorForce keys in
``batchrl.agents.dqfd.keys``."""
from batchrl.agents.dqfd.config import DQFDConfig
from batchrl.agents.dqfd.keys import dqfd_config
from batchrl.agents.dqfd.losses import large_margin
from batchrl.agents.dqfd.model import (
  DQFDState,
  NoDemonstrationsError,
  demo_size,
  growing,
  import_demonstrations,
  import_observations,
  make_dqfd,
  pretrain,
  set_demonstrations,
  with_demo_capacity,
)
from batchrl.agents.dqfd.presets import cartpole_dqfd
from batchrl.agents.family import AgentFamily, AgentType, replaces_state
from batchrl.agents.replay.keys import replay_keys

FAMILY = AgentFamily(
    "dqfd", "Deep Q-learning from demonstrations",
    api_types=(AgentType("dqfd", "Deep Q-learning from demonstrations (DQN + demonstration "
                         "memory, pretraining, large-margin loss)",
                         lambda kwargs, context: make_dqfd(dqfd_config(kwargs, context)),
                         replay_keys(DQFDConfig)),),
    config_class=DQFDConfig, make=make_dqfd,
    host_methods={"import_observations": replaces_state(import_observations),
                  # they grow the memory as needed: the agent spec follows (batchrl.Agent)
                  "import_demonstrations": growing(replace=False),
                  "set_demonstrations": growing(replace=True),
                  "pretrain": pretrain})

__all__ = ["DQFDConfig", "DQFDState", "FAMILY", "NoDemonstrationsError", "cartpole_dqfd",
           "demo_size", "import_demonstrations", "import_observations", "large_margin",
           "make_dqfd", "pretrain", "set_demonstrations", "with_demo_capacity"]
