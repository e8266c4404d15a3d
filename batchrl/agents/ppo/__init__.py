"""BatchPPO: proximal policy optimization with an adaptive KL penalty (or the clipped
objective), normalizers, and feed-forward or recurrent policies, as a pure ``Model``."""
from batchrl.agents.family import AgentFamily, AgentType, anneal_over_run
from batchrl.agents.ppo.config import PPOConfig
from batchrl.agents.ppo.keys import ppo_config
from batchrl.agents.ppo.model import PPOState, make_ppo
from batchrl.agents.ppo.presets import batch_ppo_default, cartpole_fused, pendulum_fused

FAMILY = AgentFamily(
    "ppo", "Proximal policy optimization (BatchPPO: KL penalty or clipped objective)",
    api_types=(AgentType("ppo", "Proximal policy optimization (clipped objective by default)",
                         lambda kwargs, context: make_ppo(ppo_config(kwargs, context))),),
    config_class=PPOConfig, make=make_ppo,
    fit_schedules=anneal_over_run)

__all__ = ["FAMILY", "PPOConfig", "PPOState", "make_ppo", "batch_ppo_default", "cartpole_fused",
           "pendulum_fused"]
