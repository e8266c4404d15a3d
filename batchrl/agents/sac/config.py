"""``SACConfig``: ``StochasticActorConfig`` (the shared actor-critic fields and the entropy
temperature) as it is; SAC adds no field of its own."""
from __future__ import annotations

from batchrl.agents.actor_critic.config import StochasticActorConfig, check_stochastic_actor
from batchrl.configclass import configclass


@configclass
class SACConfig(StochasticActorConfig):
  """Hyper-parameters of ``make_sac``."""

  def __post_init__(self):
    check_stochastic_actor(self, "sac")
