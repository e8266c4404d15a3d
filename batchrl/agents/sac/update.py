"""SAC's update (Haarnoja et al. 2018; on one Discrete action Christodoulou 2019), top to
bottom: on each of ``repeat_update`` fresh batches, a critic step of the twins toward the
soft target ``r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s'))``,
``a' ~ pi(s')``; an actor step down ``alpha log pi(a|s) - min_i Q_i(s, a)`` through the new
critics; a temperature step of ``log alpha`` toward ``target_entropy`` (when it learns);
and the targets moved by tau when the update is due a sync. The step is the soft actor-critics'
(``batchrl.agents.actor_critic.soft``); the target and losses are ``losses.py``'s. Shapes: ``K``
batch."""
from __future__ import annotations

import functools

from batchrl.agents.actor_critic import learning
from batchrl.agents.actor_critic.model import ACState
from batchrl.agents.actor_critic.networks import ACNetworks
from batchrl.agents.actor_critic.soft import soft_step
from batchrl.agents.sac.config import SACConfig
from batchrl.agents.sac.losses import sac_actor_loss, sac_target


def update(config: SACConfig, nets: ACNetworks, state: ACState):
  """``repeat_update`` SAC steps under the replay gate, then the counters."""
  return learning.gated_update(config, state, functools.partial(sac_step, config, nets))


# One gradient step: the soft actor-critic step with SAC's target and actor objective (the
# critics' loss is the shared TD loss).
sac_step = functools.partial(soft_step, critic_target=sac_target,
                             actor_objective=sac_actor_loss)
