"""VPG (REINFORCE) with TensorForce's baselines (none / states / network) as a pure
``Model``."""
from batchrl.agents.family import AgentFamily, AgentType, anneal_over_run
from batchrl.agents.policy_gradient.model import PGState
from batchrl.agents.vpg.config import VPGConfig
from batchrl.agents.vpg.keys import vpg_config, vpg_keys
from batchrl.agents.vpg.model import make_vpg
from batchrl.agents.vpg.presets import cartpole_fused

FAMILY = AgentFamily(
    "vpg", "Vanilla policy gradient (REINFORCE) with a baseline",
    api_types=(AgentType("vpg", "Vanilla policy gradient (REINFORCE) with a baseline",
                         lambda kwargs, context: make_vpg(vpg_config(kwargs, context)),
                         vpg_keys()),),
    config_class=VPGConfig, make=make_vpg,
    fit_schedules=anneal_over_run)

__all__ = ["FAMILY", "PGState", "VPGConfig", "cartpole_fused", "make_vpg"]
