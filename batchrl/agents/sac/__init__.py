"""SAC (soft actor-critic) for bounded continuous actions or one Discrete action as a pure
``Model``; the shared parts are in ``batchrl.agents.actor_critic``."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import import_observations
from batchrl.agents.family import AgentFamily, AgentType, replaces_state
from batchrl.agents.sac.config import SACConfig
from batchrl.agents.sac.keys import sac_config
from batchrl.agents.sac.model import make_sac
from batchrl.agents.sac.presets import cartpole_sac, pendulum_sac

FAMILY = AgentFamily(
    "sac", "Soft actor-critic (continuous or discrete actions)",
    api_types=(AgentType("sac", "Soft actor-critic: a tanh-squashed Gaussian actor (a "
                         "categorical one for a Discrete action), twin critics, an entropy "
                         "temperature learned toward a target entropy",
                         lambda kwargs, context: make_sac(sac_config(kwargs, context)),
                         actor_critic_keys(SACConfig)),),
    config_class=SACConfig, make=make_sac,
    host_methods={"import_observations": replaces_state(import_observations)})

__all__ = ["FAMILY", "SACConfig", "cartpole_sac", "make_sac", "pendulum_sac", "sac_config"]
