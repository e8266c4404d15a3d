"""A2C / AC recipes: measured ``A2CConfig`` values that the named configs in
``batchrl.configs.a2c`` build on."""
from __future__ import annotations

from batchrl.agents.a2c.config import A2CConfig


def cartpole(total_updates: int | None = None) -> A2CConfig:
  """CartPole-v1 with **8 envs**: separate 64x64 actor and critic learnt in one RMSprop
  step (critic weight 0.5, gradient norm clipped at 0.5), 5-step returns, 5 steps per env
  per update; a constant learning rate of 1e-3 (7e-4, or 1e-3 annealed to 0 over the run,
  were less steady in 4-seed runs).

  Measured: see ``batchrl.configs.a2c``.
  """
  return A2CConfig(
      policy_layers=(64, 64), baseline_layers=(64, 64), baseline_mode="states",
      baseline_network="mlp", rollout_length=5, n_step=5, learning_rate=1e-3,
      total_updates=total_updates, critic_coef=0.5, entropy_coef=0.0)
