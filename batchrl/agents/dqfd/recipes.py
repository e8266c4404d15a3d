"""DQFD recipes: measured ``DQFDConfig`` values that the named configs in
``batchrl.configs.dqfd`` build on."""
from __future__ import annotations

import json

from batchrl.agents.dqfd.config import DQFDConfig
from batchrl.agents.replay.recipes import cartpole_values


def cartpole_dqfd(**changes) -> DQFDConfig:
  """``dqn_cartpole``'s agent (double-Q, 128x128) with 64 gradient steps per 256 env steps
  (not 128), plus 20k transitions of ``cartpole_controller``, 2000 pretraining steps
  at init, a quarter of each batch from the demonstrations, the DQfD paper's 10-step
  returns (weight 1) beside the 1-step ones, and epsilon from 0.1 (not 1.0) down to 0.01:
  the pretrained policy already acts well.

  With DQN's epsilon 1.0 -> 0.04 the greedy policy, at 500 after pretraining, fell to
  about 10 by 5k steps (the first online updates on random-policy data) and came back to
  500 by 20k (2 seeds). With 0.1 -> 0.01 but 1-step returns only, 2 of 4 seeds collapsed
  to about 10 after 12-15k online steps (a lower learning rate, a larger demonstration
  share or a slower target only delayed it); with 10-step returns all 4 stayed at 439-500
  over 20k steps (evaluated every 2.5k)."""
  values = cartpole_values()
  values.update(hidden_layers=(128, 128), repeat_update=64, double_dqn=True,
                demo_memory_capacity=20_000, demo_sampling_ratio=0.25, expert_margin=0.8,
                supervised_weight=1.0, demonstrations="cartpole_controller",
                pretrain_steps=2_000, n_step=10, nstep_weight=1.0,
                exploration=json.dumps({"type": "epsilon_anneal", "initial_epsilon": 0.1,
                                        "final_epsilon": 0.01, "timesteps": 8000}))
  values.update(changes)
  return DQFDConfig(**values)
