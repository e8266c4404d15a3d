"""The off-policy agents' training is bit-for-bit what it was: DDPG, TD3, SAC, discrete SAC,
TQC and CrossQ trained for a few dozen act/store/update iterations from a fixed seed (tiny
networks, random transitions, two envs) end in a state (and last metrics) whose SHA-256
equals the digest recorded here. A refactor of the update code that keeps the numerics keeps
the digests; one that changes a single bit of one parameter, one random draw or the state's
structure (a checkpoint's layout) does not.

The digests hold on the CPU with the JAX, flax and optax versions in ``RECORDED_WITH``
(another version may compile the same program to different floating-point results): with
others the test is skipped, and ``python tests/test_offpolicy_update_hashes.py`` prints the
digests to record."""
from __future__ import annotations

import hashlib
import json

import flax
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from batchrl.agents.core import Transition
from batchrl.agents.crossq import CrossQConfig
from batchrl.agents.crossq.model import make_crossq
from batchrl.agents.ddpg import DDPGConfig
from batchrl.agents.ddpg.model import make_ddpg
from batchrl.agents.sac import SACConfig
from batchrl.agents.sac.model import make_sac
from batchrl.agents.td3 import TD3Config
from batchrl.agents.td3.model import make_td3
from batchrl.agents.tqc import TQCConfig
from batchrl.agents.tqc.model import make_tqc
from batchrl.specs import EnvSpec

RECORDED_WITH = {"jax": "0.10.2", "flax": "0.12.8", "optax": "0.2.8", "backend": "cpu"}
NUM_ENVS, ITERATIONS = 2, 24
PENDULUM = EnvSpec(gym.spaces.Box(-8.0, 8.0, (3,), np.float32),
                   gym.spaces.Box(-2.0, 2.0, (1,), np.float32), NUM_ENVS)
CARTPOLE = EnvSpec(gym.spaces.Box(-5.0, 5.0, (4,), np.float32), gym.spaces.Discrete(2),
                   NUM_ENVS)
TINY = dict(actor_layers=(8, 8), critic_layers=(8,), batch_size=4, memory_capacity=32,
            first_update=8, update_frequency=1, repeat_update=2, target_update_frequency=3,
            update_target_weight=0.2, learning_rate=3e-3, critic_learning_rate=5e-3)
# CrossQ keeps no targets and refuses their fields
NO_TARGETS = {k: v for k, v in TINY.items()
              if k not in ("target_update_frequency", "update_target_weight")}

AGENTS = {
    # OU noise (its state in the act's extras), a uniform start, prioritized replay
    "ddpg": (make_ddpg, DDPGConfig(**TINY, start_steps=6, memory="prioritized_replay",
                                   exploration='{"type": "ornstein_uhlenbeck", "sigma": 0.2}'),
             PENDULUM),
    # the paper's TD3: actor and targets on every 2nd gradient step; clipped gradients
    "td3": (make_td3, TD3Config(**TINY, max_grad_norm=1.0), PENDULUM),
    # sbx's TD3: the actor climbs the smaller twin, the targets move on every step
    "td3_sbx": (make_td3, TD3Config(**TINY, actor_q="min", targets_with_actor=False,
                                    policy_delay=3, clip_loss=1.0), PENDULUM),
    "sac": (make_sac, SACConfig(**TINY, alpha_learning_rate=1e-2, initial_alpha=0.5),
            PENDULUM),
    "sac_fixed_alpha": (make_sac, SACConfig(**TINY, alpha_learning_rate=0.0, start_steps=4),
                        PENDULUM),
    "sac_discrete": (make_sac, SACConfig(**TINY, alpha_learning_rate=1e-2,
                                         memory="prioritized_replay"), CARTPOLE),
    "tqc": (make_tqc, TQCConfig(**TINY, num_quantiles=5, drop_quantiles=1,
                                alpha_learning_rate=1e-2), PENDULUM),
    # Batch Renormalization past its warmup; the actor on every 2nd gradient step
    "crossq": (make_crossq, CrossQConfig(**NO_TARGETS, policy_delay=2, renorm_warmup_steps=4),
               PENDULUM),
}

# td3, td3_sbx and crossq recorded again (2026-12-07) when a held actor step stopped
# computing the actor's loss for the metrics: their states' digests were checked equal before
# and after (the last metrics are now the mean of the steps that computed them).
DIGESTS = {
    "ddpg": "91a5aa111a04812cdac1c8752c92125d4a4e0e0a3d9c3414e6edccc8ec2c839f",
    "td3": "d5832d7f0776b671b7b50ff594c5bb5539d2ef7b3f3a861cccca32c262b1b09f",
    "td3_sbx": "9360de711f037874096930583243dcd1e3a310b904a006a3004bf9580a0bec55",
    "sac": "8904fae04d1dde5a797c000f756fe7220fc6b48b2783752b274f44b5730f54e9",
    "sac_fixed_alpha": "c1dbc76a85d66c49390119f838df25407bc276376a2643ea35ca06d5aa1cb266",
    "sac_discrete": "ee6122ab7c8fc3230843d2db3bde0a4580569d253f3a854efaf610f5ea8d86a2",
    "tqc": "e7610aff89bc3803f403a0b331257581c50f34846caec880f15e9a4d16607287",
    "crossq": "0eb992027cfbc350cd23848a8415c6e30256aa72116b5444403ac2071b696118",
}


def train(make, config, spec: EnvSpec, seed: int = 0, iterations: int = ITERATIONS):
  """``iterations`` of act, store, update on random transitions, as one compiled scan:
  ``(final state, metrics of the last update)``."""
  model = make(config)
  state = model.init(jax.random.key(seed), spec)
  obs_shape = (NUM_ENVS, *spec.observation_space.shape)

  def iteration(state, key):
    obs_key, act_key, reward_key, end_key, next_key = jax.random.split(key, 5)
    obs = jax.random.uniform(obs_key, obs_shape, jnp.float32, -2.0, 2.0)
    action, extras = model.act(state, obs, act_key)
    ends = jax.random.uniform(end_key, (2, NUM_ENVS))
    transition = Transition(
        obs, action, jax.random.normal(reward_key, (NUM_ENVS,)), ends[0] < 0.15,
        ends[1] < 0.1, jax.random.uniform(next_key, obs_shape, jnp.float32, -2.0, 2.0),
        extras)
    state = model.store(state, transition)
    return model.update(state)

  keys = jax.random.split(jax.random.key(seed + 1), iterations)
  state, metrics = jax.jit(lambda s: jax.lax.scan(iteration, s, keys))(state)
  return state, jax.tree.map(lambda m: m[-1], metrics)


def digest(tree) -> str:
  """SHA-256 of every leaf (path, dtype, shape, bytes; a PRNG key as its data) in order."""
  sha = hashlib.sha256()
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
      leaf = jax.random.key_data(leaf)
    leaf = np.ascontiguousarray(np.asarray(leaf))
    sha.update(f"{jax.tree_util.keystr(path)}|{leaf.dtype}|{leaf.shape}|".encode())
    sha.update(leaf.tobytes())
  return sha.hexdigest()


def versions() -> dict:
  return {"jax": jax.__version__, "flax": flax.__version__, "optax": optax.__version__,
          "backend": jax.default_backend()}


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_training_from_a_fixed_seed_ends_in_the_recorded_state(name):
  if versions() != RECORDED_WITH:
    pytest.skip(f"digests recorded with {RECORDED_WITH}, running {versions()}")
  make, config, spec = AGENTS[name]
  state, metrics = train(make, config, spec)
  assert float(metrics["learning"]) == 1.0  # the run got past first_update
  assert digest((state, metrics)) == DIGESTS[name], (
      f"{name}: the training result changed (run this file as a script to see the digests)")


if __name__ == "__main__":
  print(json.dumps(versions()))
  for name in sorted(AGENTS):
    make, config, spec = AGENTS[name]
    print(f'    "{name}": "{digest(train(make, config, spec))}",')
