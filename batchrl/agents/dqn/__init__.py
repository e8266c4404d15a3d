"""DQN, Double DQN, dueling and n-step DQN as a pure ``Model`` over a replay memory
(``batchrl.memories``; the model is ``model.py``, the family ``family.py``); TensorForce keys in
``batchrl.agents.dqn.keys``. The Q-learning itself (config, networks, model functions, losses)
is in ``batchrl.agents.replay``, shared with DQFD. This module is the family's entry, free of
JAX: its config and recipes (``recipes.py``)."""
from batchrl.agents.dqn.recipes import cartpole, minatar
from batchrl.agents.family import FamilyEntry
from batchrl.agents.replay.q_config import DQNConfig

ENTRY = FamilyEntry(
    "dqn", "Deep Q-networks (double, dueling, n-step, prioritized replay)",
    agents={"dqn": "Deep Q-network (replay memory, target network; double, dueling, n-step "
                   "and prioritized options)",
            "ddqn": "Double DQN (double_dqn forced)",
            "dqn_nstep": "DQN with n-step returns (n_step 3 by default)"},
    config_class=DQNConfig)

__all__ = ["DQNConfig", "ENTRY", "cartpole", "minatar"]
