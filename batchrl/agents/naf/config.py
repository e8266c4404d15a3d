"""``NAFConfig``; defined in ``batchrl.configs.naf_dqfd`` (see there why)."""
from batchrl.configs.naf_dqfd import (DEFAULT_NAF_EXPLORATION, NAFConfig, parse_naf_exploration,
                                      pendulum_naf)

__all__ = ["DEFAULT_NAF_EXPLORATION", "NAFConfig", "parse_naf_exploration", "pendulum_naf"]
