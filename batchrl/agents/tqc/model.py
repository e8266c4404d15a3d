"""TQC (Kuznetsov et al. 2020): SAC's tanh-squashed Gaussian actor and learned temperature,
with ``num_critics`` distributional critics of ``num_quantiles`` quantiles each in place of
the twins, and a target that pools their quantiles and drops the largest ones (the
truncation controls overestimation finer than the twins' minimum). Its update is
``update.py``; ``init``, ``act`` and ``store`` are the actor-critic agents'
(``batchrl.agents.actor_critic.model``). Bounded float actions only."""
from __future__ import annotations

from batchrl.agents.actor_critic.model import ActorCriticKind, make_actor_critic
from batchrl.agents.actor_critic.temperature import learns_alpha
from batchrl.agents.core import Model
from batchrl.agents.tqc.config import TQCConfig
from batchrl.agents.tqc.update import update


def make_tqc(config: TQCConfig | None = None, name: str = "tqc") -> Model:
  """TQC as a ``Model``; ``period = update_frequency``."""
  config = TQCConfig() if config is None else config
  if not isinstance(config, TQCConfig):
    raise TypeError(f"make_tqc takes a TQCConfig, got {type(config).__name__}.")
  kind = ActorCriticKind(name, num_critics=config.num_critics, stochastic=True,
                         learns_alpha=learns_alpha(config), num_quantiles=config.num_quantiles)
  return make_actor_critic(config, kind, update)
