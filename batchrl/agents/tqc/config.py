"""``TQCConfig``: ``StochasticActorConfig`` (the shared actor-critic fields and the entropy
temperature, as SAC's) plus TQC's critics (Kuznetsov et al. 2020, "Controlling
Overestimation Bias with Truncated Mixture of Continuous Distributional Quantile Critics"):
``num_critics`` networks each giving ``num_quantiles`` quantiles of the return, and
``drop_quantiles`` of the largest dropped per network from the pooled target. The defaults
are the paper's and sb3-contrib's/sbx's: 2 critics, 25 quantiles, 2 dropped per net."""
from __future__ import annotations

from batchrl.agents.actor_critic.config import StochasticActorConfig, check_stochastic_actor
from batchrl.configclass import ConfigError, configclass, param


@configclass
class TQCConfig(StochasticActorConfig):
  """Hyper-parameters of ``make_tqc``."""

  num_critics: int = param(2, "Critic networks; their quantiles are pooled in the target.")
  num_quantiles: int = param(25, "Quantiles of the return each critic gives (at the "
                             "fractions (i + 0.5) / num_quantiles).")
  drop_quantiles: int = param(2, "Largest quantiles dropped per critic from the pooled, "
                              "sorted target (num_critics * drop_quantiles in all): the "
                              "truncation that controls overestimation; 0 keeps them all.")

  def __post_init__(self):
    check_stochastic_actor(self, "tqc")
    if self.num_critics < 1:
      raise ConfigError(f"tqc.num_critics must be >= 1, got {self.num_critics!r}.")
    if self.num_quantiles < 1:
      raise ConfigError(f"tqc.num_quantiles must be >= 1, got {self.num_quantiles!r}.")
    if not 0 <= self.drop_quantiles < self.num_quantiles:
      raise ConfigError(f"tqc.drop_quantiles must be >= 0 and below tqc.num_quantiles "
                        f"({self.num_quantiles}): each critic keeps at least one quantile in "
                        f"the target; got {self.drop_quantiles!r}.")

  @property
  def kept_quantiles(self) -> int:
    """Quantiles in the truncated target: ``num_critics * (num_quantiles - drop_quantiles)``."""
    return self.num_critics * (self.num_quantiles - self.drop_quantiles)
