"""The ``random`` and ``constant`` agents of ``Agent.create`` (``AgentFamily``): their entry
with how to build them from TensorForce's keys."""
from __future__ import annotations

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.agents.core import Model
from batchrl.agents.family import AgentFamily, BuildContext, check_keys
from batchrl.agents.simple import ENTRY
from batchrl.agents.simple.model import fixed_agent, random_agent
from batchrl.configclass import ConfigError


def _build_random(kwargs: dict, context: BuildContext) -> Model:
  check_keys(kwargs, (), "random")
  return random_agent(context.action_space)


def _build_constant(kwargs: dict, context: BuildContext) -> Model:
  check_keys(kwargs, ("action_values",), "constant")
  if "action_values" not in kwargs:
    raise ConfigError("the constant agent needs action_values: the action to take (a dict "
                      "of named actions for several).")
  values = kwargs["action_values"]
  space = context.action_space
  if not space.contains(_as_space_value(space, values)):
    raise ConfigError(f"action_values {values!r} is not a valid action of {space}.")
  constant = _as_space_value(space, values)

  def policy(obs):
    batch = jax.tree.leaves(obs)[0].shape[0]
    return jax.tree.map(lambda v: jnp.broadcast_to(jnp.asarray(v), (batch,) + np.shape(v)),
                        constant)

  return fixed_agent(policy)


def _as_space_value(space, values):
  if isinstance(space, gym.spaces.Dict):
    if not isinstance(values, dict):
      return values
    return {k: _as_space_value(space.spaces[k], v) if k in space.spaces else v
            for k, v in values.items()}
  if isinstance(space, gym.spaces.Discrete):
    return np.int64(values) if isinstance(values, (int, np.integer)) else values
  return np.asarray(values, dtype=space.dtype)


FAMILY = AgentFamily(
    ENTRY, api_types=(ENTRY.api_type("random", _build_random),
                      ENTRY.api_type("constant", _build_constant, ("action_values",))))
