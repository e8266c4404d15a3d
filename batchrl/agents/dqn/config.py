"""``DQNConfig`` and its presets; defined in ``batchrl.configs.value_based`` (see there why)."""
from batchrl.configs.value_based import (DEFAULT_EXPLORATION, DQN_MEMORIES, DQNConfig, cartpole,
                                         parse_exploration)

__all__ = ["DEFAULT_EXPLORATION", "DQN_MEMORIES", "DQNConfig", "cartpole", "parse_exploration"]
