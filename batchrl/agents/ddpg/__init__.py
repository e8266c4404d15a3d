"""DDPG (TensorForce 0.6's ``dpg``, alias ``ddpg``): a deterministic actor and a Q critic over
a replay memory, as a pure ``Model`` (``model.py``; its family, ``family.py``); the shared parts
are in ``batchrl.agents.actor_critic``. This module is the family's entry, free of JAX: its
config and recipes (``recipes.py``)."""
from batchrl.agents.actor_critic.config import decay_over_run
from batchrl.agents.ddpg.config import DDPGConfig
from batchrl.agents.ddpg.recipes import pendulum_ddpg
from batchrl.agents.family import FamilyEntry

_DESCRIPTION = ("Deep deterministic policy gradient: a deterministic tanh actor, a Q critic, "
                "soft target updates, Gaussian/OU noise, replay memory (continuous actions)")

ENTRY = FamilyEntry(
    "ddpg", "Deep deterministic policy gradient (continuous actions)",
    agents={"ddpg": _DESCRIPTION, "dpg": _DESCRIPTION},
    config_class=DDPGConfig, fit_schedules=decay_over_run)

__all__ = ["DDPGConfig", "ENTRY", "pendulum_ddpg"]
