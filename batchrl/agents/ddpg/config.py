"""``DDPGConfig``: ``ActorCriticConfig`` plus the exploration noise of the deterministic actor
(Gaussian, sigma 0.1 in normalized units, by default; Ornstein-Uhlenbeck as in Lillicrap et
al. 2016 is ``{"type": "ornstein_uhlenbeck", "sigma": 0.2}``)."""
from __future__ import annotations

import json

from batchrl.agents.actor_critic.config import (ActorCriticConfig, check_actor_critic,
                                                parse_exploration)
from batchrl.configclass import configclass, param

DEFAULT_EXPLORATION = json.dumps({"type": "gaussian", "sigma": 0.1})


@configclass
class DDPGConfig(ActorCriticConfig):
  """Hyper-parameters of ``make_ddpg``; the shared fields are ``ActorCriticConfig``'s."""

  exploration: str | None = param(DEFAULT_EXPLORATION, "Noise added to the actor's action in "
                                  "act, as JSON text of a batchrl.exploration spec for float "
                                  "actions (gaussian, ornstein_uhlenbeck, constant, "
                                  "linear_decay...), in normalized units (the bounds mapped "
                                  "to [-1, 1]), then clipped. None: no noise.")

  def __post_init__(self):
    check_actor_critic(self, "ddpg")
    parse_exploration(self.exploration, "ddpg.exploration")
