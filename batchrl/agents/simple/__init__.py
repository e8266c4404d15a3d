"""Agents without learning (TensorForce's random and constant agents): the ``Model``s are
``model.py``, their ``Agent.create`` names ``family.py``. This module is the family's entry,
free of JAX."""
from batchrl.agents.family import FamilyEntry

ENTRY = FamilyEntry(
    "simple", "Baselines without learning (object API only)",
    agents={"random": "Uniformly random actions (a baseline)",
            "constant": "Always the same action (action_values)"})

__all__ = ["ENTRY"]
