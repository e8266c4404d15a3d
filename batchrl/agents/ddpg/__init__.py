"""DDPG (TensorForce 0.6's ``dpg``, alias ``ddpg``): a deterministic actor and a Q critic over
a replay memory, as a pure ``Model``; the shared parts are in ``batchrl.agents.actor_critic``."""
from batchrl.agents.actor_critic.keys import actor_critic_keys
from batchrl.agents.actor_critic.model import ACState, import_observations
from batchrl.agents.ddpg.config import DDPGConfig
from batchrl.agents.ddpg.keys import ddpg_config
from batchrl.agents.ddpg.model import make_ddpg
from batchrl.agents.ddpg.presets import pendulum_ddpg
from batchrl.agents.family import AgentFamily, AgentType, replaces_state

_DESCRIPTION = ("Deep deterministic policy gradient: a deterministic tanh actor, a Q critic, "
                "soft target updates, Gaussian/OU noise, replay memory (continuous actions)")


def _api_type(name: str) -> AgentType:
  return AgentType(name, _DESCRIPTION,
                   lambda kwargs, context: make_ddpg(ddpg_config(kwargs, context, name), name),
                   actor_critic_keys(DDPGConfig))


FAMILY = AgentFamily(
    "ddpg", "Deep deterministic policy gradient (continuous actions)",
    api_types=(_api_type("ddpg"), _api_type("dpg")),
    config_class=DDPGConfig, make=make_ddpg,
    host_methods={"import_observations": replaces_state(import_observations)})

__all__ = ["ACState", "DDPGConfig", "FAMILY", "ddpg_config", "import_observations", "make_ddpg",
           "pendulum_ddpg"]
