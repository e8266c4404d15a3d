"""DQN (Mnih et al. 2015) with Double DQN, dueling heads and n-step returns, as a ``Model``.

The model functions (act, store, update: ``batchrl.agents.replay.q_learning``) are the replay
family's Q-learning, shared with DQFD; DQN is them on one replay memory with DQN's schedule.
"""
from __future__ import annotations

from batchrl.agents.core import Model
from batchrl.agents.replay import q_learning
from batchrl.agents.replay.q_config import DQNConfig, parse_exploration
from batchrl.agents.replay.updates import replay_model
from batchrl.exploration import exploration_of


def make_dqn(config: DQNConfig | None = None, name: str = "dqn") -> Model:
  """DQN as a ``Model``; ``period = update_frequency``."""
  config = DQNConfig() if config is None else config
  if not isinstance(config, DQNConfig):
    raise TypeError(f"make_dqn takes a DQNConfig, got {type(config).__name__}.")
  exploration = exploration_of(parse_exploration(config.exploration))
  return replay_model(
      config, name,
      init=lambda key, spec: q_learning.init(config, key, spec),
      act=lambda state, obs, key, deterministic=False: q_learning.act(
          config, exploration, state, obs, key, deterministic),
      store=lambda state, transition: q_learning.store(config, state, transition),
      update=lambda state: q_learning.update(config, exploration, state),
      summarize=lambda state: q_learning.summarize(config, exploration, state))
