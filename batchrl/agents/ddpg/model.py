"""DDPG (Lillicrap et al. 2016; TensorForce 0.6's ``dpg``): a deterministic tanh actor, one
Q critic, target networks moved softly, exploration noise in ``act``, a replay memory. The
update loop is ``batchrl.agents.actor_critic.model``'s; DDPG's parts are its target
``r + gamma Q'(s', mu'(s'))`` (``losses.py``) and its actor loss ``-Q(s, mu(s))``
(``batchrl.agents.actor_critic.losses``, shared with TD3)."""
from __future__ import annotations

from batchrl.agents.actor_critic.config import parse_exploration
from batchrl.agents.actor_critic.losses import deterministic_actor_loss
from batchrl.agents.actor_critic.model import Algorithm, make_actor_critic
from batchrl.agents.core import Model
from batchrl.agents.ddpg.config import DDPGConfig
from batchrl.agents.ddpg.losses import ddpg_next_value


def make_ddpg(config: DDPGConfig | None = None, name: str = "ddpg") -> Model:
  """DDPG as a ``Model``; ``period = update_frequency``."""
  config = DDPGConfig() if config is None else config
  if not isinstance(config, DDPGConfig):
    raise TypeError(f"make_ddpg takes a DDPGConfig, got {type(config).__name__}.")
  return make_actor_critic(config, Algorithm(
      name, num_critics=1, stochastic=False, next_value=ddpg_next_value,
      actor_loss=deterministic_actor_loss,
      exploration=parse_exploration(config.exploration, "ddpg.exploration")))
