"""TQC's update (Kuznetsov et al. 2020), top to bottom: on each of ``repeat_update`` fresh
batches, a critic step of the ``C`` quantile critics on the quantile Huber loss toward the
truncated mixture target (``losses.tqc_target``: the target critics' pooled quantiles at
``a' ~ pi(s')``, the largest ``C * drop_quantiles`` dropped, minus ``alpha log pi``); an
actor step down ``alpha log pi(a|s) - mean Z(s, a)`` through the new critics; a temperature
step toward ``target_entropy`` (when it learns); and the targets moved by tau when the
update is due a sync. SAC's step (``batchrl.agents.actor_critic.soft``) with quantile
critics in place of the twins' minimum. Shapes: ``K`` batch."""
from __future__ import annotations

import functools

from batchrl.agents.actor_critic import learning
from batchrl.agents.actor_critic.model import ACState
from batchrl.agents.actor_critic.networks import ACNetworks
from batchrl.agents.actor_critic.soft import soft_step
from batchrl.agents.tqc.config import TQCConfig
from batchrl.agents.tqc.losses import quantile_huber_loss, tqc_actor_loss, tqc_target


def update(config: TQCConfig, nets: ACNetworks, state: ACState):
  """``repeat_update`` TQC steps under the replay gate, then the counters."""
  return learning.gated_update(config, state, functools.partial(tqc_step, config, nets))


# One gradient step: the soft actor-critic step with TQC's target, loss and actor objective.
tqc_step = functools.partial(soft_step, critic_target=tqc_target,
                             critic_loss=quantile_huber_loss, actor_objective=tqc_actor_loss)
