"""TQC (truncated quantile critics) for bounded continuous actions as a pure ``Model``; the
shared parts are in ``batchrl.agents.actor_critic``."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.family import AgentFamily, AgentType, replaces_state
from batchrl.agents.tqc.config import TQCConfig
from batchrl.agents.tqc.keys import tqc_config
from batchrl.agents.tqc.model import make_tqc
from batchrl.agents.tqc.presets import mujoco_tqc, pendulum_tqc

FAMILY = AgentFamily(
    "tqc", "Truncated quantile critics (continuous actions)",
    api_types=(AgentType("tqc", "Truncated quantile critics: SAC's actor and temperature, "
                         "distributional critics of return quantiles whose pooled target "
                         "drops the largest ones",
                         lambda kwargs, context: make_tqc(tqc_config(kwargs, context)),
                         actor_critic_keys(TQCConfig)),),
    config_class=TQCConfig, make=make_tqc,
    host_methods={"import_observations": replaces_state(import_observations)})

__all__ = ["FAMILY", "TQCConfig", "make_tqc", "mujoco_tqc", "pendulum_tqc", "tqc_config"]
