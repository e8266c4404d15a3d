"""What DDPG, TD3 and SAC share: ``ActorCriticConfig``, the actor and critic networks, the
shared losses, the model skeleton and the TensorForce keys
(``batchrl.agents.actor_critic.keys``)."""
