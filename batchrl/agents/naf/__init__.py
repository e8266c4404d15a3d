"""NAF (normalized advantage functions): Q-learning for continuous actions as a pure ``Model``
over a replay memory (``batchrl.memories``); TensorForce keys in ``batchrl.agents.naf.spec``."""
from batchrl.agents.naf.agent import NAFState, greedy_actions, import_observations, make_naf
from batchrl.agents.naf.config import NAFConfig, pendulum_naf
from batchrl.agents.naf.networks import ActionMap, advantage, lower_triangular, precision

__all__ = ["ActionMap", "NAFConfig", "NAFState", "advantage", "greedy_actions",
           "import_observations", "lower_triangular", "make_naf", "pendulum_naf", "precision"]
