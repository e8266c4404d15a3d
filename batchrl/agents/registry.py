"""Agent types by name, for ``batchrl.Agent.create(agent=...)`` and JSON agent specs.

Each type turns the user's keyword arguments into a ``Model`` (``batchrl.agents.core``). It
accepts the keys the TensorForce documents give that agent, with their documented meaning,
besides our own config field names; an unknown key is an error naming the closest valid one.

``ppo`` (TensorForce 0.3 names, then later ones, then ours):

=========================================  =================================================
key                                        meaning
=========================================  =================================================
``batch_size``                             timesteps per update, summed over the parallel
                                           streams (TensorForce's meaning; each stream
                                           contributes ``batch_size / parallel_interactions``)
``optimizer_batch_size``                   timesteps per minibatch (PPOConfig.batch_size)
``epochs``, ``optimization_steps``         passes over the batch per update
``learning_rate``, ``step_optimizer``      Adam step size (``step_optimizer`` =
                                           ``{"type": "adam", "learning_rate": x}``)
``entropy_penalty``,                       entropy bonus weight
``entropy_regularization``
``loss_clipping``,                         clipped-objective epsilon
``likelihood_ratio_clipping``
``discount``, ``gae_lambda``               as in PPOConfig
=========================================  =================================================
"""
from __future__ import annotations

import dataclasses
import difflib
import json
from typing import Any, Callable

from batchrl.agents.core import Model
from batchrl.configclass import ConfigError

IGNORED_KEYS = ("type", "log_level")  # accepted for compatibility with TensorForce files


@dataclasses.dataclass(frozen=True)
class BuildContext:
  """What an agent type needs besides its own keys."""

  num_streams: int  # parallel_interactions
  network: Any  # JSON-able network spec ('auto', a layer list, a branches dict)
  action_space: Any  # gymnasium space of the actions
  max_episode_timesteps: int | None = None  # the environment's episode limit, if known


@dataclasses.dataclass(frozen=True)
class AgentType:
  """A registry entry. ``build(kwargs, context) -> Model``; ``keys`` lists the valid keys."""

  name: str
  description: str
  build: Callable[[dict, BuildContext], Model]
  keys: tuple[str, ...]


_REGISTRY: dict[str, AgentType] = {}
# Agent families defined beside their models; each module has ``AGENT_TYPES``. Loaded on
# first use, because those modules import this one.
_FAMILIES = ("batchrl.agents.vpg.spec", "batchrl.agents.trpo.spec", "batchrl.agents.dqn.spec",
             "batchrl.agents.naf.spec", "batchrl.agents.dqfd.spec")
_loaded = False


def register(agent_type: AgentType) -> None:
  _REGISTRY[agent_type.name] = agent_type


def _load_families() -> None:
  global _loaded
  if _loaded:
    return
  import importlib
  for module in _FAMILIES:
    for agent_type in importlib.import_module(module).AGENT_TYPES:
      _REGISTRY.setdefault(agent_type.name, agent_type)
  _loaded = True


def names() -> list[str]:
  _load_families()
  return sorted(_REGISTRY)


def get(name: str) -> AgentType:
  """The agent type called ``name`` (TensorForce's ``ppo_agent`` spelling also works)."""
  if not isinstance(name, str):
    raise ConfigError(f"agent type must be a string, one of {names()}, got {name!r}.")
  _load_families()
  key = name[:-len("_agent")] if name.endswith("_agent") else name
  key = key.lower()
  if key not in _REGISTRY:
    close = difflib.get_close_matches(key, names(), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown agent type {name!r}.{hint} Valid types: {', '.join(names())}.")
  return _REGISTRY[key]


def check_keys(kwargs: dict, valid: tuple[str, ...], agent: str) -> None:
  """Every key must be valid for ``agent``; the error names the closest valid key."""
  for key in kwargs:
    if key in valid or key in IGNORED_KEYS:
      continue
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown key {key!r} for agent {agent!r}.{hint} Valid keys: "
                      f"{', '.join(sorted(valid))}.")


def _take_aliases(kwargs: dict, target: str, aliases: tuple[str, ...]) -> Any:
  """Pops ``target`` and its aliases; giving two of them with different values is an error."""
  given = {name: kwargs.pop(name) for name in (target, *aliases) if name in kwargs}
  values = {json.dumps(v, sort_keys=True, default=str) for v in given.values()}
  if len(values) > 1:
    raise ConfigError(f"{' and '.join(given)} mean the same thing; give one of them "
                      f"(got {given}).")
  return next(iter(given.values())) if given else dataclasses.MISSING


# ------------------------------------------------------------------------------------ ppo

_PPO_ALIASES = {
    "update_epochs": ("epochs", "optimization_steps"),
    "entropy_coef": ("entropy_penalty", "entropy_regularization"),
    "clip_range": ("loss_clipping", "likelihood_ratio_clipping"),
}
# TensorForce-flavoured defaults for the object API: the clipped objective and the values
# modern PPO implementations share. BatchPPO's own defaults stay those of PPOConfig.
_PPO_DEFAULTS = dict(
    policy_objective="clip", learning_rate=1e-3, update_epochs=10, discount=0.99,
    gae_lambda=0.95, value_target="lambda_return", value_coef=0.5, entropy_coef=0.01,
    activation="tanh", init_output_factor=0.01, init_std=0.5, max_grad_norm=0.5,
    normalize_observations=False, normalize_rewards=False, adam_epsilon=1e-5)
_PPO_BATCH_DEFAULT = 1024  # timesteps per update
_PPO_MINIBATCH_DEFAULT = 256


def _ppo_keys() -> tuple[str, ...]:
  from batchrl.agents.ppo.config import PPOConfig
  own = {f.name for f in dataclasses.fields(PPOConfig)} - {"batch_size", "network",
                                                              "recurrent", "policy_layers",
                                                              "value_layers"}
  aliases = {a for names in _PPO_ALIASES.values() for a in names}
  return tuple(sorted(own | aliases | {"batch_size", "optimizer_batch_size",
                                       "step_optimizer"}))


def _step_optimizer(kwargs: dict) -> None:
  """TensorForce's ``step_optimizer`` dict -> ``learning_rate`` (Adam only)."""
  optimizer = kwargs.pop("step_optimizer", None)
  if optimizer is None:
    return
  if not isinstance(optimizer, dict) or optimizer.get("type", "adam") != "adam":
    raise ConfigError(f"step_optimizer must be {{'type': 'adam', 'learning_rate': x}} for "
                      f"ppo (its update is Adam), got {optimizer!r}.")
  unknown = set(optimizer) - {"type", "learning_rate"}
  if unknown:
    raise ConfigError(f"unknown step_optimizer keys {sorted(unknown)}; valid: type, "
                      "learning_rate.")
  if "learning_rate" in optimizer:
    if "learning_rate" in kwargs and kwargs["learning_rate"] != optimizer["learning_rate"]:
      raise ConfigError("learning_rate is given twice (also in step_optimizer) with "
                        "different values; give one.")
    kwargs["learning_rate"] = optimizer["learning_rate"]


def ppo_config(kwargs: dict, context: BuildContext):
  """The PPOConfig of ``Agent.create(agent='ppo', **kwargs)``."""
  from batchrl.agents.ppo.config import PPOConfig
  kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_KEYS}
  check_keys(kwargs, _ppo_keys(), "ppo")
  _step_optimizer(kwargs)
  values = dict(_PPO_DEFAULTS)
  for target, aliases in _PPO_ALIASES.items():
    value = _take_aliases(kwargs, target, aliases)
    if value is not dataclasses.MISSING:
      values[target] = value
  if "loss_clipping" in kwargs or "likelihood_ratio_clipping" in kwargs:
    values["policy_objective"] = "clip"
  batch = kwargs.pop("batch_size", _PPO_BATCH_DEFAULT)
  minibatch = kwargs.pop("optimizer_batch_size", None)
  values.update(kwargs)
  streams = context.num_streams
  if "rollout_length" not in kwargs:
    if not isinstance(batch, int) or batch < 1 or batch % streams:
      raise ConfigError(f"batch_size ({batch!r} timesteps per update) must be a positive "
                        f"multiple of parallel_interactions ({streams}): each stream "
                        "contributes batch_size / parallel_interactions timesteps.")
    values["rollout_length"] = batch // streams
  total = values["rollout_length"] * streams
  if minibatch is None:
    minibatch = _default_minibatch(total)
  if not isinstance(minibatch, int) or minibatch < 1 or total % minibatch:
    raise ConfigError(f"optimizer_batch_size ({minibatch!r}) must divide batch_size "
                      f"({total} timesteps per update).")
  values["batch_size"] = minibatch
  values["network"] = json.dumps(context.network)
  try:
    return PPOConfig(**values)
  except (TypeError, ValueError) as e:
    raise ConfigError(f"invalid ppo setting: {e}") from None


def _default_minibatch(total: int) -> int:
  """The largest divisor of the batch up to 256 timesteps (256 for powers of two)."""
  return max(d for d in range(1, min(_PPO_MINIBATCH_DEFAULT, total) + 1) if total % d == 0)


def _build_ppo(kwargs: dict, context: BuildContext) -> Model:
  from batchrl.agents.ppo import make_ppo
  return make_ppo(ppo_config(kwargs, context))


# ------------------------------------------------------------------ random and constant


def _build_random(kwargs: dict, context: BuildContext) -> Model:
  from batchrl.agents.simple import random_agent
  check_keys(kwargs, (), "random")
  return random_agent(context.action_space)


def _build_constant(kwargs: dict, context: BuildContext) -> Model:
  import jax.numpy as jnp
  import numpy as np

  from batchrl.agents.simple import fixed_agent
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
    import jax
    batch = jax.tree.leaves(obs)[0].shape[0]
    return jax.tree.map(lambda v: jnp.broadcast_to(jnp.asarray(v), (batch,) + np.shape(v)),
                        constant)

  return fixed_agent(policy)


def _as_space_value(space, values):
  import gymnasium as gym
  import numpy as np
  if isinstance(space, gym.spaces.Dict):
    if not isinstance(values, dict):
      return values
    return {k: _as_space_value(space.spaces[k], v) if k in space.spaces else v
            for k, v in values.items()}
  if isinstance(space, gym.spaces.Discrete):
    return np.int64(values) if isinstance(values, (int, np.integer)) else values
  return np.asarray(values, dtype=space.dtype)


register(AgentType("ppo", "Proximal policy optimization (clipped objective by default)",
                   _build_ppo, ()))
register(AgentType("random", "Uniformly random actions (a baseline)", _build_random, ()))
register(AgentType("constant", "Always the same action (action_values)", _build_constant,
                   ("action_values",)))
