"""DQFD (deep Q-learning from demonstrations): DQN plus a demonstration memory, pretraining
and a large-margin supervised loss, as a pure ``Model`` (``model.py``; its family,
``family.py``); TensorForce keys in ``batchrl.agents.dqfd.keys``. This module is the family's
entry, free of JAX: its config and recipes (``recipes.py``)."""
from batchrl.agents.dqfd.config import DQFDConfig
from batchrl.agents.dqfd.recipes import cartpole_dqfd
from batchrl.agents.family import FamilyEntry

ENTRY = FamilyEntry(
    "dqfd", "Deep Q-learning from demonstrations",
    agents={"dqfd": "Deep Q-learning from demonstrations (DQN + demonstration memory, "
                    "pretraining, large-margin loss)"},
    config_class=DQFDConfig)

__all__ = ["DQFDConfig", "ENTRY", "cartpole_dqfd"]
