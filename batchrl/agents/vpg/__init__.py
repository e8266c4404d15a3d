"""VPG (REINFORCE) with TensorForce's baselines (none / states / network) as a pure ``Model``
(``model.py``; its family, ``family.py``). This module is the family's entry, free of JAX: its
config and recipes (``recipes.py``)."""
from batchrl.agents.family import FamilyEntry, anneal_over_run
from batchrl.agents.vpg.config import VPGConfig
from batchrl.agents.vpg.recipes import cartpole_fused

ENTRY = FamilyEntry(
    "vpg", "Vanilla policy gradient (REINFORCE) with a baseline",
    agents={"vpg": "Vanilla policy gradient (REINFORCE) with a baseline"},
    config_class=VPGConfig, fit_schedules=anneal_over_run)

__all__ = ["ENTRY", "VPGConfig", "cartpole_fused"]
