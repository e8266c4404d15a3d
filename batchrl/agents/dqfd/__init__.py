"""DQFD (deep Q-learning from demonstrations): DQN plus a demonstration memory, pretraining
and a large-margin supervised loss, as a pure ``Model``; TensorForce keys in
``batchrl.agents.dqfd.spec``."""
from batchrl.agents.dqfd.agent import (DQFDState, NoDemonstrationsError, demo_size,
                                       import_demonstrations, import_observations,
                                       make_dqfd, pretrain,
                                       set_demonstrations)
from batchrl.agents.dqfd.config import DQFDConfig, cartpole_dqfd
from batchrl.agents.dqfd.losses import large_margin

__all__ = ["DQFDConfig", "DQFDState", "NoDemonstrationsError", "cartpole_dqfd", "demo_size",
           "import_demonstrations", "import_observations", "large_margin", "make_dqfd",
           "pretrain", "set_demonstrations"]
