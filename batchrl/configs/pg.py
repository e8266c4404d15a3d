"""VPG and TRPO: their config classes and named experiment configs (``batchrl train``).

The config classes live here rather than beside the agents (``batchrl.agents.vpg.config``
and ``trpo.config`` re-export them with their presets) because ``batchrl.configs`` imports
this module while it registers agent families: defined here, they exist before anything
asks for them, whichever module is imported first.

Measured on a 2-core CPU with the fused driver (gymnax), deterministic evaluation:
see each factory's docstring.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Literal

from batchrl.configclass import ConfigError, configclass, param

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



# ----------------------------------------------------------------------------- VPG


@configclass
class VPGConfig(PGConfig):
  """Hyper-parameters of ``make_vpg`` (see ``PGConfig`` for the shared fields)."""

  learning_rate: float = param(1e-3, "Adam step size of the policy (one step per batch).")
  adam_epsilon: float = param(1e-5, "Adam's epsilon.")
  max_grad_norm: float | None = param(None, "Clip the policy gradient to this global norm; "
                                      "None = no clipping.")
  total_updates: int | None = param(None, "Anneal the policy learning rate linearly to 0 "
                                    "over this many updates; None = constant.")
  baseline_coef: float = param(0.5, "baseline_mode 'network': weight of the value head's "
                               "loss 0.5 * mean((target - V)^2) in the policy's loss.")
  batch_unit: Literal["timesteps", "episodes"] = param(
      "timesteps", "What a batch counts: 'timesteps' (every update learns from the last "
      "rollout_length * num_envs steps) or 'episodes' (an update learns from whole finished "
      "episodes only, once batch_episodes of them are in; see batch_episodes).")
  batch_episodes: int | None = param(
      None, "batch_unit 'episodes': the update every rollout_length steps learns once at "
      "least this many episodes (over all envs) have finished since the last learning "
      "update, from all of them; each env's unfinished episode waits for a later update.")
  max_episode_timesteps: int | None = param(
      None, "batch_unit 'episodes': the longest episode; sizes the buffer (see "
      "pg_common.episode_buffer_length). A longer episode is cut there (bootstrapped as at "
      "a time limit) and counted in the episodes_cut metric.")

  def __post_init__(self):
    check_pg_config(self, "VPGConfig")
    for key in ("learning_rate", "adam_epsilon"):
      if not getattr(self, key) > 0:
        raise ConfigError(f"VPGConfig.{key} must be > 0, got {getattr(self, key)!r}.")
    if self.max_grad_norm is not None and not self.max_grad_norm > 0:
      raise ConfigError(f"VPGConfig.max_grad_norm must be None or > 0, got "
                        f"{self.max_grad_norm!r}.")
    if self.total_updates is not None and self.total_updates < 1:
      raise ConfigError(f"VPGConfig.total_updates must be None or >= 1, got "
                        f"{self.total_updates!r}.")
    if self.baseline_coef < 0:
      raise ConfigError(f"VPGConfig.baseline_coef must be >= 0, got {self.baseline_coef!r}.")
    check_batch_unit(self, "VPGConfig")


def check_batch_unit(c: VPGConfig, name: str) -> None:
  """``batch_episodes`` and ``max_episode_timesteps`` go with batch_unit 'episodes' only."""
  keys = ("batch_episodes", "max_episode_timesteps")
  if c.batch_unit == "timesteps":
    given = [key for key in keys if getattr(c, key) is not None]
    if given:
      raise ConfigError(f"{name}.{given[0]} only applies with batch_unit='episodes' (got "
                        f"batch_unit='timesteps'); set batch_unit='episodes' or drop it.")
    return
  for key, meaning in zip(keys, ("episodes per update, over all envs",
                                 "the longest episode, which sizes the buffer")):
    value = getattr(c, key)
    if value is None or value < 1:
      raise ConfigError(f"{name}.{key} must be an int >= 1 with batch_unit='episodes' "
                        f"({meaning}), got {value!r}.")


# ----------------------------------------------------------------------------- TRPO


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



# ----------------------------------------------------------------------------- named configs


def _run(env: str, backend: str, num_envs: int, steps: int, **run):
  from batchrl.configs import RunConfig
  every = max(steps // 10, 1)
  defaults = dict(report_every=every, eval_every=every, checkpoint_every=steps // 2)
  if backend == "gymnax":
    defaults["num_workers"] = 0
  return RunConfig(env=env, backend=backend, num_envs=num_envs, steps=steps,
                   **{**defaults, **run})


def _experiment(name: str, agent: str, run, config):
  from batchrl.configs import Experiment
  return Experiment(name, run, config, agent=agent)


def vpg_cartpole():
  """VPG on CartPole-v1, host envs stepped in this process, 'states' MLP baseline.

  Measured (2-core CPU, seed 0): deterministic evaluation 500 from 20k steps on; 87 s wall
  for the 200k steps including evaluations (with 2 worker processes; CartPole steps in
  microseconds, so stepping it in this process is 2-3x faster than through workers).
  """
  from batchrl.agents.vpg.config import cartpole_fused
  return _experiment("vpg_cartpole", "vpg", _run(
      "CartPole-v1", "gymnasium", 16, 200_000, max_length=500, normalize_ranges=False,
      num_workers=0),
      cartpole_fused())


def vpg_cartpole_fused():
  """VPG on CartPole-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, 4 seeds vmapped): deterministic evaluation 500 for 4 of 4 seeds at
  49k steps and at every evaluation after it up to 491k; 49 s wall for the 4 seeds.
  """
  from batchrl.agents.vpg.config import cartpole_fused
  return _experiment("vpg_cartpole_fused", "vpg",
                     _run("CartPole-v1", "gymnax", 16, 500_000), cartpole_fused())


def trpo_cartpole():
  """TRPO on CartPole-v1, host envs stepped in this process (CartPole steps in microseconds:
  worker processes would cost more than they save; 9.5k steps/s here against 3.6k with 2
  workers, measured in one session under load).

  Measured (2-core CPU, seed 0): deterministic evaluation 337 at 10k steps, 500 from 20k on.
  """
  from batchrl.agents.trpo.config import cartpole_fused
  return _experiment("trpo_cartpole", "trpo", _run(
      "CartPole-v1", "gymnasium", 8, 100_000, max_length=500, normalize_ranges=False,
      num_workers=0),
      cartpole_fused())


def trpo_cartpole_fused():
  """TRPO on CartPole-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, 4 seeds vmapped): deterministic evaluation 376-462 at 10k steps,
  500 for 4 of 4 seeds from 20k on (every 10k up to 92k); 51 s wall for the 4 seeds.
  """
  from batchrl.agents.trpo.config import cartpole_fused
  return _experiment("trpo_cartpole_fused", "trpo",
                     _run("CartPole-v1", "gymnax", 8, 100_000), cartpole_fused())


def trpo_pendulum():
  """TRPO on Pendulum-v1, host envs; observations and actions range-normalized.

  Measured (2-core CPU, seed 0): deterministic evaluation -980 at 20k steps, -142 at 61k,
  -123 at 102k, then -126 to -223 up to 205k (-127 at the end); 2 min 45 s wall.
  """
  from batchrl.agents.trpo.config import pendulum_fused
  return _experiment("trpo_pendulum", "trpo", _run(
      "Pendulum-v1", "gymnasium", 8, 200_000, max_length=200),
      dataclasses.replace(pendulum_fused(), rescale_actions=False))


def trpo_pendulum_fused():
  """TRPO on Pendulum-v1 in gymnax: training is one compiled program.

  Measured (2-core CPU, 4 seeds vmapped): best deterministic evaluation >= -200 for 4 of 4
  seeds by 102k steps (-107, -94, -149, -111); single evaluations later vary by about +-50
  (-126 to -222 at 184k); 68 s wall for the 4 seeds and 184k steps.
  """
  from batchrl.agents.trpo.config import pendulum_fused
  return _experiment("trpo_pendulum_fused", "trpo",
                     _run("Pendulum-v1", "gymnax", 8, 200_000), pendulum_fused())


def trpo_cheetah():
  """TRPO on HalfCheetah-v5 (MuJoCo), host envs, 1M steps.

  Measured with ``benchmarks/pg.py --only cheetah`` (2-core CPU, seed 0, deterministic
  evaluations every 100k): >= 1800 at 205k, best 6028 by 1M, whole process 192 s;
  sb3-contrib's TRPO with the rl-zoo settings in the same run: 3635 at 1M in 631 s
  (0.30x its wall time; published 1803 +- 46). A rerun on one core: 1672 at 102k, 4507 at
  307k, 5822 at 717k, 6230 at 1M.
  """
  config = TRPOConfig(
      policy_layers=(64, 64), baseline_layers=(64, 64), rollout_length=256,
      discount=0.99, gae_lambda=0.95, value_target="lambda_return", max_kl_divergence=0.02,
      cg_iterations=15, init_std=0.6, normalize_observations=True, scale_rewards=True,
      baseline_learning_rate=1e-3, baseline_steps=10, baseline_minibatches=16)
  return _experiment("trpo_cheetah", "trpo", _run(
      "HalfCheetah-v5", "gymnasium", 8, 1_000_000, max_length=1000, report_every=50_000,
      eval_every=250_000, checkpoint_every=250_000), config)


NAMED = {
    "vpg_cartpole": vpg_cartpole,
    "vpg_cartpole_fused": vpg_cartpole_fused,
    "trpo_cartpole": trpo_cartpole,
    "trpo_cartpole_fused": trpo_cartpole_fused,
    "trpo_pendulum": trpo_pendulum,
    "trpo_pendulum_fused": trpo_pendulum_fused,
    "trpo_cheetah": trpo_cheetah,
}


def _make_vpg(config: VPGConfig):
  from batchrl.agents.vpg.agent import make_vpg
  return make_vpg(config)


def _make_trpo(config: TRPOConfig):
  from batchrl.agents.trpo.agent import make_trpo
  return make_trpo(config)


def register(registry, register_model) -> None:
  """Adds the ``vpg`` and ``trpo`` agent types and their named configs."""
  register_model("vpg", VPGConfig, _make_vpg)
  register_model("trpo", TRPOConfig, _make_trpo)
  for name, factory in NAMED.items():
    registry.register(name, factory)
