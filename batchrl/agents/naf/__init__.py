"""NAF (normalized advantage functions): Q-learning for continuous actions as a pure ``Model``
over a replay memory (``batchrl.memories``); TensorForce keys in ``batchrl.agents.naf.keys``."""
from batchrl.agents.family import AgentFamily, AgentType, replaces_state
from batchrl.agents.naf.config import NAFConfig
from batchrl.agents.naf.keys import naf_config
from batchrl.agents.naf.model import NAFState, greedy_actions, import_observations, make_naf
from batchrl.agents.naf.networks import advantage, lower_triangular, precision
from batchrl.agents.naf.presets import pendulum_naf
from batchrl.agents.replay.keys import replay_keys

FAMILY = AgentFamily(
    "naf", "Normalized advantage functions (Q-learning for continuous actions)",
    api_types=(AgentType("naf", "Normalized advantage functions: Q-learning for continuous "
                         "actions (quadratic advantage, target network, replay memory, "
                         "OU/Gaussian noise)",
                         lambda kwargs, context: make_naf(naf_config(kwargs, context)),
                         replay_keys(NAFConfig)),),
    config_class=NAFConfig, make=make_naf,
    host_methods={"import_observations": replaces_state(import_observations)})

__all__ = ["FAMILY", "NAFConfig", "NAFState", "advantage", "greedy_actions",
           "import_observations", "lower_triangular", "make_naf", "pendulum_naf", "precision"]
