"""``DQFDConfig`` and its demonstration sources; defined in ``batchrl.configs.naf_dqfd`` (see
there why)."""
from batchrl.configs.naf_dqfd import (DEMONSTRATION_SOURCES, DQFDConfig, cartpole_action,
                                      cartpole_controller, cartpole_dqfd, demo_batch_size,
                                      load_demonstrations)

__all__ = ["DEMONSTRATION_SOURCES", "DQFDConfig", "cartpole_action", "cartpole_controller",
           "cartpole_dqfd", "demo_batch_size", "load_demonstrations"]
