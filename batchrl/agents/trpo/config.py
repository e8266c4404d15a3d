"""``TRPOConfig``: the shared policy-gradient fields (``PGConfig``: networks, rollout, returns,
baselines, normalizers, actions) plus TRPO's natural-gradient step: conjugate gradient on
Fisher-vector products, a step scaled to ``max_kl_divergence`` and a backtracking line
search (``batchrl.agents.trpo.optim``). Its baseline is always trained apart from the
policy ('none' or 'states')."""
from __future__ import annotations

from batchrl.agents.policy_gradient.config import PGConfig, check_pg_config
from batchrl.configclass import ConfigError, configclass, param


@configclass
class TRPOConfig(PGConfig):
  """Hyper-parameters of ``make_trpo`` (see ``PGConfig`` for the shared fields).

  Defaults differ from TensorForce 0.3 where measured learning asked for it: cg_damping 0.1
  (TensorForce 1e-3; sb3-contrib 0.1), line search accept ratio 0.1 (Schulman et al.;
  TensorForce 0.9) and shrink 0.8 (sb3-contrib; TensorForce 0.5).
  """

  max_kl_divergence: float = param(0.01, "Trust region: the largest mean KL(old || new) "
                                   "of one update.")
  cg_iterations: int = param(10, "Conjugate gradient iterations (Fisher-vector products) "
                             "per update.")
  cg_damping: float = param(0.1, "Damping added to the Fisher matrix: (F + damping I).")
  cg_tolerance: float = param(1e-10, "Stop conjugate gradient once |residual|^2 is below.")
  line_search_steps: int = param(10, "Most candidates the backtracking line search tries.")
  line_search_accept_ratio: float = param(0.1, "Accept a step whose surrogate improvement "
                                          "is at least this fraction of the linear "
                                          "prediction (and positive, within the KL bound).")
  line_search_shrink: float = param(0.8, "Step factor between line search candidates.")

  def __post_init__(self):
    check_pg_config(self, "TRPOConfig")
    for key in ("max_kl_divergence", "cg_damping"):
      if not getattr(self, key) > 0:
        raise ConfigError(f"TRPOConfig.{key} must be > 0, got {getattr(self, key)!r}.")
    if self.cg_tolerance < 0:
      raise ConfigError(f"TRPOConfig.cg_tolerance must be >= 0, got {self.cg_tolerance!r}.")
    for key in ("cg_iterations", "line_search_steps"):
      if getattr(self, key) < 1:
        raise ConfigError(f"TRPOConfig.{key} must be >= 1, got {getattr(self, key)!r}.")
    if not 0.0 <= self.line_search_accept_ratio <= 1.0:
      raise ConfigError("TRPOConfig.line_search_accept_ratio must be in [0, 1], got "
                        f"{self.line_search_accept_ratio!r}.")
    if not 0.0 < self.line_search_shrink < 1.0:
      raise ConfigError("TRPOConfig.line_search_shrink must be in (0, 1), got "
                        f"{self.line_search_shrink!r}.")
    if self.baseline_mode == "network":
      raise ConfigError("TRPOConfig.baseline_mode='network' is not supported: a value head "
                        "trained on the policy's network would move the policy outside its "
                        "trust region; use baseline_mode='states' (its own network) or "
                        "'none'.")
