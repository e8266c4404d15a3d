"""``PGConfig``: the fields VPG and TRPO share (networks, rollout, returns, baselines,
normalizers, actions), and their cross-field checks. Each agent's config adds its own
(``batchrl.agents.vpg.config``, ``batchrl.agents.trpo.config``)."""
from __future__ import annotations

import dataclasses
import json
from typing import Literal

from batchrl.configclass import ConfigError, param

BASELINE_MODES = ("none", "states", "network")
BASELINE_NAMES = ("mlp", "linear", "cnn", "auto")
@dataclasses.dataclass(frozen=True, kw_only=True)
class PGConfig:
  """Fields VPG and TRPO share (their configs add their own; see ``check_pg_config``)."""

  policy_layers: tuple[int, ...] = param((64, 64), "Hidden sizes of the policy MLP (flat "
                                         "layout, network=None).")
  activation: Literal["relu", "tanh"] = param("tanh", "Hidden activation of the MLPs.")
  network: str | None = param(None, "Policy network spec as JSON text (a layer list, 'auto' "
                              "or a branches dict); None = the policy_layers MLP for Box "
                              "states ('auto' for other states).")
  init_output_factor: float = param(0.01, "Variance scale of the policy output layer's "
                                    "initial kernel (small: a near-uniform start).")
  init_std: float = param(0.5, "Initial std of Gaussian policies (softplus of a learned, "
                          "state-independent vector).")
  bounded_mean: Literal["none", "tanh"] = param("none", "'tanh' squashes the Gaussian mean "
                                                "to [-1, 1] (with rescale_actions).")
  float_distribution: Literal["gaussian", "beta"] = param(
      "gaussian", "Distribution of float actions; 'beta' needs finite bounds.")
  rollout_length: int = param(256, "Environment steps per update per environment (the "
                              "model's period); a batch is rollout_length * num_envs "
                              "timesteps.")
  discount: float = param(0.99, "Reward discount.")
  gae_lambda: float | None = param(None, "GAE lambda (TensorForce gae_rewards=True); None = "
                                   "discounted returns minus the baseline.")
  value_target: Literal["return", "lambda_return"] = param(
      "return", "What the baseline regresses to: discounted returns, or GAE lambda-returns "
      "(advantage + value; needs gae_lambda).")
  normalize_rewards: bool = param(True, "TensorForce's normalize_rewards: standardize the "
                                  "advantages (returns minus baseline) over each batch.")
  entropy_coef: float = param(0.0, "Weight of the entropy bonus in the policy objective.")
  baseline_mode: Literal["none", "states", "network"] = param(
      "states", "'none'; 'states': a separate value network; 'network': a value head on "
      "the policy's torso.")
  baseline_network: str = param("mlp", "'states' baseline network: 'mlp' (baseline_layers), "
                                "'linear', 'cnn' (one image state), 'auto', or a network "
                                "spec as JSON text.")
  baseline_layers: tuple[int, ...] = param((64, 64), "Hidden sizes of the 'mlp' baseline.")
  baseline_learning_rate: float = param(1e-3, "Adam step size of the 'states' baseline.")
  baseline_steps: int = param(5, "Passes of baseline Adam steps over each batch.")
  baseline_minibatches: int = param(1, "Minibatches per baseline pass (must divide the "
                                    "batch, rollout_length * num_envs).")
  normalize_observations: bool = param(False, "Centre and scale observations by running "
                                       "statistics (of stored experience).")
  observation_clip: float = param(10.0, "Clip normalized observations to +-this.")
  scale_rewards: bool = param(False, "Divide rewards by their running std (not centred).")
  reward_clip: float = param(10.0, "Clip scaled rewards to +-this.")
  normalizer_epsilon: float = param(1e-4, "std = sqrt(var + epsilon) in the normalizers.")
  rescale_actions: bool = param(False, "Map float actions from [-1, 1] to the space's "
                                "finite bounds.")
  clip_actions: bool = param(True, "Clip float actions sent to the env to the bounds (the "
                             "unclipped sample is learned from).")


def check_pg_config(c: PGConfig, name: str) -> None:
  """Cross-field checks; ``name`` ('VPGConfig', ...) prefixes the key in messages."""
  for key in ("policy_layers", "baseline_layers"):
    if not all(n > 0 for n in getattr(c, key)):
      raise ConfigError(f"{name}.{key} must be positive ints, got {getattr(c, key)!r}.")
  for key in ("rollout_length", "baseline_steps", "baseline_minibatches"):
    if getattr(c, key) < 1:
      raise ConfigError(f"{name}.{key} must be >= 1, got {getattr(c, key)!r}.")
  for key in ("init_output_factor", "init_std", "baseline_learning_rate", "observation_clip",
              "reward_clip", "normalizer_epsilon"):
    if not getattr(c, key) > 0:
      raise ConfigError(f"{name}.{key} must be > 0, got {getattr(c, key)!r}.")
  if c.entropy_coef < 0:
    raise ConfigError(f"{name}.entropy_coef must be >= 0, got {c.entropy_coef!r}.")
  if not 0.0 <= c.discount <= 1.0:
    raise ConfigError(f"{name}.discount must be in [0, 1], got {c.discount!r}.")
  if c.gae_lambda is not None and not 0.0 <= c.gae_lambda <= 1.0:
    raise ConfigError(f"{name}.gae_lambda must be None or in [0, 1], got {c.gae_lambda!r}.")
  if c.value_target == "lambda_return" and c.gae_lambda is None:
    raise ConfigError(f"{name}.value_target='lambda_return' needs gae_lambda; set gae_lambda "
                      "(e.g. 0.97) or value_target='return'.")
  _json_text(c.network, f"{name}.network", allow_none=True)
  if c.baseline_network not in BASELINE_NAMES:
    _json_text(c.baseline_network, f"{name}.baseline_network", allow_none=False,
               names=BASELINE_NAMES)


def _json_text(text, key: str, allow_none: bool, names: tuple[str, ...] = ()) -> None:
  if text is None and allow_none:
    return
  try:
    json.loads(text)
  except (TypeError, json.JSONDecodeError) as e:
    named = f"one of {names} or " if names else ""
    raise ConfigError(f"{key} must be {named}a network spec as JSON text "
                      f"(json.dumps(spec)); {text!r} is not valid JSON: {e}") from None
