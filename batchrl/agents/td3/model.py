"""TD3 (Fujimoto et al. 2018): DDPG with twin critics whose minimum makes the target, noise
on the target action (smoothing), and the actor and targets moved on every
``policy_delay``-th gradient step only. The update loop is
``batchrl.agents.actor_critic.model``'s."""
from __future__ import annotations

import functools

from batchrl.agents.actor_critic.config import parse_exploration
from batchrl.agents.actor_critic.losses import deterministic_actor_loss
from batchrl.agents.actor_critic.model import Algorithm, make_actor_critic
from batchrl.agents.core import Model
from batchrl.agents.td3.config import ACTOR_Q, TD3Config
from batchrl.agents.td3.losses import td3_next_value


def make_td3(config: TD3Config | None = None, name: str = "td3") -> Model:
  """TD3 as a ``Model``; ``period = update_frequency``."""
  config = TD3Config() if config is None else config
  if not isinstance(config, TD3Config):
    raise TypeError(f"make_td3 takes a TD3Config, got {type(config).__name__}.")
  return make_actor_critic(config, Algorithm(
      name, num_critics=2, stochastic=False, next_value=td3_next_value,
      actor_loss=functools.partial(deterministic_actor_loss, q_of=ACTOR_Q[config.actor_q]),
      exploration=parse_exploration(config.exploration, "td3.exploration"),
      policy_delay=config.policy_delay, targets_with_actor=config.targets_with_actor))
