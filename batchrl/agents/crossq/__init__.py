"""CrossQ for bounded continuous actions as a pure ``Model`` (``model.py``; its family,
``family.py``); the shared parts are in ``batchrl.agents.actor_critic``. This module is the
family's entry, free of JAX: its config and recipes (``recipes.py``)."""
from batchrl.agents.actor_critic.config import decay_over_run
from batchrl.agents.crossq.config import CrossQConfig
from batchrl.agents.crossq.recipes import mujoco_crossq, pendulum_crossq
from batchrl.agents.family import FamilyEntry

ENTRY = FamilyEntry(
    "crossq", "CrossQ: Batch Renormalization, no target networks (continuous actions)",
    agents={"crossq": "CrossQ: SAC's actor and temperature, critics and actor with Batch "
                      "Renormalization, no target networks, (s, a) and (s', a') through the "
                      "critics in one pass, the actor stepped every policy_delay critic steps"},
    config_class=CrossQConfig, fit_schedules=decay_over_run)

__all__ = ["ENTRY", "CrossQConfig", "mujoco_crossq", "pendulum_crossq"]
