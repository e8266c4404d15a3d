"""Values the actor-critic agents' recipes share (free of JAX): the network and update
recipes of the off-policy frontier (issue 51) that go on top of an agent's own values."""
from __future__ import annotations

# sbx's SimBa recipe (its README, "Note about SimBa"; sbx 0.28): a SimBa actor of one residual
# block of width 128 and critics of two blocks of width 256, AdamW (optax.adamw's default
# decay 1e-4), running observation normalization (VecNormalize there), uniform actions until
# learning starts at step 10k (SB3's and sbx's learning_starts)
SIMBA = dict(architecture="simba", actor_layers=(128,), critic_layers=(256, 256),
             weight_decay=1e-4, normalize_observations=True, first_update=10_000,
             start_steps=10_000)

# DroQ (Hiraoka et al. 2022, "Dropout Q-Functions for Doubly Efficient Reinforcement
# Learning") as sbx's README gives it ("Note about DroQ"): dropout 0.01 and LayerNorm in the
# critics, 20 gradient steps per environment step, the actor (and temperature) stepped on one
# of them, uniform actions until learning starts at step 10k
DROQ = dict(critic_dropout=0.01, critic_layer_norm=True, repeat_update=20, policy_delay=20,
            first_update=10_000, start_steps=10_000)
