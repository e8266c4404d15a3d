"""DDPG's pure target (Lillicrap et al. 2016); its actor loss, which TD3 shares, is
``batchrl.agents.actor_critic.losses.deterministic_actor_loss``. Shapes: ``K`` batch."""
from __future__ import annotations


def ddpg_next_value(nets, target_actor, target_critic, next_obs):
  """``Q'(s', mu'(s'))`` ``[K]``: the target critic at the target actor's action."""
  action = nets.actor(target_actor, next_obs)
  return nets.critic(target_critic, next_obs, action)[0]
