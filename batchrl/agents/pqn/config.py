"""``PQNConfig``: every knob of PQN (Gallici et al., "Simplifying Deep Temporal Difference
Learning", ICLR 2025), documented and validated.

Defaults are the paper's Atari values as its reference code sets them (purejaxql,
``purejaxql/config/alg/pqn_atari.yaml`` at commit 47af6d7): rollouts of 32 steps per env,
Q(lambda) with lambda 0.65, discount 0.99, 2 epochs of 32 minibatches, RAdam 2.5e-4 with
gradients clipped at norm 10, LayerNorm in the network, epsilon 1.0 -> 0.001 over the first
10% of the updates. The CartPole and MinAtar values are recipes (``recipes.py``).

Units: ``rollout_length`` counts ``store`` calls (each stores one step of each of the
``num_envs`` environments) and is the model's period; the exploration and learning-rate
schedules count updates, as fractions of ``total_updates`` (named configs set it to the run's
updates, so ``--set steps=N`` refits both).
"""
from __future__ import annotations

import json
from typing import Literal

from batchrl.configclass import ConfigError, configclass, param
from batchrl.networks.layer_specs import NetworkSpecError, check_layer

# The layer types PQN's networks take (``networks.layer_specs``): each dense/conv2d layer is
# followed by the JSON builder's layer_norm, then its activation.
LAYER_TYPES = ("dense", "conv2d", "flatten")


@configclass
class PQNConfig:
  """Hyper-parameters of ``make_pqn``."""

  # network
  hidden_layers: tuple[int, ...] = param((256, 256), "Without a network spec: hidden sizes of "
                                         "the MLP (dense -> LayerNorm -> relu each).")
  network: str | None = param(
      None, "None: the hidden_layers MLP. Else a list of layers as JSON text, from the JSON "
      "network builder's 'dense', 'conv2d' and 'flatten' types and keys (e.g. a conv torso "
      "for images); each dense/conv2d layer gets LayerNorm before its activation. A linear "
      "layer of all Q-values follows.")
  layer_norm: bool = param(True, "LayerNorm after every hidden layer, before its "
                           "activation: what keeps PQN stable without a target network "
                           "(the paper's point); False only for ablations.")
  normalize_observations: bool = param(False, "Centre and scale float observations by "
                                       "running statistics of the stored ones (the "
                                       "reference code's optional input normalization).")

  # rollout and targets
  rollout_length: int = param(32, "Environment steps per update per environment (the "
                              "model's period); an update learns from rollout_length * "
                              "num_envs transitions.")
  discount: float = param(0.99, "Reward discount gamma.")
  td_lambda: float = param(0.65, "lambda of the Q(lambda) targets: target_t = r_t + gamma * "
                           "((1 - lambda) max_a Q(s_t+1, a) + lambda target_t+1); 0 is "
                           "one-step Q-learning, 1 the Monte-Carlo return to the rollout's "
                           "end.")
  reward_scale: float = param(1.0, "Rewards are multiplied by this for learning (the "
                              "reference CartPole config uses 0.1).")

  # update
  update_epochs: int = param(2, "Passes over the rollout per update (targets stay those "
                             "computed before the first).")
  num_minibatches: int = param(32, "Minibatches per epoch; must divide rollout_length * "
                               "num_envs.")
  optimizer: Literal["radam", "adam"] = param("radam", "RAdam (the reference code's) or "
                                              "Adam.")
  learning_rate: float = param(2.5e-4, "Step size (the start value when annealed).")
  anneal_learning_rate: bool = param(False, "Anneal the learning rate linearly to 0 over "
                                     "total_updates updates (the reference CartPole and "
                                     "MinAtar configs do; Atari does not).")
  adam_epsilon: float = param(1e-8, "epsilon of Adam / RAdam.")
  max_grad_norm: float | None = param(10.0, "Clip gradients to this global norm (None: off).")

  # exploration
  epsilon_start: float = param(1.0, "Epsilon-greedy: the first epsilon.")
  epsilon_end: float = param(0.001, "Epsilon-greedy: the final epsilon.")
  epsilon_decay: float = param(0.1, "Fraction of total_updates over which epsilon goes "
                               "linearly from epsilon_start to epsilon_end (0: "
                               "epsilon_end from the start).")
  total_updates: int = param(10_000, "Updates of the whole run, which the epsilon and "
                             "learning-rate schedules are fractions of. Named configs derive "
                             "it from run.steps (--set steps=N re-derives it); in the "
                             "object API it is this value unless given.")

  def __post_init__(self):
    _check_network(self)
    _check_counts(self)
    _check_ranges(self)


def network_layers(c: PQNConfig) -> tuple[tuple[str, tuple], ...]:
  """The checked ``(type, ((key, value), ...))`` of every hidden layer, defaults filled in:
  hashable, so networks are cached on it (not on the config, whose searched fields
  ``batchrl tune`` may trace)."""
  if c.network is None:
    layers = tuple(check_layer({"type": "dense", "size": n, "activation": "relu"}, "")
                   for n in c.hidden_layers)
  else:
    layers = _parse_network(c.network)
  return tuple((kind, tuple(sorted(options.items()))) for kind, options in layers)


def _parse_network(text: str) -> tuple[tuple[str, dict], ...]:
  try:
    spec = json.loads(text)
  except json.JSONDecodeError as e:
    raise ConfigError(f"pqn.network is not valid JSON: {e}") from None
  if not isinstance(spec, list):
    raise ConfigError(f"pqn.network must be a list of layers ({', '.join(LAYER_TYPES)}): PQN "
                      "builds its own network to put LayerNorm after each layer; got "
                      f"{json.dumps(spec)[:80]}.")
  layers = []
  for i, raw in enumerate(spec):
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind not in LAYER_TYPES:
      raise ConfigError(f"pqn.network[{i}]: PQN's networks take the layer types "
                        f"{', '.join(LAYER_TYPES)}, got {json.dumps(raw)[:80]}.")
    try:
      kind, options = check_layer(raw, f"pqn.network[{i}]")
    except NetworkSpecError as e:
      raise ConfigError(str(e)) from None
    if options.get("l1_regularization") or options.get("l2_regularization"):
      raise ConfigError(f"pqn.network[{i}]: PQN's networks take no l1/l2 regularization "
                        "(LayerNorm keeps the Q-values in check).")
    layers.append((kind, options))
  return tuple(layers)


def _check_network(c: PQNConfig) -> None:
  if not all(n >= 1 for n in c.hidden_layers):
    raise ConfigError(f"pqn.hidden_layers must be positive sizes, got {c.hidden_layers!r}.")
  if c.network is not None:
    _parse_network(c.network)


def _check_counts(c: PQNConfig) -> None:
  for name in ("rollout_length", "update_epochs", "num_minibatches", "total_updates"):
    if getattr(c, name) < 1:
      raise ConfigError(f"pqn.{name} must be an int >= 1, got {getattr(c, name)!r}.")


def _check_ranges(c: PQNConfig) -> None:
  for name in ("discount", "td_lambda", "epsilon_start", "epsilon_end", "epsilon_decay"):
    if not 0.0 <= getattr(c, name) <= 1.0:
      raise ConfigError(f"pqn.{name} must be in [0, 1], got {getattr(c, name)!r}.")
  for name in ("learning_rate", "adam_epsilon", "reward_scale"):
    if not getattr(c, name) > 0:
      raise ConfigError(f"pqn.{name} must be > 0, got {getattr(c, name)!r}.")
  if c.max_grad_norm is not None and not c.max_grad_norm > 0:
    raise ConfigError(f"pqn.max_grad_norm must be None or > 0, got {c.max_grad_norm!r}.")


def num_minibatches_for(c: PQNConfig, num_envs: int) -> int:
  """``num_minibatches``, checked against the rollout of ``num_envs`` envs."""
  total = c.rollout_length * num_envs
  if total % c.num_minibatches:
    raise ConfigError(f"pqn.num_minibatches ({c.num_minibatches}) must divide the rollout of "
                      f"rollout_length * num_envs = {c.rollout_length} * {num_envs} = {total} "
                      "transitions.")
  return c.num_minibatches
