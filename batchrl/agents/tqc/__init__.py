"""TQC (truncated quantile critics) for bounded continuous actions as a pure ``Model``
(``model.py``; its family, ``family.py``); the shared parts are in
``batchrl.agents.actor_critic``. This module is the family's entry, free of JAX: its config and
recipes (``recipes.py``)."""
from batchrl.agents.actor_critic.config import decay_over_run
from batchrl.agents.family import FamilyEntry
from batchrl.agents.tqc.config import TQCConfig
from batchrl.agents.tqc.recipes import mujoco_tqc, mujoco_tqc_simba, pendulum_tqc

ENTRY = FamilyEntry(
    "tqc", "Truncated quantile critics (continuous actions)",
    agents={"tqc": "Truncated quantile critics: SAC's actor and temperature, distributional "
                   "critics of return quantiles whose pooled target drops the largest ones"},
    config_class=TQCConfig, fit_schedules=decay_over_run)

__all__ = ["ENTRY", "TQCConfig", "mujoco_tqc", "mujoco_tqc_simba", "pendulum_tqc"]
