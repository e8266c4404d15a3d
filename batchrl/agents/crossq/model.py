"""CrossQ (Bhatt et al. 2024): SAC's tanh-squashed Gaussian actor and learned temperature,
``num_critics`` critics, Batch Renormalization in actor and critics and no target networks:
the critics' target comes from their own values at ``(s', a')``, normalized together with
``(s, a)`` in one pass. Its update is ``update.py``; ``init``, ``act`` and ``store`` are the
actor-critic agents' (``batchrl.agents.actor_critic.model``), the actor acting by its
running statistics. Bounded float actions only."""
from __future__ import annotations

from batchrl.agents.actor_critic.model import ActorCriticKind, make_actor_critic
from batchrl.agents.actor_critic.temperature import learns_alpha
from batchrl.agents.core import Model
from batchrl.agents.crossq.config import CrossQConfig
from batchrl.agents.crossq.update import update


def make_crossq(config: CrossQConfig | None = None, name: str = "crossq") -> Model:
  """CrossQ as a ``Model``; ``period = update_frequency``."""
  config = CrossQConfig() if config is None else config
  if not isinstance(config, CrossQConfig):
    raise TypeError(f"make_crossq takes a CrossQConfig, got {type(config).__name__}.")
  kind = ActorCriticKind(name, num_critics=config.num_critics, stochastic=True,
                         learns_alpha=learns_alpha(config), renorm=config.renorm,
                         target_networks=False)
  return make_actor_critic(config, kind, update)
