"""``VPGConfig``: the shared policy-gradient fields (``PGConfig``: networks, rollout, returns,
baselines, normalizers, actions) plus VPG's policy optimizer (one Adam step on the whole batch
per update: the batch is the gradient estimate), the weight of the value head's loss when
the baseline shares the policy's network, and batches counted in whole episodes."""
from __future__ import annotations

from typing import Literal

from batchrl.agents.policy_gradient.config import PGConfig, check_pg_config
from batchrl.configclass import ConfigError, configclass, param


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
      "batchrl.agents.policy_gradient.model.episode_buffer_length). A longer episode is cut "
      "there (bootstrapped as at a time limit) and counted in the episodes_cut metric.")

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
