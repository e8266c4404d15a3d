"""``SimbaV2Config``: ``StochasticActorConfig`` (the shared actor-critic fields and SAC's
entropy temperature) plus SimbaV2's (Lee et al. 2025, "Hyperspherical Normalization for
Scalable Deep Reinforcement Learning"): hyperspherical actor and critics
(``batchrl.networks.hyperspherical``), ``num_critics`` distributional critics of
``num_bins`` bins over ``[-normalized_return_max, normalized_return_max]``, running
observation normalization and reward scaling. The defaults are the authors' reference
(dojeon-ai/SimbaV2, ``configs/agent/simbaV2.yaml``): an actor of one block of width 128,
critics of two blocks of width 512, 101 bins on [-5, 5], Adam 1e-4 for the actor, the
critics and the temperature, which starts at 0.01 and steers toward -0.5 per action
element, uniform actions for the first 5000 steps and learning from then on.

The learning rates decay linearly to half over the run's gradient steps, as the
reference's (``learning_rate_decay_steps``, which ``batchrl train`` fits to the run; 1M,
the reference's MuJoCo runs, where the run's length is not known, as in
``Agent.create``).

What differs from the reference: the temperature
steps down ``-log alpha (log pi + target)`` as every soft actor-critic here (the
reference's ``alpha (H - target)`` has the same sign and, under Adam, nearly the same step),
and the weights start as normal draws projected on the sphere rather than orthogonal ones
(``batchrl.networks.hyperspherical.HyperDense`` says why).

Its networks and loss are its own: ``architecture``, ``critic_dropout``,
``critic_layer_norm``, ``log_std_head``, ``clip_loss`` (its critics learn by cross entropy)
and a ``network`` spec other than 'auto' are not read, and a value other
than their default is an error rather than silently unread."""
from __future__ import annotations

import dataclasses
import json

from batchrl.agents.actor_critic.config import StochasticActorConfig, check_stochastic_actor
from batchrl.configclass import ConfigError, configclass, param

# fields of the shared config SimbaV2's own networks and loss leave unread
_NOT_READ = ("architecture", "critic_dropout", "critic_layer_norm", "log_std_head", "clip_loss")


@configclass
class SimbaV2Config(StochasticActorConfig):
  """Hyper-parameters of ``make_simbav2``."""

  learning_rate: float = param(1e-4, "Adam step size of the actor.")
  critic_learning_rate: float = param(1e-4, "Adam step size of the critics.")
  alpha_learning_rate: float = param(1e-4, "Adam step size of log alpha; 0: alpha stays "
                                     "initial_alpha.")
  learning_rate_decay_steps: int | None = param(
      1_000_000, "Gradient steps over which the learning rates decay linearly to "
      "learning_rate_decay_to (0.5) times their values; batchrl train sets it to the run's "
      "gradient steps, as the reference; None: constant rates.")
  initial_alpha: float = param(0.01, "The entropy temperature alpha at the start.")
  target_entropy_scale: float = param(0.5, "With target_entropy None, the target is minus "
                                      "this times the action size.")
  first_update: int = param(5_000, "Environment steps stored before the first update.")
  start_steps: int = param(5_000, "Environment steps (summed over envs) whose actions are "
                           "drawn uniformly within the action bounds.")
  actor_layers: tuple[int, ...] = param((128,), "The actor's hyperspherical blocks: one "
                                        "width per block, all equal.")
  critic_layers: tuple[int, ...] = param((512, 512), "Each critic's hyperspherical blocks: "
                                         "one width per block, all equal.")
  num_critics: int = param(2, "Critic networks: the actor climbs the smallest expected "
                           "value, the target takes the distribution of the target critic "
                           "whose expected value is smallest (1: no minimum, the "
                           "reference's setting for tasks without terminal states).")
  num_bins: int = param(101, "Bins of each critic's return distribution, evenly spaced over "
                        "[-normalized_return_max, normalized_return_max].")
  c_shift: float = param(3.0, "The constant feature appended to the input before its "
                         "projection on the sphere (keeps the input's norm as information).")
  normalize_observations: bool = param(True, "Centre and scale float observations by running "
                                       "statistics of the stored ones.")
  normalize_rewards: bool = param(True, "Scale rewards by the spread of a running discounted "
                                  "return, so that returns fit the critics' support.")

  def __post_init__(self):
    check_stochastic_actor(self, "simbav2")
    if self.num_critics < 1:
      raise ConfigError(f"simbav2.num_critics must be >= 1, got {self.num_critics!r}.")
    if self.num_bins < 2:
      raise ConfigError(f"simbav2.num_bins must be >= 2 (the support's two ends at least), "
                        f"got {self.num_bins!r}.")
    if not self.c_shift > 0:
      raise ConfigError(f"simbav2.c_shift must be > 0, got {self.c_shift!r}.")
    for name in ("actor_layers", "critic_layers"):
      widths = tuple(getattr(self, name))
      if len(set(widths)) > 1:
        raise ConfigError(f"simbav2.{name} lists SimbaV2's blocks, each a step between two "
                          f"points of one sphere, so every block has the same width; got "
                          f"{widths!r} (e.g. {(widths[0],) * len(widths)!r}).")
    defaults = {f.name: f.default for f in dataclasses.fields(StochasticActorConfig)}
    for name in _NOT_READ:
      default = defaults[name]
      if getattr(self, name) != default:
        raise ConfigError(f"simbav2.{name} is not read: SimbaV2's networks and critic loss "
                          f"are its own (leave it at {default!r}); got "
                          f"{getattr(self, name)!r}.")
    if self.network is not None and json.loads(self.network) != "auto":
      raise ConfigError("simbav2.network is not read: SimbaV2's networks are its own "
                        "hyperspherical ones on the flattened float observations (leave it "
                        f"None or 'auto'); got {self.network!r}.")

  @property
  def support(self) -> tuple[float, float]:
    """The critics' support ``(low, high)``."""
    return -self.normalized_return_max, self.normalized_return_max
