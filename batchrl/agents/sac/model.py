"""SAC (Haarnoja et al. 2018): a tanh-squashed Gaussian actor, twin critics, the soft target
``r + gamma (min_i Q'_i(s', a') - alpha log pi(a'|s'))`` with ``a' ~ pi(s')``, and the
temperature alpha learned toward ``target_entropy``. On one Discrete action (Christodoulou
2019): a categorical actor, critics of ``Q(s, .)``, and the expectations over ``a'`` summed
exactly (``losses.py``). The update loop is ``batchrl.agents.actor_critic.model``'s;
exploration is the policy's own sampling."""
from __future__ import annotations

from batchrl.agents.actor_critic.model import Algorithm, make_actor_critic
from batchrl.agents.core import Model
from batchrl.agents.sac.config import SACConfig
from batchrl.agents.sac.losses import sac_actor_loss, sac_next_value


def make_sac(config: SACConfig | None = None, name: str = "sac") -> Model:
  """SAC as a ``Model``; ``period = update_frequency``."""
  config = SACConfig() if config is None else config
  if not isinstance(config, SACConfig):
    raise TypeError(f"make_sac takes a SACConfig, got {type(config).__name__}.")
  return make_actor_critic(config, Algorithm(
      name, num_critics=2, stochastic=True, next_value=sac_next_value,
      actor_loss=sac_actor_loss, learns_alpha=config.alpha_learning_rate > 0,
      discrete_actions=True))
