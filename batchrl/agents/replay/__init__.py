"""What the replay agents (DQN, DDQN, DQFD, NAF) share: ``ReplayConfig`` (``config.py``: the
memory, the update schedule, the TD loss, the optimizer) and TensorForce's keys for them
(``keys.py``). Not an agent itself."""
