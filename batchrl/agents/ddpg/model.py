"""DDPG (Lillicrap et al. 2016; TensorForce 0.6's ``dpg``): a deterministic tanh actor, one
Q critic, target networks moved softly, exploration noise in ``act``, a replay memory. Its
update is ``update.py``; ``init``, ``act`` and ``store`` are the actor-critic agents'
(``batchrl.agents.actor_critic.model``)."""
from __future__ import annotations

from batchrl.agents.actor_critic.config import parse_exploration
from batchrl.agents.actor_critic.model import ActorCriticKind, make_actor_critic
from batchrl.agents.core import Model
from batchrl.agents.ddpg.config import DDPGConfig
from batchrl.agents.ddpg.update import update
from batchrl.exploration import exploration_of


def make_ddpg(config: DDPGConfig | None = None, name: str = "ddpg") -> Model:
  """DDPG as a ``Model``; ``period = update_frequency``."""
  config = DDPGConfig() if config is None else config
  if not isinstance(config, DDPGConfig):
    raise TypeError(f"make_ddpg takes a DDPGConfig, got {type(config).__name__}.")
  kind = ActorCriticKind(name, num_critics=1, stochastic=False,
                         exploration=exploration_of(
                             parse_exploration(config.exploration, "ddpg.exploration")))
  return make_actor_critic(config, kind, update)
