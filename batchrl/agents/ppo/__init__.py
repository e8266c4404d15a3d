"""BatchPPO: proximal policy optimization with an adaptive KL penalty (or the clipped
objective), normalizers, and feed-forward or recurrent policies, as a pure ``Model``."""
from batchrl.agents.ppo.agent import PPOState, make_ppo
from batchrl.agents.ppo.config import (PPOConfig, batch_ppo_default, cartpole_fused,
                                       pendulum_fused)

__all__ = ["PPOConfig", "PPOState", "make_ppo", "batch_ppo_default", "cartpole_fused",
           "pendulum_fused"]
