"""``ReplayConfig``: what every replay agent (DQN, DDQN, DQFD, NAF) shares: the memory, the
update schedule, the TD loss and the optimizer, with their checks.

Units: ``update_frequency`` counts ``store`` calls (one call stores one transition of each of
the ``num_envs`` environments) and is the model's ``period``; ``first_update``,
``target_update_frequency``, exploration schedules and ``beta_steps`` count environment steps
summed over environments (transitions stored), as TensorForce's timesteps did.
"""
from __future__ import annotations

import json

from batchrl.configclass import ConfigError, configclass, param
from batchrl.errors import did_you_mean
from batchrl.exploration_spec import ExplorationSpec, ExplorationSpecError, parse_exploration_spec

MEMORIES = ("replay", "prioritized_replay", "naive_prioritized_replay")


@configclass
class ReplayConfig:
  """What every replay agent (DQN, DDQN, DQFD, NAF) shares: the memory, the update schedule,
  the TD loss and the optimizer. Agent configs add their network and exploration fields.

  ``learning_rate`` means here what it means in every batchrl config and in TensorForce's
  keys: the step size of the agent's optimizer, the one TensorForce's ``optimizer`` key sets,
  which steps the network that acts (with what is learned in the same loss): the Q-network.
  A network with an optimizer of its own has a rate of its own: the critics of the
  actor-critic agents (``critic_learning_rate``; their ``learning_rate`` steps the actor),
  VPG's and TRPO's ``states`` baseline (``baseline_learning_rate``)."""

  memory: str = param("replay", "Replay memory: 'replay' (uniform), 'prioritized_replay' (sum "
                      "tree) or 'naive_prioritized_replay' (O(N) draws).")
  memory_capacity: int = param(100_000, "Transitions the memory holds (rounded down to whole "
                               "rows of num_envs).")
  prioritization_weight: float = param(0.6, "Prioritized memories: alpha, priority = "
                                       "(|TD error| + constant) ** alpha.")
  prioritization_constant: float = param(1e-6, "Prioritized memories: added to |TD error| so "
                                         "no priority drops to 0.")
  beta_initial: float = param(0.4, "Prioritized memories: importance-weight exponent at the "
                              "start, annealed linearly to 1.")
  beta_steps: int | None = param(None, "Prioritized memories: environment steps over which "
                                 "beta reaches 1 (None: beta stays beta_initial).")

  batch_size: int = param(32, "Transitions per gradient step.")
  update_frequency: int = param(4, "store calls between updates (the model's period); each "
                                "stores num_envs transitions.")
  first_update: int = param(10_000, "Environment steps stored before the first update.")
  repeat_update: int = param(1, "Gradient steps per update (each on a fresh batch).")
  target_update_frequency: int = param(10_000, "Environment steps between target network "
                                       "updates (checked at each update).")
  update_target_weight: float = param(1.0, "tau: target <- tau * online + (1 - tau) * target "
                                      "at each target update (1 = hard copy).")

  discount: float = param(0.99, "Reward discount gamma.")
  clip_loss: float = param(0.0, "If > 0, Huber loss with this linear bound (delta); else "
                           "0.5 * squared TD error.")
  learning_rate: float = param(1e-3, "Adam step size of the agent's optimizer (TensorForce: "
                               "optimizer), which steps the Q-network.")
  adam_epsilon: float = param(1e-8, "Adam epsilon.")
  max_grad_norm: float | None = param(None, "Clip gradients to this global norm (None: off).")


def check_network_fields(c, prefix: str) -> None:
  """``network`` (JSON text or None) and the flat layout's ``hidden_layers``."""
  if c.network is not None:
    try:
      json.loads(c.network)
    except json.JSONDecodeError as e:
      raise ConfigError(f"{prefix}.network is not valid JSON: {e}") from None
  if not c.hidden_layers or any(n < 1 for n in c.hidden_layers):
    raise ConfigError(f"{prefix}.hidden_layers must be positive sizes, got {c.hidden_layers!r}.")


def check_replay(c: ReplayConfig, prefix: str) -> None:
  """The ``ReplayConfig`` fields; errors name them as ``<prefix>.<field>``."""
  if c.memory not in MEMORIES:
    raise ConfigError(f"unknown {prefix}.memory {c.memory!r}{did_you_mean(c.memory, MEMORIES)}."
                      f" Valid: {', '.join(MEMORIES)}.")
  for name in ("memory_capacity", "batch_size", "update_frequency", "repeat_update",
               "target_update_frequency"):
    if getattr(c, name) < 1:
      raise ConfigError(f"{prefix}.{name} must be >= 1, got {getattr(c, name)!r}.")
  if c.memory_capacity < c.batch_size:
    raise ConfigError(f"{prefix}.memory_capacity ({c.memory_capacity}) is smaller than "
                      f"batch_size ({c.batch_size}): a batch could never be drawn.")
  if c.first_update < 0:
    raise ConfigError(f"{prefix}.first_update must be >= 0, got {c.first_update!r}.")
  if c.beta_steps is not None and c.beta_steps < 1:
    raise ConfigError(f"{prefix}.beta_steps must be None or >= 1, got {c.beta_steps!r}.")
  if not 0.0 <= c.discount <= 1.0:
    raise ConfigError(f"{prefix}.discount must be in [0, 1], got {c.discount!r}.")
  if not 0.0 < c.update_target_weight <= 1.0:
    raise ConfigError(f"{prefix}.update_target_weight (tau) must be in (0, 1], got "
                      f"{c.update_target_weight!r}.")
  for name in ("learning_rate", "adam_epsilon"):
    if not getattr(c, name) > 0:
      raise ConfigError(f"{prefix}.{name} must be > 0, got {getattr(c, name)!r}.")
  for name in ("clip_loss", "prioritization_weight", "prioritization_constant"):
    if getattr(c, name) < 0:
      raise ConfigError(f"{prefix}.{name} must be >= 0, got {getattr(c, name)!r}.")
  if not 0.0 <= c.beta_initial <= 1.0:
    raise ConfigError(f"{prefix}.beta_initial must be in [0, 1], got {c.beta_initial!r}.")
  if c.max_grad_norm is not None and not c.max_grad_norm > 0:
    raise ConfigError(f"{prefix}.max_grad_norm must be None or > 0, got {c.max_grad_norm!r}.")


def parse_exploration(text: str | None, where: str, kind: str) -> ExplorationSpec | None:
  """The ``ExplorationSpec`` of an ``exploration`` field (JSON text of a
  ``batchrl.exploration`` spec for ``kind`` ('int' or 'float') actions; None: none), checked
  without JAX (``batchrl.exploration.exploration_of`` builds it); errors name ``where``."""
  if text is None:
    return None
  try:
    spec = json.loads(text)
  except json.JSONDecodeError as e:
    raise ConfigError(f"{where} is not valid JSON: {e}") from None
  try:
    exploration = parse_exploration_spec(spec, where)
    if exploration is not None:
      exploration.check_kind(kind)
  except ExplorationSpecError as e:
    raise ConfigError(str(e)) from None
  return exploration
