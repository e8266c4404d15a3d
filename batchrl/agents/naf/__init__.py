"""NAF (normalized advantage functions): Q-learning for continuous actions as a pure ``Model``
over a replay memory (``batchrl.memories``; the model is ``model.py``, the family
``family.py``); TensorForce keys in ``batchrl.agents.naf.keys``. This module is the family's
entry, free of JAX: its config and recipes (``recipes.py``)."""
from batchrl.agents.family import FamilyEntry
from batchrl.agents.naf.config import NAFConfig
from batchrl.agents.naf.recipes import pendulum_naf

ENTRY = FamilyEntry(
    "naf", "Normalized advantage functions (Q-learning for continuous actions)",
    agents={"naf": "Normalized advantage functions: Q-learning for continuous actions "
                   "(quadratic advantage, target network, replay memory, OU/Gaussian noise)"},
    config_class=NAFConfig)

__all__ = ["ENTRY", "NAFConfig", "pendulum_naf"]
