"""BatchPPO: proximal policy optimization with an adaptive KL penalty (or the clipped
objective), normalizers, and feed-forward or recurrent policies, as a pure ``Model``
(``model.py``; its family, ``family.py``). This module is the family's entry, free of JAX: its
config and recipes (``recipes.py``)."""
from batchrl.agents.family import FamilyEntry, anneal_over_run
from batchrl.agents.ppo.config import PPOConfig
from batchrl.agents.ppo.recipes import batch_ppo_default, cartpole_fused, pendulum_fused

ENTRY = FamilyEntry(
    "ppo", "Proximal policy optimization (BatchPPO: KL penalty or clipped objective)",
    agents={"ppo": "Proximal policy optimization (clipped objective by default)"},
    config_class=PPOConfig, fit_schedules=anneal_over_run)

__all__ = ["ENTRY", "PPOConfig", "batch_ppo_default", "cartpole_fused", "pendulum_fused"]
