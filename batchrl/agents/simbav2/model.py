"""SimbaV2 (Lee et al. 2025): SAC's tanh-squashed Gaussian actor and learned temperature on
hyperspherical networks (``networks.py``), with ``num_critics`` categorical critics of the
scaled return in place of the twins, running observation normalization and reward scaling.
Its update is ``update.py``; ``init``, ``act`` and ``store`` are the actor-critic agents'
(``batchrl.agents.actor_critic.model``). Bounded float actions and vector observations
only."""
from __future__ import annotations

from batchrl.agents.actor_critic.model import ActorCriticKind, make_actor_critic
from batchrl.agents.actor_critic.temperature import learns_alpha
from batchrl.agents.core import Model
from batchrl.agents.simbav2.config import SimbaV2Config
from batchrl.agents.simbav2.networks import simbav2_networks
from batchrl.agents.simbav2.update import update


def make_simbav2(config: SimbaV2Config | None = None, name: str = "simbav2") -> Model:
  """SimbaV2 as a ``Model``; ``period = update_frequency``."""
  config = SimbaV2Config() if config is None else config
  if not isinstance(config, SimbaV2Config):
    raise TypeError(f"make_simbav2 takes a SimbaV2Config, got {type(config).__name__}.")
  kind = ActorCriticKind(name, num_critics=config.num_critics, stochastic=True,
                         learns_alpha=learns_alpha(config), build_networks=simbav2_networks)
  return make_actor_critic(config, kind, update)
