"""PQN (Gallici et al., "Simplifying Deep Temporal Difference Learning", ICLR 2025):
Q-learning over many parallel envs with no replay memory and no target network, LayerNorm in
the Q-network and Q(lambda) targets over short rollouts, as a pure ``Model``."""
from batchrl.agents.family import AgentFamily, AgentType, anneal_over_run
from batchrl.agents.pqn.config import PQNConfig
from batchrl.agents.pqn.keys import pqn_config, pqn_keys
from batchrl.agents.pqn.model import PQNState, make_pqn
from batchrl.agents.pqn.presets import cartpole, minatar

FAMILY = AgentFamily(
    "pqn", "Parallel Q-learning (PQN): no replay, no target network, LayerNorm, Q(lambda)",
    api_types=(AgentType("pqn", "Parallel Q-learning (PQN): epsilon-greedy Q(lambda) over "
                         "rollouts of parallel envs, LayerNorm, no replay or target network",
                         lambda kwargs, context: make_pqn(pqn_config(kwargs, context)),
                         pqn_keys()),),
    config_class=PQNConfig, make=make_pqn,
    fit_schedules=anneal_over_run)  # total_updates = the run's updates (epsilon, rate)

__all__ = ["FAMILY", "PQNConfig", "PQNState", "cartpole", "make_pqn", "minatar"]
