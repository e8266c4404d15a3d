"""SimbaV2 recipes: measured ``SimbaV2Config`` values that the named configs in
``batchrl.configs.simbav2`` build on."""
from __future__ import annotations

from batchrl.agents.simbav2.config import SimbaV2Config


def pendulum_simbav2(**changes) -> SimbaV2Config:
  """SimbaV2 for Pendulum-v1: the reference's networks and values but for Adam 1e-3 for
  actor, critics and temperature (Pendulum's 200-step episodes learn in a few thousand
  steps), the temperature from 0.1, learning from step 1000 on with uniform actions before
  it, gamma 0.99. Measured on gymnax Pendulum (blocks of 64, batch 128, 4 envs, learning
  from step 500, constant rates), the best greedy return within 5k steps, seeds 0, 1, 2:
  from 0.1, -146, -152, -181; from the reference's 0.01, -129, -90 and -579 (seed 2 still at
  -673 after 4k steps; both measured with orthogonal initial weights, before ``HyperDense``
  drew normal ones: from 0.1 with those, -146, -150, -187)."""
  values = dict(learning_rate=1e-3, critic_learning_rate=1e-3, alpha_learning_rate=1e-3,
                initial_alpha=0.1, first_update=1000, start_steps=1000, discount=0.99)
  values.update(changes)
  return SimbaV2Config(**values)


def mujoco_simbav2(**changes) -> SimbaV2Config:
  """SimbaV2 for MuJoCo with the reference's values (dojeon-ai/SimbaV2,
  ``configs/agent/simbaV2.yaml`` and ``configs/env/mujoco.yaml``): an actor of one
  hyperspherical block of width 128, 2 critics of two blocks of width 512 with 101 bins on
  [-5, 5], Adam 1e-4 for actor, critics and temperature (the reference decays it to 5e-5
  over 1M updates), the temperature from 0.01 toward -0.5 |A|, batch 256, gamma 0.995, tau
  0.005, a 1M memory, uniform actions for the first 5000 steps and one gradient step per
  environment step from then on, observations normalized and rewards scaled."""
  values = dict(batch_size=256, discount=0.995, update_target_weight=0.005,
                memory_capacity=1_000_000, first_update=5_000, start_steps=5_000,
                update_frequency=1, repeat_update=1, target_update_frequency=1)
  values.update(changes)
  return SimbaV2Config(**values)
