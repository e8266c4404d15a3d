"""A2C (synchronous advantage actor-critic) and TensorForce's AC as one family over the
policy-gradient rollout, networks and critic (``batchrl.agents.policy_gradient``): ``ac`` is
``a2c`` with the policy gradient weighted by the critic's return estimate instead of the
advantage (``A2CConfig.advantage``), as in TensorForce 0.6 (see ``keys.py``). The model is
``model.py``, the family ``family.py``; this module is the family's entry, free of JAX: its
config and recipes (``recipes.py``)."""
from batchrl.agents.a2c.config import A2CConfig
from batchrl.agents.a2c.recipes import cartpole
from batchrl.agents.family import FamilyEntry, anneal_over_run

ENTRY = FamilyEntry(
    "a2c", "Synchronous advantage actor-critic (A2C) and actor-critic (AC)",
    agents={"a2c": "Advantage actor-critic: n-step returns or GAE, a critic of its own or a "
                   "shared value head, RMSprop or Adam",
            "ac": "Actor-critic: the policy gradient weighted by the critic-bootstrapped "
                  "return (no advantage)"},
    config_class=A2CConfig, fit_schedules=anneal_over_run)

__all__ = ["A2CConfig", "ENTRY", "cartpole"]
