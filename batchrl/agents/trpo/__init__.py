"""TRPO: natural gradient by conjugate gradient on Fisher-vector products, a step scaled to
the KL bound and a backtracking line search, with a separately trained baseline, as a pure
``Model``."""
from batchrl.agents.pg_common import PGState
from batchrl.agents.trpo.agent import make_trpo
from batchrl.agents.trpo.config import TRPOConfig, cartpole_fused, pendulum_fused

__all__ = ["PGState", "TRPOConfig", "cartpole_fused", "make_trpo", "pendulum_fused"]
