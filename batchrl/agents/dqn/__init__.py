"""DQN, Double DQN, dueling and n-step DQN as a pure ``Model`` over a replay memory
(``batchrl.memories``); TensorForce keys in ``batchrl.agents.dqn.keys``. The Q-learning
itself (config, networks, model functions, losses) is in ``batchrl.agents.replay``, shared
with DQFD."""
from batchrl.agents.dqn.keys import api_type
from batchrl.agents.dqn.model import make_dqn
from batchrl.agents.dqn.presets import cartpole
from batchrl.agents.family import AgentFamily, replaces_state
from batchrl.agents.replay.q_config import DQNConfig
from batchrl.agents.replay.q_learning import DQNState, import_observations

FAMILY = AgentFamily(
    "dqn", "Deep Q-networks (double, dueling, n-step, prioritized replay)",
    api_types=(
        api_type("dqn", "Deep Q-network (replay memory, target network; double, dueling, "
                 "n-step and prioritized options)"),
        api_type("ddqn", "Double DQN (double_dqn forced)", forced={"double_dqn": True}),
        api_type("dqn_nstep", "DQN with n-step returns (n_step 3 by default)",
                 defaults={"n_step": 3})),
    config_class=DQNConfig, make=make_dqn,
    host_methods={"import_observations": replaces_state(import_observations)})

__all__ = ["DQNConfig", "DQNState", "FAMILY", "cartpole", "import_observations", "make_dqn"]
