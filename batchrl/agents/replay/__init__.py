"""What the replay agents (DQN, DDQN, DQFD, NAF; DDPG, TD3, SAC through
``batchrl.agents.actor_critic``) share: ``ReplayConfig`` (``config.py``: the memory, the
update schedule, the TD loss, the optimizer), the model schedule and memory plumbing
(``updates.py``), the TD losses (``losses.py``) and TensorForce's keys for them
(``keys.py``). The Q-learning on discrete actions that DQN and DQFD are both made of lives
here too: ``DQNConfig`` (``q_config.py``), the Q-networks (``q_networks.py``), the model
functions (``q_learning.py``), its keys (``q_keys.py``) and measured settings
(``recipes.py``). Not an agent itself."""
