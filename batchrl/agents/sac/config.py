"""``SACConfig``: ``ActorCriticConfig`` plus the entropy temperature (Haarnoja et al. 2018,
"SAC algorithms and applications"): alpha learned toward ``target_entropy`` (default minus
the action size; for a Discrete action of n values 0.7 log n:
``batchrl.agents.sac.update.DISCRETE_TARGET_ENTROPY_SCALE`` says why)."""
from __future__ import annotations

from batchrl.agents.actor_critic.config import ActorCriticConfig, check_actor_critic
from batchrl.configclass import ConfigError, configclass, param


@configclass
class SACConfig(ActorCriticConfig):
  """Hyper-parameters of ``make_sac``."""

  initial_alpha: float = param(1.0, "The entropy temperature alpha at the start.")
  alpha_learning_rate: float = param(3e-4, "Adam step size of log alpha; 0: alpha stays "
                                     "initial_alpha.")
  target_entropy: float | None = param(None, "The policy entropy (nats) alpha steers toward; "
                                       "None: minus the action size (float actions), 0.7 "
                                       "log n (a Discrete action of n values; a given one "
                                       "must be below log n).")

  def __post_init__(self):
    check_actor_critic(self, "sac")
    if not self.initial_alpha > 0:
      raise ConfigError(f"sac.initial_alpha must be > 0, got {self.initial_alpha!r}.")
    if self.alpha_learning_rate < 0:
      raise ConfigError(f"sac.alpha_learning_rate must be >= 0, got "
                        f"{self.alpha_learning_rate!r}.")
