"""VPG (REINFORCE) with TensorForce's baselines (none / states / network) as a pure
``Model``."""
from batchrl.agents.pg_common import PGState
from batchrl.agents.vpg.agent import make_vpg
from batchrl.agents.vpg.config import VPGConfig, cartpole_fused

__all__ = ["PGState", "VPGConfig", "cartpole_fused", "make_vpg"]
