"""``TD3Config``: DDPG's fields (``DeterministicActorConfig``) plus TD3's three changes
(Fujimoto et al. 2018): twin critics (always two), target policy smoothing (``target_noise``,
``target_noise_clip``) and delayed actor and target updates (``policy_delay``); and two
choices where implementations differ (``actor_q``, ``targets_with_actor``: the paper's by
default, sbx's with ``'min'`` and ``False``)."""
from __future__ import annotations

from batchrl.agents.actor_critic.config import (
  DeterministicActorConfig,
  check_actor_critic,
  parse_exploration,
)
from batchrl.configclass import ConfigError, configclass, param

# actor_q: the critic TD3's actor climbs, Q1 or the smaller of the two (update.ACTOR_Q)
ACTOR_Q_CHOICES = ("first", "min")


@configclass
class TD3Config(DeterministicActorConfig):
  """Hyper-parameters of ``make_td3``."""

  target_noise: float = param(0.2, "Std of the Gaussian noise added to the target actor's "
                              "action in the critic target (normalized units).")
  target_noise_clip: float = param(0.5, "That noise is clipped to [-c, c] before it is "
                                   "added; the action then to [-1, 1].")
  policy_delay: int = param(2, "Gradient steps per step of the actor and the targets (the "
                            "critics learn on every one).")
  actor_q: str = param("first", "The critic the actor climbs: 'first' (-Q1(s, mu(s)), the "
                       "paper's, SB3's and CleanRL's) or 'min' (the smaller of the two, as "
                       "sbx).")
  targets_with_actor: bool = param(True, "True: the targets move on the actor's steps only "
                                   "(the paper's, SB3's, CleanRL's); False: on every "
                                   "gradient step (as sbx).")

  def __post_init__(self):
    check_actor_critic(self, "td3")
    parse_exploration(self.exploration, "td3.exploration")
    if self.actor_q not in ACTOR_Q_CHOICES:
      raise ConfigError(f"td3.actor_q must be one of {', '.join(map(repr, ACTOR_Q_CHOICES))}, got "
                        f"{self.actor_q!r}.")
    for name in ("target_noise", "target_noise_clip"):
      if getattr(self, name) < 0:
        raise ConfigError(f"td3.{name} must be >= 0, got {getattr(self, name)!r}.")
