"""``DDPGConfig``: the deterministic actor's fields (``ActorCriticConfig`` plus the exploration
noise: ``batchrl.agents.actor_critic.config.DeterministicActorConfig``; Gaussian, sigma 0.1 in
normalized units, by default; Ornstein-Uhlenbeck as in Lillicrap et al. 2016 is
``{"type": "ornstein_uhlenbeck", "sigma": 0.2}``)."""
from __future__ import annotations

from batchrl.agents.actor_critic.config import (
  DeterministicActorConfig,
  check_actor_critic,
  parse_exploration,
)
from batchrl.configclass import configclass


@configclass
class DDPGConfig(DeterministicActorConfig):
  """Hyper-parameters of ``make_ddpg``; the shared fields are ``ActorCriticConfig``'s."""

  def __post_init__(self):
    check_actor_critic(self, "ddpg")
    parse_exploration(self.exploration, "ddpg.exploration")
