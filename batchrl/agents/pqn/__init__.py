"""PQN (Gallici et al., "Simplifying Deep Temporal Difference Learning", ICLR 2025):
Q-learning over many parallel envs with no replay memory and no target network, LayerNorm in
the Q-network and Q(lambda) targets over short rollouts, as a pure ``Model`` (``model.py``; its
family, ``family.py``). This module is the family's entry, free of JAX: its config and recipes
(``recipes.py``)."""
from batchrl.agents.family import FamilyEntry, anneal_over_run
from batchrl.agents.pqn.config import PQNConfig
from batchrl.agents.pqn.recipes import cartpole, minatar

ENTRY = FamilyEntry(
    "pqn", "Parallel Q-learning (PQN): no replay, no target network, LayerNorm, Q(lambda)",
    agents={"pqn": "Parallel Q-learning (PQN): epsilon-greedy Q(lambda) over rollouts of "
                   "parallel envs, LayerNorm, no replay or target network"},
    config_class=PQNConfig,
    fit_schedules=anneal_over_run)  # total_updates = the run's updates (epsilon, rate)

__all__ = ["ENTRY", "PQNConfig", "cartpole", "minatar"]
