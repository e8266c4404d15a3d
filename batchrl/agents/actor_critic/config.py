"""``ActorCriticConfig``: what DDPG, TD3 and SAC share on top of ``ReplayConfig`` (memory,
update schedule, discount): two networks, their learning rates and the soft target update.

Defaults follow the usual continuous-control settings (Fujimoto et al. 2018, Haarnoja et al.
2018): 2x256 ReLU MLPs, Adam 3e-4 for both networks, batch 256, one gradient step per stored
transition from step 1000 on, targets moved by tau = 0.005 after each learning step.
``learning_rate`` means what it means in every config (``ReplayConfig``): the step size of
the agent's optimizer, TensorForce's ``optimizer``, which steps the network that acts: here
the actor. The critics have an optimizer of their own, stepped by ``critic_learning_rate``
(TensorForce's ``critic_optimizer``), as SAC's temperature has (``alpha_learning_rate``).

Options of the off-policy frontier (issue 51), each off by default (the programs and results
as without them): SimBa networks (``architecture='simba'``, Lee et al. 2025) with running
observation normalization (``normalize_observations``) and AdamW (``weight_decay``), as sbx's
SimBa policies; and DroQ's critics (Hiraoka et al. 2022: ``critic_dropout``,
``critic_layer_norm``, with ``policy_delay`` and many gradient steps per environment step).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Literal

from batchrl.agents.replay import config as replay_config
from batchrl.agents.replay.config import ReplayConfig, check_replay
from batchrl.configclass import ConfigError, configclass, param
from batchrl.networks.layer_specs import simba_widths_error


@configclass
class ActorCriticConfig(ReplayConfig):
  """Hyper-parameters shared by ``make_ddpg``, ``make_td3`` and ``make_sac``."""

  batch_size: int = param(256, "Transitions per gradient step.")
  update_frequency: int = param(1, "store calls between updates (the model's period); each "
                                "stores num_envs transitions.")
  first_update: int = param(1_000, "Environment steps stored before the first update.")
  repeat_update: int = param(1, "Gradient steps per update (each on a fresh batch).")
  start_steps: int = param(0, "Environment steps (summed over envs) whose actions are drawn "
                           "uniformly within the action bounds (uniformly among the allowed "
                           "ones for a Discrete action) instead of from the actor: what "
                           "SB3's and CleanRL's learning_starts do and Spinning Up's "
                           "start_steps; deterministic actions never are. 0: the actor "
                           "(with its exploration) acts from the first step.")
  target_update_frequency: int = param(1, "Environment steps between updates whose learning "
                                       "steps move the targets (1: every update).")
  update_target_weight: float = param(0.005, "tau: target <- tau * online + (1 - tau) * "
                                      "target after each learning step of the actor.")
  learning_rate: float = param(3e-4, "Adam step size of the agent's optimizer (TensorForce: "
                               "optimizer), which steps the actor; the critics have their "
                               "own (critic_learning_rate).")
  critic_learning_rate: float = param(3e-4, "The critic's Adam step size (TensorForce: "
                                      "critic_optimizer).")
  learning_rate_decay_steps: int | None = param(
      None, "Gradient steps over which the learning rates of the actor, the critics and the "
      "temperature decay linearly to learning_rate_decay_to times their values (SimbaV2's "
      "schedule; each optimizer counts its own steps); batchrl train sets it to the run's "
      "gradient steps (its updates times repeat_update). None: constant rates.")
  learning_rate_decay_to: float = param(0.5, "With learning_rate_decay_steps: the fraction of "
                                        "each learning rate reached at its end.")
  adam_beta1: float = param(0.9, "Adam's first-moment decay for the actor and the critics "
                            "(CrossQ's 0.5).")
  weight_decay: float = param(0.0, "AdamW's decoupled weight decay of the actor's and the "
                              "critics' parameters (sbx's SimBa policies use optax.adamw, "
                              "whose default is 1e-4); 0: Adam.")
  policy_delay: int = param(1, "Gradient steps per step of the actor (and of SAC's, TQC's "
                            "and CrossQ's temperature): it steps on the policy_delay-th, "
                            "2 * policy_delay-th, ... gradient step, the critics on every "
                            "one (DroQ: 20, with 20 gradient steps per environment step).")
  n_step: int = param(1, "n-step returns: the critics' target sums n discounted rewards of "
                      "the stored steps, then bootstraps from the state after them with "
                      "discount^n (cut at an episode end, where it bootstraps no more, or at "
                      "the newest stored step); 1: one-step targets.")
  param_resets: tuple[int, ...] = param((), "Environment steps after which the actor, the "
                                        "critics, their targets and their optimizers start "
                                        "afresh (the memory and the temperature stay; sbx's "
                                        "param_resets, for high update ratios); increasing.")

  network: str | None = param(None, "None: MLPs on a Box observation (the 'flat' layout). "
                              "Else a network spec as JSON text (batchrl.networks.layered) for "
                              "any states: the actor and each critic get a torso of their own "
                              "built from it.")
  architecture: Literal["mlp", "simba"] = param(
      "mlp", "The hidden layers of the actor and the critics: 'mlp' (Dense and activation, "
      "actor_layers / critic_layers their sizes) or 'simba' (SimBa, Lee et al. 2025: a Dense "
      "layer, one residual block per listed width, a final LayerNorm; actor_layers / "
      "critic_layers then list the blocks' widths, all equal: sbx's SimBa takes (128,) and "
      "(256, 256)). Vector observations; on images give a network spec with a conv encoder.")
  actor_layers: tuple[int, ...] = param((256, 256), "Flat layout: hidden sizes of the actor "
                                        "MLP on the observation (SimBa: its blocks' widths).")
  critic_layers: tuple[int, ...] = param((256, 256), "Hidden sizes of the critic MLP on the "
                                         "observation (flat) or torso features (network "
                                         "spec) joined with the action (SimBa: its blocks' "
                                         "widths).")
  activation: Literal["relu", "tanh"] = param("relu", "Hidden activation of the MLPs (and of "
                                              "SimBa's blocks).")
  critic_dropout: float = param(0.0, "DroQ's dropout rate in the critics (Hiraoka et al. "
                                "2022): after each hidden Dense layer of an MLP critic, "
                                "before its LayerNorm (after each SimBa block), in every "
                                "critic pass of a gradient step (the target's, the "
                                "critics' step, the actor's), masks drawn from the agent's "
                                "key; acting and evaluation never drop. 0: none.")
  critic_layer_norm: bool = param(False, "DroQ's LayerNorm in the MLP critics: after each "
                                  "hidden Dense layer (and its dropout), before the "
                                  "activation (SimBa's blocks have their own).")
  normalize_observations: bool = param(False, "Centre and scale float observations by running "
                                       "statistics of the stored ones (SimBa's RSNorm; sbx "
                                       "recommends VecNormalize with SimBa): kept in the "
                                       "agent's state, moved by each store, applied when "
                                       "acting and to every sampled batch (the memory keeps "
                                       "the observations as they came).")
  normalize_rewards: bool = param(False, "Scale rewards by the spread of a running "
                                  "discounted return (SimbaV2's reward scaling): r / "
                                  "max(std(G), max|G| / normalized_return_max), G each env's "
                                  "return so far, not centred; the statistics kept in the "
                                  "agent's state and moved by each store, applied to every "
                                  "sampled batch (the memory keeps rewards as they came).")
  normalized_return_max: float = param(5.0, "With normalize_rewards: the largest |return| "
                                       "seen is scaled to at most this (SimbaV2's G_max, "
                                       "the edge of its critics' support).")
  action_bounds: tuple[float, float] | None = param(
      None, "(low, high) used for action elements the environment leaves unbounded; None: "
      "such actions are an error (the actors end in tanh). Bounded elements keep their own "
      "bounds; batchrl train's gymnasium stack advertises its real ones ([-1, 1] after "
      "RangeNormalize).")

  def __post_init__(self):
    check_actor_critic(self, type(self).__name__.removesuffix("Config").lower())


DEFAULT_EXPLORATION = json.dumps({"type": "gaussian", "sigma": 0.1})


@configclass
class DeterministicActorConfig(ActorCriticConfig):
  """``ActorCriticConfig`` plus the exploration noise of a deterministic actor: the base of
  ``DDPGConfig`` and ``TD3Config`` (here, so TD3 does not build on DDPG's folder)."""

  exploration: str | None = param(DEFAULT_EXPLORATION, "Noise added to the actor's action in "
                                  "act, as JSON text of a batchrl.exploration spec for float "
                                  "actions (gaussian, ornstein_uhlenbeck, constant, "
                                  "linear_decay...), in normalized units (the bounds mapped "
                                  "to [-1, 1]), then clipped. None: no noise.")

  def __post_init__(self):
    check_actor_critic(self, "actor_critic")
    parse_exploration(self.exploration, "actor_critic.exploration")


@configclass
class StochasticActorConfig(ActorCriticConfig):
  """``ActorCriticConfig`` plus the entropy temperature of a stochastic actor (Haarnoja et al.
  2018, "SAC algorithms and applications"): alpha learned toward ``target_entropy`` (default
  minus the action size; for a Discrete action of n values 0.7 log n:
  ``batchrl.agents.actor_critic.temperature.DISCRETE_TARGET_ENTROPY_SCALE`` says why). The
  base of ``SACConfig`` and ``TQCConfig``."""

  initial_alpha: float = param(1.0, "The entropy temperature alpha at the start.")
  alpha_learning_rate: float = param(3e-4, "Adam step size of log alpha; 0: alpha stays "
                                     "initial_alpha.")
  target_entropy: float | None = param(None, "The policy entropy (nats) alpha steers toward; "
                                       "None: minus target_entropy_scale times the action "
                                       "size (float actions), 0.7 "
                                       "log n (a Discrete action of n values; a given one "
                                       "must be below log n).")
  target_entropy_scale: float = param(1.0, "With target_entropy None and float actions, the "
                                      "target is minus this times the action size (SimbaV2: "
                                      "0.5).")
  log_std_head: Literal["tanh", "clip"] = param(
      "tanh", "How a Gaussian actor bounds its log standard deviation: 'tanh' maps its "
      "output into [-5, 2] through a tanh (CleanRL's), 'clip' clips it to [-20, 2] (SB3's and "
      "sbx's).")

  def __post_init__(self):
    check_stochastic_actor(self, type(self).__name__.removesuffix("Config").lower())


def check_stochastic_actor(c: StochasticActorConfig, prefix: str) -> None:
  """The shared fields and the temperature's; errors name them as ``<prefix>.<field>``."""
  check_actor_critic(c, prefix)
  if not c.initial_alpha > 0:
    raise ConfigError(f"{prefix}.initial_alpha must be > 0, got {c.initial_alpha!r}.")
  if not c.target_entropy_scale > 0:
    raise ConfigError(f"{prefix}.target_entropy_scale must be > 0, got "
                      f"{c.target_entropy_scale!r}.")
  if c.alpha_learning_rate < 0:
    raise ConfigError(f"{prefix}.alpha_learning_rate must be >= 0, got "
                      f"{c.alpha_learning_rate!r}.")


def check_actor_critic(c: ActorCriticConfig, prefix: str) -> None:
  """The shared fields; errors name them as ``<prefix>.<field>``."""
  check_replay(c, prefix)  # repeat_update >= 1 among them
  if c.start_steps < 0:
    raise ConfigError(f"{prefix}.start_steps must be >= 0 (0: the actor acts from the first "
                      f"step), got {c.start_steps!r}.")
  if not c.critic_learning_rate > 0:
    raise ConfigError(f"{prefix}.critic_learning_rate must be > 0, got "
                      f"{c.critic_learning_rate!r}.")
  resets = tuple(c.param_resets)
  if any(b < 1 for b in resets) or list(resets) != sorted(set(resets)):
    raise ConfigError(f"{prefix}.param_resets must be increasing environment steps >= 1, got "
                      f"{c.param_resets!r}.")
  if not c.normalized_return_max > 0:
    raise ConfigError(f"{prefix}.normalized_return_max must be > 0, got "
                      f"{c.normalized_return_max!r}.")
  if c.n_step < 1:
    raise ConfigError(f"{prefix}.n_step must be >= 1 (1: one-step targets), got {c.n_step!r}.")
  if c.learning_rate_decay_steps is not None and c.learning_rate_decay_steps < 1:
    raise ConfigError(f"{prefix}.learning_rate_decay_steps must be >= 1 or None (constant "
                      f"rates), got {c.learning_rate_decay_steps!r}.")
  if not c.learning_rate_decay_to >= 0:
    raise ConfigError(f"{prefix}.learning_rate_decay_to must be >= 0, got "
                      f"{c.learning_rate_decay_to!r}.")
  if not 0 <= c.adam_beta1 < 1:
    raise ConfigError(f"{prefix}.adam_beta1 must be in [0, 1), got {c.adam_beta1!r}.")
  if c.weight_decay < 0:
    raise ConfigError(f"{prefix}.weight_decay must be >= 0 (0: Adam), got {c.weight_decay!r}.")
  if c.policy_delay < 1:
    raise ConfigError(f"{prefix}.policy_delay must be >= 1 (gradient steps per actor step), "
                      f"got {c.policy_delay!r}.")
  if not 0 <= c.critic_dropout < 1:
    raise ConfigError(f"{prefix}.critic_dropout must be in [0, 1) (0: none), got "
                      f"{c.critic_dropout!r}.")
  if c.network is not None:
    try:
      json.loads(c.network)
    except json.JSONDecodeError as e:
      raise ConfigError(f"{prefix}.network is not valid JSON: {e}") from None
  if c.action_bounds is not None and not c.action_bounds[0] < c.action_bounds[1]:
    raise ConfigError(f"{prefix}.action_bounds must be (low, high) with low < high, got "
                      f"{c.action_bounds!r}.")
  for name in ("actor_layers", "critic_layers"):
    sizes = getattr(c, name)
    if not sizes or any(n < 1 for n in sizes):
      raise ConfigError(f"{prefix}.{name} must be positive sizes, got {sizes!r}.")
    if c.architecture == "simba" and (error := simba_widths_error(sizes, f"{prefix}.{name}")):
      raise ConfigError(f"{error} (architecture 'simba').")
  if c.architecture == "simba" and c.critic_layer_norm:
    raise ConfigError(f"{prefix}.critic_layer_norm adds LayerNorm to MLP critics; SimBa's "
                      "blocks already normalize their inputs (architecture 'simba'): leave it "
                      "False.")


def decay_over_run(config, iterations):
  """The family's ``fit_schedules``: a decaying learning rate (``learning_rate_decay_steps``
  given) spans the run's gradient steps, ``iterations(update_frequency)`` updates of
  ``repeat_update`` each (the reference SimbaV2's interaction steps times its update ratio);
  constant rates stay constant."""
  if config.learning_rate_decay_steps is None:
    return config
  steps = iterations(config.update_frequency) * config.repeat_update
  return dataclasses.replace(config, learning_rate_decay_steps=steps)


def parse_exploration(text: str | None, where: str):
  """The ``Exploration`` of an ``exploration`` field (JSON text; None without noise)."""
  return replay_config.parse_exploration(text, where, "float")
