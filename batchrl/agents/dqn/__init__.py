"""DQN, Double DQN, dueling and n-step DQN as a pure ``Model`` over a replay memory
(``batchrl.memories``); TensorForce keys in ``batchrl.agents.dqn.spec``."""
from batchrl.agents.dqn.agent import DQNState, import_observations, make_dqn
from batchrl.agents.dqn.config import DQNConfig, cartpole

__all__ = ["DQNConfig", "DQNState", "cartpole", "import_observations", "make_dqn"]
