"""``A2CConfig``: the shared policy-gradient fields (``PGConfig``: networks, rollout, returns,
critic as the baseline, normalizers, actions) plus what actor-critic adds: n-step returns,
what weights the policy gradient (advantage for A2C, the critic's return estimate for AC),
how the critic learns (with the policy in one optimizer step, or with its own Adam) and
the RMSprop/Adam optimizer of the synchronous update."""
from __future__ import annotations

from typing import Literal

from batchrl.agents.policy_gradient.config import PGConfig, check_pg_config
from batchrl.configclass import ConfigError, configclass, param


@configclass
class A2CConfig(PGConfig):
  """Hyper-parameters of ``make_a2c`` (see ``PGConfig`` for the shared fields; its
  ``baseline_*`` fields describe the critic)."""

  rollout_length: int = param(5, "Environment steps per update per environment (the "
                              "model's period); a batch is rollout_length * num_envs "
                              "timesteps.")
  normalize_rewards: bool = param(False, "Standardize the policy-gradient weights "
                                  "(advantages, or returns for AC) over each batch.")
  baseline_mode: Literal["none", "states", "network"] = param(
      "network", "The critic: 'states' a separate value network (TensorForce's "
      "critic_network), 'network' a value head on the policy's torso (shared features). "
      "'none' is refused: the critic's value is the bootstrap.")
  n_step: int | None = param(
      None, "Rewards summed before bootstrapping from the critic: G = r_t + ... + "
      "d^(n-1) r_(t+n-1) + d^n V(s_(t+n)), cut at episode ends and at the rollout's end "
      "(TensorForce horizon h is n_step h + 1). None: every step's return runs to the end "
      "of the rollout (Mnih et al. 2016). Not with gae_lambda.")
  estimate_terminals: bool = param(
      False, "TensorForce's estimate_terminals: bootstrap from the critic at true episode "
      "ends too (as if every end were a time limit). Not with gae_lambda.")
  advantage: bool = param(
      True, "Weight log pi(a|s) by the advantage G - V(s) (A2C); False: by the return "
      "estimate G itself (TensorForce's 'ac').")
  critic_update: Literal["joint", "separate"] = param(
      "joint", "'joint': the critic's loss, weighted by critic_coef, joins the policy's in "
      "one optimizer step (TensorForce critic_optimizer=<float>); 'separate': the 'states' "
      "critic has its own Adam (baseline_learning_rate, baseline_steps, "
      "baseline_minibatches; TensorForce critic_optimizer=<dict>).")
  critic_coef: float = param(0.5, "critic_update 'joint': weight of the critic's loss "
                             "0.5 * mean((G - V)^2) in the joint loss.")
  optimizer: Literal["rmsprop", "adam"] = param("rmsprop", "The joint optimizer: RMSprop "
                                                "(Mnih et al. 2016) or Adam.")
  learning_rate: float = param(7e-4, "Step size of the joint optimizer.")
  optimizer_epsilon: float = param(1e-5, "Epsilon of RMSprop / Adam.")
  rmsprop_decay: float = param(0.99, "optimizer 'rmsprop': decay of the squared-gradient "
                               "average.")
  max_grad_norm: float | None = param(0.5, "Clip the joint gradient to this global norm; "
                                      "None = no clipping.")
  total_updates: int | None = param(None, "Anneal the learning rate linearly to 0 over "
                                    "this many updates; None = constant.")

  def __post_init__(self):
    check_pg_config(self, "A2CConfig")
    check_a2c_config(self)


def check_a2c_config(c: A2CConfig) -> None:
  name = "A2CConfig"
  if c.baseline_mode == "none":
    raise ConfigError(f"{name}.baseline_mode must be 'states' or 'network' (the critic "
                      "bootstraps the returns), got 'none'.")
  for key in ("learning_rate", "optimizer_epsilon"):
    if not getattr(c, key) > 0:
      raise ConfigError(f"{name}.{key} must be > 0, got {getattr(c, key)!r}.")
  if not 0.0 <= c.rmsprop_decay < 1.0:
    raise ConfigError(f"{name}.rmsprop_decay must be in [0, 1), got {c.rmsprop_decay!r}.")
  if c.critic_coef < 0:
    raise ConfigError(f"{name}.critic_coef must be >= 0, got {c.critic_coef!r}.")
  if c.max_grad_norm is not None and not c.max_grad_norm > 0:
    raise ConfigError(f"{name}.max_grad_norm must be None or > 0, got {c.max_grad_norm!r}.")
  if c.total_updates is not None and c.total_updates < 1:
    raise ConfigError(f"{name}.total_updates must be None or >= 1, got "
                      f"{c.total_updates!r}.")
  if c.n_step is not None and c.n_step < 1:
    raise ConfigError(f"{name}.n_step must be None or >= 1, got {c.n_step!r}.")
  if c.gae_lambda is not None:
    for key, off in (("n_step", None), ("estimate_terminals", False)):
      if getattr(c, key) != off:
        raise ConfigError(f"{name}.{key} applies to n-step returns, not GAE (gae_lambda="
                          f"{c.gae_lambda}); drop one of them.")
  if c.critic_update == "separate" and c.baseline_mode != "states":
    raise ConfigError(f"{name}.critic_update='separate' needs baseline_mode='states' (a "
                      "critic network of its own); a value head on the policy's torso "
                      "learns with the policy ('joint').")
