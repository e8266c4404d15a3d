"""SAC (soft actor-critic) for bounded continuous actions or one Discrete action as a pure
``Model`` (``model.py``; its family, ``family.py``); the shared parts are in
``batchrl.agents.actor_critic``. This module is the family's entry, free of JAX: its config and
recipes (``recipes.py``)."""
from batchrl.agents.actor_critic.config import decay_over_run
from batchrl.agents.family import FamilyEntry
from batchrl.agents.sac.config import SACConfig
from batchrl.agents.sac.recipes import (
  cartpole_sac,
  mujoco_droq,
  mujoco_sac,
  mujoco_sac_simba,
  pendulum_droq,
  pendulum_sac,
  pendulum_sac_simba,
)

ENTRY = FamilyEntry(
    "sac", "Soft actor-critic (continuous or discrete actions)",
    agents={"sac": "Soft actor-critic: a tanh-squashed Gaussian actor (a categorical one for a "
                   "Discrete action), twin critics, an entropy temperature learned toward a "
                   "target entropy"},
    config_class=SACConfig, fit_schedules=decay_over_run)

__all__ = ["ENTRY", "SACConfig", "cartpole_sac", "mujoco_droq", "mujoco_sac", "mujoco_sac_simba",
           "pendulum_droq", "pendulum_sac", "pendulum_sac_simba"]
