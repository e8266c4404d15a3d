"""SimbaV2 (hyperspherical networks, distributional critics, reward scaling) for bounded
continuous actions as a pure ``Model`` (``model.py``; its family, ``family.py``); the shared
parts are in ``batchrl.agents.actor_critic``. This module is the family's entry, free of JAX:
its config and recipes (``recipes.py``)."""
from batchrl.agents.actor_critic.config import decay_over_run
from batchrl.agents.family import FamilyEntry
from batchrl.agents.simbav2.config import SimbaV2Config
from batchrl.agents.simbav2.recipes import mujoco_simbav2, pendulum_simbav2

ENTRY = FamilyEntry(
    "simbav2", "SimbaV2: hyperspherical networks, categorical critics (continuous actions)",
    agents={"simbav2": "SimbaV2: SAC's actor and temperature on hyperspherical networks "
                       "(weights and features on the unit sphere), categorical critics of "
                       "the scaled return, observations normalized and rewards scaled"},
    config_class=SimbaV2Config, fit_schedules=decay_over_run)

__all__ = ["ENTRY", "SimbaV2Config", "mujoco_simbav2", "pendulum_simbav2"]
