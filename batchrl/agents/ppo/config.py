"""PPOConfig: every knob of BatchPPO, documented and validated.

Defaults are the original BatchPPO defaults (``reference/batch-ppo.md``) except where a
field did not exist there. One deliberate change: the original collected ``update_every``
*episodes* before each update; we collect ``rollout_length`` *steps* of every environment,
so a rollout has the static shape ``[rollout_length, num_envs]`` that a fused, compiled
training program needs. Episodes that do not end inside a rollout are bootstrapped from
the value of their last observation.

The loss is one Adam on ``policy_loss + value_coef * value_loss - entropy_coef * H`` over
all parameters (separate policy and value networks, or one shared torso: ``share_torso``);
normalizer statistics are updated only from stored training experience.
"""
from __future__ import annotations

import json
from typing import Literal

from batchrl.configclass import ConfigError, configclass, param
from batchrl.networks.layer_specs import RECURRENT_TYPES


@configclass
class PPOConfig:
  """Hyper-parameters of ``make_ppo``."""

  # networks
  policy_layers: tuple[int, ...] = param((200, 100), "Hidden sizes of the policy MLP; with "
                                         "recurrent, the last one is the cell size.")
  value_layers: tuple[int, ...] = param((200, 100), "Hidden sizes of the separate value MLP.")
  activation: Literal["relu", "tanh"] = param("relu", "Hidden activation ('relu' is the "
                                              "original's).")
  recurrent: Literal["gru", "lstm"] | None = param(
      None, "None (feed-forward), 'gru' or 'lstm': the last policy layer is a recurrent "
      "cell whose state is kept per environment.")
  init_output_factor: float = param(0.1, "Variance scale of the policy output layer's "
                                    "initial kernel (small: the first policy is near its "
                                    "mean / near uniform).")
  init_std: float = param(0.35, "Initial std of the Gaussian policy (softplus of a learned, "
                          "state-independent vector).")
  network: str | None = param(
      None, "None: the MLPs above (Box observations, one Discrete or 1-D Box action). Else a "
      "network spec as JSON text (a layer list, 'auto' or a branches dict; "
      "batchrl.networks.layered) for any states and actions; the value network is built "
      "from it with its own parameters and without recurrent layers (share_torso: one "
      "torso for both).")
  share_torso: bool = param(
      False, "One feed-forward torso (the network spec's layers, or the policy_layers MLP; "
      "value_layers then unused) under both the policy head and a linear value head, trained "
      "by the joint loss, as SB3's CnnPolicy and CleanRL's Atari PPO: about half the network "
      "compute of separate networks. Not with recurrent policies.")
  float_distribution: Literal["gaussian", "beta"] = param(
      "gaussian", "With network: 'gaussian', or 'beta' for float actions with finite bounds.")

  # experience
  rollout_length: int = param(200, "Environment steps per update per environment (the "
                              "model's period); an update sees rollout_length * num_envs "
                              "transitions.")
  update_epochs: int = param(25, "Passes over the rollout per update.")
  batch_size: int | None = param(
      None, "Transitions per minibatch (None: the whole rollout); must divide rollout_length "
      "* num_envs, and be a multiple of chunk_length for recurrent policies.")
  chunk_length: int | None = param(
      None, "Each environment's rollout is cut into chunks of this many steps and "
      "minibatches are whole chunks; recurrent policies backpropagate through each chunk "
      "from the carry they had while acting. None: rollout_length for recurrent policies, "
      "single steps otherwise.")

  # optimization
  learning_rate: float = param(1e-4, "Adam step size.")
  adam_epsilon: float = param(1e-8, "Adam's epsilon.")
  max_grad_norm: float | None = param(None, "Clip gradients to this global norm; None = no "
                                      "clipping.")
  total_updates: int | None = param(
      None, "Anneal the learning rate linearly to 0 over this many updates (None: constant). "
      "Named configs derive it from run.steps, so --set steps=N re-derives it.")
  value_coef: float = param(1.0, "Weight of the value loss 0.5 * mean((return - V)^2).")
  entropy_coef: float = param(0.0, "Weight of the entropy bonus.")

  update_loop: Literal["scan", "host", "auto"] = param(
      "scan", "How batchrl's drivers run an update's minibatch steps: 'scan' (a lax.scan "
      "inside the compiled program), 'host' (from the host, one top-level compiled call per "
      "step: XLA:CPU runs convolution gradients about 10x slower inside loops, jax issue "
      "#12868; batchrl.train.host_update), 'auto' ('host' on the CPU backend, 'scan' "
      "elsewhere). Same result up to float rounding. The model's own update (make_ppo) "
      "always scans.")

  # returns and advantages
  discount: float = param(0.995, "Reward discount.")
  gae_lambda: float | None = param(None, "GAE lambda for advantages; None = return - value "
                                   "(the original).")
  value_target: Literal["return", "lambda_return"] = param(
      "return", "What V regresses to: 'return' (discounted return, bootstrapped at cuts; the "
      "original) or 'lambda_return' (advantage + value; needs gae_lambda).")
  normalize_advantages: bool = param(True, "Standardize advantages over the whole rollout.")

  # policy objective
  policy_objective: Literal["kl_penalty", "clip"] = param(
      "kl_penalty", "'kl_penalty' (the original: -mean(ratio * A) + beta * KL(old||new) with "
      "an adaptive beta) or 'clip' (the clipped surrogate).")
  kl_target: float = param(1e-2, "Target KL per update of the adaptive penalty.")
  kl_cutoff_factor: float = param(2.0, "Above kl_target * kl_cutoff_factor a quadratic "
                                  "cutoff is added.")
  kl_cutoff_coef: float = param(1000.0, "Weight of that quadratic cutoff.")
  kl_init_penalty: float = param(1.0, "Initial beta of the KL penalty.")
  clip_range: float = param(0.2, "Epsilon of the clipped objective (also used for the "
                            "clipfrac metric).")
  clip_value: bool = param(False, "Clip value predictions to clip_range around the old "
                           "values.")

  # normalization
  normalize_observations: bool = param(True, "Centre and scale observations by running "
                                       "statistics.")
  observation_clip: float = param(5.0, "Clip normalized observations to +-this.")
  normalize_rewards: bool = param(True, "Scale (not centre) rewards by their running std.")
  reward_clip: float = param(10.0, "Clip normalized rewards to +-this.")
  normalizer_epsilon: float = param(1e-4, "std = sqrt(var + epsilon) in the normalizers.")

  # actions (Box spaces)
  rescale_actions: bool = param(False, "Map policy actions from [-1, 1] to the space's "
                                "bounds (the original's RangeNormalize; for envs that are "
                                "not range-normalized).")
  clip_actions: bool = param(True, "Clip actions sent to the env to the bounds (the "
                             "unclipped sample is learned from).")

  def __post_init__(self):
    _check_network(self)
    _check_layers(self)
    _check_counts(self)
    _check_ranges(self)

  @property
  def steps_chunk(self) -> int:
    """Length of the sequences the update trains on (minibatches are whole sequences)."""
    if self.chunk_length is not None:
      return self.chunk_length
    return 1 if self.recurrent is None else self.rollout_length


def _check_layers(c: PPOConfig) -> None:
  for name in ("policy_layers", "value_layers"):
    layers = getattr(c, name)
    if not all(n > 0 for n in layers):
      raise ConfigError(f"ppo.{name} must be positive ints, got {layers!r}.")
  if c.recurrent is not None and not c.policy_layers:
    raise ConfigError("ppo.recurrent needs at least one policy layer (the cell size); "
                      "policy_layers is empty.")


def _check_network(c: PPOConfig) -> None:
  if c.share_torso and c.recurrent is not None:
    raise ConfigError(f"ppo.share_torso needs a feed-forward policy; recurrent="
                      f"{c.recurrent!r} keeps a carry the value head would not see. Set "
                      "recurrent=None or share_torso=False.")
  if c.network is None:
    return
  try:
    json.loads(c.network)
  except json.JSONDecodeError as e:
    raise ConfigError(f"ppo.network is not valid JSON: {e}") from None
  if c.recurrent is not None:
    raise ConfigError("ppo.recurrent applies to the MLP networks; with a network spec add "
                      "an 'lstm' or 'gru' layer to it instead.")
  if c.share_torso and _has_recurrent_layer(json.loads(c.network)):
    raise ConfigError("ppo.share_torso needs a feed-forward network: the network spec has "
                      "an lstm/gru layer; drop it or set share_torso=False.")


def _has_recurrent_layer(spec) -> bool:
  """Whether a network spec (JSON value) holds an lstm/gru layer anywhere."""
  if isinstance(spec, dict):
    return (spec.get("type") in RECURRENT_TYPES
            or any(_has_recurrent_layer(v) for v in spec.values()))
  if isinstance(spec, list):
    return any(_has_recurrent_layer(v) for v in spec)
  return False


def _check_counts(c: PPOConfig) -> None:
  for name in ("rollout_length", "update_epochs"):
    if getattr(c, name) < 1:
      raise ConfigError(f"ppo.{name} must be a positive int, got {getattr(c, name)!r}.")
  for name in ("batch_size", "chunk_length", "total_updates"):
    value = getattr(c, name)
    if value is not None and value < 1:
      raise ConfigError(f"ppo.{name} must be None or a positive int, got {value!r}.")
  if c.chunk_length is not None and c.rollout_length % c.chunk_length:
    raise ConfigError(f"ppo.chunk_length ({c.chunk_length}) must divide rollout_length "
                      f"({c.rollout_length}).")
  if c.batch_size is not None and c.batch_size % c.steps_chunk:
    raise ConfigError(f"ppo.batch_size ({c.batch_size}) must be a multiple of the chunk "
                      f"length ({c.steps_chunk}): minibatches are whole chunks.")


def _check_ranges(c: PPOConfig) -> None:
  positive = ("learning_rate", "adam_epsilon", "init_std", "init_output_factor", "kl_target",
              "kl_cutoff_factor", "clip_range", "observation_clip", "reward_clip",
              "normalizer_epsilon")
  for name in positive:
    if not getattr(c, name) > 0:
      raise ConfigError(f"ppo.{name} must be > 0, got {getattr(c, name)!r}.")
  for name in ("value_coef", "entropy_coef", "kl_cutoff_coef", "kl_init_penalty"):
    if not getattr(c, name) >= 0:
      raise ConfigError(f"ppo.{name} must be >= 0, got {getattr(c, name)!r}.")
  if not 0.0 <= c.discount <= 1.0:
    raise ConfigError(f"ppo.discount must be in [0, 1], got {c.discount!r}.")
  if c.gae_lambda is not None and not 0.0 <= c.gae_lambda <= 1.0:
    raise ConfigError(f"ppo.gae_lambda must be None or in [0, 1], got {c.gae_lambda!r}.")
  if c.value_target == "lambda_return" and c.gae_lambda is None:
    raise ConfigError("ppo.value_target='lambda_return' needs gae_lambda; set gae_lambda "
                      "(e.g. 0.95) or value_target='return'.")
  if c.max_grad_norm is not None and not c.max_grad_norm > 0:
    raise ConfigError(f"ppo.max_grad_norm must be None or > 0, got {c.max_grad_norm!r}.")
