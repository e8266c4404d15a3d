"""TRPO: natural gradient by conjugate gradient on Fisher-vector products, a step scaled to
the KL bound and a backtracking line search, with a separately trained baseline, as a pure
``Model``."""
from batchrl.agents.family import AgentFamily, AgentType
from batchrl.agents.policy_gradient.model import PGState
from batchrl.agents.trpo.config import TRPOConfig
from batchrl.agents.trpo.keys import trpo_config, trpo_keys
from batchrl.agents.trpo.model import make_trpo
from batchrl.agents.trpo.presets import cartpole_fused, pendulum_fused

FAMILY = AgentFamily(
    "trpo", "Trust region policy optimization with a baseline",
    api_types=(AgentType("trpo", "Trust region policy optimization (natural gradient, "
                         "conjugate gradient, line search) with a baseline",
                         lambda kwargs, context: make_trpo(trpo_config(kwargs, context)),
                         trpo_keys()),),
    config_class=TRPOConfig, make=make_trpo)

__all__ = ["FAMILY", "PGState", "TRPOConfig", "cartpole_fused", "make_trpo", "pendulum_fused"]
