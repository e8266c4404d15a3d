"""TD3 (twin delayed DDPG) as a pure ``Model``; the shared parts are in
``batchrl.agents.actor_critic``."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.family import AgentFamily, AgentType, replaces_state
from batchrl.agents.td3.config import TD3Config
from batchrl.agents.td3.keys import td3_config
from batchrl.agents.td3.losses import smoothed_action, twin_next_value
from batchrl.agents.td3.model import make_td3
from batchrl.agents.td3.presets import pendulum_td3

FAMILY = AgentFamily(
    "td3", "Twin delayed DDPG (continuous actions)",
    api_types=(AgentType("td3", "Twin delayed DDPG: twin critics (the minimum makes the "
                         "target), target policy smoothing, delayed actor and target updates",
                         lambda kwargs, context: make_td3(td3_config(kwargs, context)),
                         actor_critic_keys(TD3Config)),),
    config_class=TD3Config, make=make_td3,
    host_methods={"import_observations": replaces_state(import_observations)})

__all__ = ["FAMILY", "TD3Config", "make_td3", "pendulum_td3", "smoothed_action", "td3_config",
           "twin_next_value"]
