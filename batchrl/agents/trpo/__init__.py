"""TRPO: natural gradient by conjugate gradient on Fisher-vector products, a step scaled to
the KL bound and a backtracking line search, with a separately trained baseline, as a pure
``Model`` (``model.py``; its family, ``family.py``). This module is the family's entry, free of
JAX: its config and recipes (``recipes.py``)."""
from batchrl.agents.family import FamilyEntry
from batchrl.agents.trpo.config import TRPOConfig
from batchrl.agents.trpo.recipes import cartpole_fused, pendulum_fused

ENTRY = FamilyEntry(
    "trpo", "Trust region policy optimization with a baseline",
    agents={"trpo": "Trust region policy optimization (natural gradient, conjugate gradient, "
                    "line search) with a baseline"},
    config_class=TRPOConfig)

__all__ = ["ENTRY", "TRPOConfig", "cartpole_fused", "pendulum_fused"]
