"""SimbaV2's actor and critics as ``ACNetworks`` (the interface every actor-critic agent's
``act`` and update read): a hyperspherical Gaussian actor, ``obs -> (mean, log_std) [N,
A]``, and ``C`` hyperspherical categorical critics, ``(obs, action) -> logits [C, N, bins]``
(``batchrl.networks.hyperspherical``). Both read the float observations flattened and joined
into one vector ``[N, D]`` (a Box, or the float states of a dict); the critics read it
joined with the action, normalized into ``[-1, 1]``. ``init`` gives the weights projected
on the sphere, as every optimizer step leaves them (``project``)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from batchrl.agents import spaces
from batchrl.agents.actor_critic.networks import ACNetworks, continuous_action_map
from batchrl.agents.spaces import SpaceInfo
from batchrl.configclass import ConfigError
from batchrl.networks.hyperspherical import (
  HyperCategoricalCritics,
  HyperGaussianActor,
  project,
)


def features(obs) -> jax.Array:
  """Every leaf of ``obs`` (``[N, ...]`` each) flattened and joined: ``[N, D]`` float32."""
  leaves = jax.tree.leaves(obs)
  return jnp.concatenate([jnp.reshape(x, (x.shape[0], -1)).astype(jnp.float32)
                          for x in leaves], axis=-1)


def check_vector_observations(info: SpaceInfo) -> None:
  """SimbaV2's networks take feature vectors: an image (a float leaf of rank 3 or more) is
  a ConfigError."""
  example = spaces.zero_obs(info, ())
  ranks = [np.ndim(x) for x in jax.tree.leaves(example)]
  if any(rank >= 3 for rank in ranks):
    raise ConfigError("simbav2 takes vector observations (its networks project the "
                      "flattened observation on a sphere, with no encoder for images); these "
                      f"have leaves of rank {max(ranks)}. For images use sac or tqc with a "
                      "convolutional network spec.")


def simbav2_networks(config, info: SpaceInfo) -> ACNetworks:
  """The networks of ``config`` (a ``SimbaV2Config``) for ``info``."""
  actions = continuous_action_map(info.action_space, "simbav2", config.action_bounds)
  check_vector_observations(info)
  actor = HyperGaussianActor(tuple(config.actor_layers), actions.size, config.c_shift)
  critics = HyperCategoricalCritics(config.num_critics, tuple(config.critic_layers),
                                    config.num_bins, config.c_shift)

  def inputs(obs):
    return features(spaces.split_masks(info, obs)[0])

  # the example input is made per call: init may run inside a trace (a jitted or vmapped
  # init), whose arrays must not outlive it
  def init(key):
    actor_key, critic_key = jax.random.split(key)
    obs = inputs(spaces.zero_obs(info, (1,)))
    action = jnp.zeros((1, actions.size), jnp.float32)
    return (project(actor.init(actor_key, obs)["params"]),
            project(critics.init(critic_key, obs, action)["params"]))

  return ACNetworks(
      init, lambda params, obs: actor.apply({"params": params}, inputs(obs)),
      lambda params, obs, a: critics.apply({"params": params}, inputs(obs), a), actions,
      stochastic=True)
