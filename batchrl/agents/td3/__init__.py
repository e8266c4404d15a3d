"""TD3 (twin delayed DDPG) as a pure ``Model`` (``model.py``; its family, ``family.py``); the
shared parts are in ``batchrl.agents.actor_critic``. This module is the family's entry, free
of JAX: its config and recipes (``recipes.py``)."""
from batchrl.agents.actor_critic.config import decay_over_run
from batchrl.agents.family import FamilyEntry
from batchrl.agents.td3.config import TD3Config
from batchrl.agents.td3.recipes import mujoco_td3, pendulum_td3

ENTRY = FamilyEntry(
    "td3", "Twin delayed DDPG (continuous actions)",
    agents={"td3": "Twin delayed DDPG: twin critics (the minimum makes the target), target "
                   "policy smoothing, delayed actor and target updates"},
    config_class=TD3Config, fit_schedules=decay_over_run)

__all__ = ["ENTRY", "TD3Config", "mujoco_td3", "pendulum_td3"]
