"""SAC (Haarnoja et al. 2018): a tanh-squashed Gaussian actor, twin critics, the soft target
``r + gamma (min_i Q'_i(s', a') - alpha log pi(a'|s'))`` with ``a' ~ pi(s')``, and the
temperature alpha learned toward ``target_entropy``. On one Discrete action (Christodoulou
2019): a categorical actor, critics of ``Q(s, .)``, and the expectations over ``a'`` summed
exactly (``losses.py``). Its update is ``update.py``; ``init``, ``act`` and ``store`` are the
actor-critic agents' (``batchrl.agents.actor_critic.model``); exploration is the policy's
own sampling."""
from __future__ import annotations

import dataclasses

from batchrl.agents.actor_critic import model as actor_critic
from batchrl.agents.actor_critic.temperature import learns_alpha, target_entropy
from batchrl.agents.core import Model
from batchrl.agents.sac.config import SACConfig
from batchrl.agents.sac.update import update


def make_sac(config: SACConfig | None = None, name: str = "sac") -> Model:
  """SAC as a ``Model``; ``period = update_frequency``."""
  config = SACConfig() if config is None else config
  if not isinstance(config, SACConfig):
    raise TypeError(f"make_sac takes a SACConfig, got {type(config).__name__}.")
  kind = actor_critic.ActorCriticKind(name, num_critics=2, stochastic=True,
                                      learns_alpha=learns_alpha(config), discrete_actions=True)
  model = actor_critic.make_actor_critic(config, kind, update)

  def init(key, spec):
    state = model.init(key, spec)
    if kind.learns_alpha:  # a discrete target entropy above log n is an error now
      target_entropy(config, actor_critic.networks(config, kind, state.info))
    return state

  return dataclasses.replace(model, init=init)
