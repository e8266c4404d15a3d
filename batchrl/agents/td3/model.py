"""TD3 (Fujimoto et al. 2018): DDPG with twin critics whose minimum makes the target, noise
on the target action (smoothing), and the actor and targets moved on every
``policy_delay``-th gradient step only. Its update is ``update.py``; ``init``, ``act`` and
``store`` are the actor-critic agents' (``batchrl.agents.actor_critic.model``)."""
from __future__ import annotations

from batchrl.agents.actor_critic.config import parse_exploration
from batchrl.agents.actor_critic.model import ActorCriticKind, make_actor_critic
from batchrl.agents.core import Model
from batchrl.agents.td3.config import TD3Config
from batchrl.agents.td3.update import update
from batchrl.exploration import exploration_of


def make_td3(config: TD3Config | None = None, name: str = "td3") -> Model:
  """TD3 as a ``Model``; ``period = update_frequency``."""
  config = TD3Config() if config is None else config
  if not isinstance(config, TD3Config):
    raise TypeError(f"make_td3 takes a TD3Config, got {type(config).__name__}.")
  kind = ActorCriticKind(name, num_critics=2, stochastic=False,
                         exploration=exploration_of(
                             parse_exploration(config.exploration, "td3.exploration")))
  return make_actor_critic(config, kind, update)
