"""What the batch policy-gradient agents (VPG, TRPO) share: ``PGConfig`` (``config.py``), the
rollout, networks, baselines and ``Model`` builder (``model.py``) and TensorForce's keys
(``keys.py``). Not an agent itself: ``batchrl.agents.vpg`` and ``trpo`` are."""
