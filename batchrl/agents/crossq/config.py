"""``CrossQConfig``: ``StochasticActorConfig`` (the shared actor-critic fields and SAC's
entropy temperature) plus CrossQ's (Bhatt et al., ICLR 2024, "CrossQ: Batch Normalization in
Deep Reinforcement Learning for Greater Sample Efficiency and Simplicity"): Batch
Renormalization in the actor and the critics, no target networks, the actor and temperature
stepped on every ``policy_delay``-th critic step. The defaults are the paper's and sbx's:
Adam 1e-3 with beta1 0.5, policy delay 3, 2 critics of 1024x1024 (the paper's are 2048 wide;
sbx's 1024 cost a quarter of the critics' products), an actor of 256x256, Batch
Renormalization with momentum 0.99 and 100k warmup steps.

Without target networks, ``update_target_weight`` and ``target_update_frequency`` mean
nothing: a value other than their default is an error rather than silently unread."""
from __future__ import annotations

import dataclasses

from batchrl.agents.actor_critic.config import StochasticActorConfig, check_stochastic_actor
from batchrl.configclass import ConfigError, configclass, param
from batchrl.networks.layer_specs import RenormSettings

_NO_TARGETS = ("update_target_weight", "target_update_frequency")  # fields left unread


@configclass
class CrossQConfig(StochasticActorConfig):
  """Hyper-parameters of ``make_crossq``."""

  learning_rate: float = param(1e-3, "Adam step size of the agent's optimizer, which steps "
                               "the actor (as in every actor-critic config).")
  critic_learning_rate: float = param(1e-3, "The critics' Adam step size.")
  alpha_learning_rate: float = param(1e-3, "Adam step size of log alpha; 0: alpha stays "
                                     "initial_alpha.")
  adam_beta1: float = param(0.5, "Adam's first-moment decay for the actor and the critics "
                            "(the paper's 0.5).")
  critic_layers: tuple[int, ...] = param((1024, 1024), "Hidden sizes of each critic's MLP "
                                         "(sbx's 1024x1024; the paper's 2048x2048; 256x256 "
                                         "learns less per sample, at a twelfth of the cost).")
  first_update: int = param(5_000, "Environment steps stored before the first update.")
  num_critics: int = param(2, "Critic networks; the target takes their minimum.")
  policy_delay: int = param(3, "Critic steps per actor and temperature step (the actor "
                            "steps on the 3rd, 6th, ... gradient step).")
  renorm_momentum: float = param(0.99, "Batch Renormalization: the running statistics' "
                                 "decay per training pass.")
  renorm_warmup_steps: int = param(100_000, "Batch Renormalization: training passes of "
                                   "plain batch normalization before the batch's statistics "
                                   "are corrected toward the running ones.")

  def __post_init__(self):
    check_stochastic_actor(self, "crossq")
    if self.num_critics < 1:
      raise ConfigError(f"crossq.num_critics must be >= 1, got {self.num_critics!r}.")
    if not 0 <= self.renorm_momentum < 1:
      raise ConfigError(f"crossq.renorm_momentum must be in [0, 1), got "
                        f"{self.renorm_momentum!r}.")
    if self.renorm_warmup_steps < 0:
      raise ConfigError(f"crossq.renorm_warmup_steps must be >= 0, got "
                        f"{self.renorm_warmup_steps!r}.")
    check_crossq_networks(self)
    defaults = {f.name: f.default for f in dataclasses.fields(StochasticActorConfig)}
    for name in _NO_TARGETS:
      default = defaults[name]
      if getattr(self, name) != default:
        raise ConfigError(f"crossq.{name} is not read: CrossQ keeps no target networks "
                          f"(leave it at {default}); got {getattr(self, name)!r}.")

  @property
  def renorm(self) -> RenormSettings:
    """The settings of every Batch Renormalization layer."""
    return RenormSettings(momentum=self.renorm_momentum, warmup_steps=self.renorm_warmup_steps)


def check_crossq_networks(c: CrossQConfig) -> None:
  """The network options CrossQ's Batch Renormalization leaves no room for: SimBa's
  LayerNorm blocks (sbx builds a Simba CrossQ with Batch Renormalization inside its blocks;
  not here) and DroQ's critic dropout and LayerNorm."""
  if c.architecture != "mlp":
    raise ConfigError(f"crossq.architecture {c.architecture!r} is not supported: CrossQ's "
                      "networks are MLPs with Batch Renormalization; for SimBa networks use "
                      "sac or tqc with architecture='simba'.")
  if c.critic_layer_norm:
    raise ConfigError("crossq.critic_layer_norm is not supported: CrossQ's critics already "
                      "normalize with Batch Renormalization (leave it False).")
  if c.critic_dropout:
    raise ConfigError(f"crossq.critic_dropout is not supported (got {c.critic_dropout!r}): "
                      "CrossQ's critic passes carry Batch Renormalization statistics, not "
                      "dropout masks; DroQ is a SAC (or TQC) configuration.")
