"""What a policy-gradient model needs to know of its spaces, as a static (hashable) value.

Two layouts share every code path of PPO (and later VPG/TRPO):

* ``flat``: a Box observation flattened to ``[..., D]`` and one Discrete or 1-D Box action,
  with the MLP networks of BatchPPO (``policy_layers``). The named ``batchrl train`` configs
  use it, so their measured results stay as they were.
* ``tree``: any observation (a Box, Discrete, MultiBinary or a Dict of named states,
  including ``<action>_mask`` states) and any action (one or a Dict of named bool / int /
  float actions), with networks built from a JSON spec (``batchrl.networks.layered``) and
  heads from ``batchrl.networks.heads``. ``batchrl.Agent`` uses it.

Masks: a bool state named ``<action>_mask`` (``action_mask`` for the single unnamed action)
of shape ``action.shape + (num_values,)``, True = allowed. It is split off before the network
and handed to that action's categorical head.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.ops.running_stats import RunningStats
from batchrl.specs import EnvSpec, from_space, to_space

MASK_SUFFIX = "_mask"


@dataclasses.dataclass(frozen=True)
class SpaceInfo:
  """Static description of the spaces; lives in the model state as pytree metadata.

  Spaces are kept as JSON spec text so the value is hashable (jit caches on it).
  """

  layout: str  # 'flat' | 'tree'
  observation_spec: str  # json of batchrl.specs.from_space(observation_space)
  action_spec: str
  num_envs: int

  @functools.cached_property
  def observation_space(self) -> gym.Space:
    return to_space(json.loads(self.observation_spec))

  @functools.cached_property
  def action_space(self) -> gym.Space:
    return to_space(json.loads(self.action_spec))

  # --- the flat layout (BatchPPO's networks)
  @property
  def observation_shape(self) -> tuple[int, ...]:
    return tuple(self.observation_space.shape)

  @property
  def observation_size(self) -> int:
    return int(math.prod(self.observation_shape))

  @property
  def discrete(self) -> bool:
    return isinstance(self.action_space, gym.spaces.Discrete)

  @property
  def num_actions(self) -> int:
    space = self.action_space
    return int(space.n) if self.discrete else int(space.shape[0])

  @property
  def action_start(self) -> int:
    return int(self.action_space.start) if self.discrete else 0

  @property
  def low(self) -> tuple[float, ...]:
    return () if self.discrete else tuple(float(x) for x in self.action_space.low)

  @property
  def high(self) -> tuple[float, ...]:
    return () if self.discrete else tuple(float(x) for x in self.action_space.high)

  # --- the tree layout
  @functools.cached_property
  def mask_names(self) -> dict[str, str]:
    """``{state name: action name}`` of the mask states (empty for non-Dict observations)."""
    return mask_names(self.observation_space, self.action_space)

  @functools.cached_property
  def network_space(self) -> gym.Space:
    """The observation space the network sees: masks removed."""
    space = self.observation_space
    if not self.mask_names:
      return space
    kept = {k: v for k, v in space.spaces.items() if k not in self.mask_names}
    if not kept:
      raise ValueError("The states hold only action masks; give the agent at least one "
                       "state to act on.")
    return gym.spaces.Dict(kept)


jax.tree_util.register_static(SpaceInfo)


def _spec_text(space: gym.Space) -> str:
  return json.dumps(from_space(space), sort_keys=True)


def space_info(spec: EnvSpec, layout: str) -> SpaceInfo:
  """Validates the spaces for ``layout`` and keeps them; ``layout`` 'flat' or 'tree'."""
  obs, action = spec.observation_space, spec.action_space
  if layout == "flat":
    if not isinstance(obs, gym.spaces.Box):
      raise TypeError(f"The MLP networks (policy_layers) need a Box observation space, got "
                      f"{obs}. Give a JSON network spec (network=...) for other states.")
    if not (isinstance(action, gym.spaces.Discrete)
            or (isinstance(action, gym.spaces.Box) and len(action.shape) == 1)):
      raise TypeError(f"The MLP networks (policy_layers) support Discrete and 1-D Box "
                      f"actions, got {action}. Give a JSON network spec (network=...) "
                      "for other actions.")
  elif layout != "tree":
    raise ValueError(f"layout must be 'flat' or 'tree', got {layout!r}.")
  info = SpaceInfo(layout, _spec_text(obs), _spec_text(action), int(spec.num_envs))
  if layout == "tree":
    check_masks(info.observation_space, info.action_space)
  return info


def mask_names(obs_space: gym.Space, action_space: gym.Space) -> dict[str, str]:
  """``{mask state name: action name}`` for the states that mask an int action."""
  if not isinstance(obs_space, gym.spaces.Dict):
    return {}
  if isinstance(action_space, gym.spaces.Dict):
    candidates = {f"{name}{MASK_SUFFIX}": name for name in action_space.spaces}
  else:
    candidates = {f"action{MASK_SUFFIX}": None}
  return {state: action for state, action in candidates.items() if state in obs_space.spaces}


def _action_component(action_space: gym.Space, name: str | None) -> gym.Space:
  return action_space if name is None else action_space.spaces[name]


def check_masks(obs_space: gym.Space, action_space: gym.Space) -> None:
  """A mask state must be bool of shape ``action.shape + (num_values,)`` of an int action."""
  for state, action in mask_names(obs_space, action_space).items():
    target = _action_component(action_space, action)
    label = "the action" if action is None else f"action {action!r}"
    if isinstance(target, gym.spaces.Discrete):
      expected = (int(target.n),)
    elif isinstance(target, gym.spaces.MultiDiscrete):
      expected = tuple(target.shape) + (int(np.max(target.nvec)),)
    else:
      raise ValueError(f"State {state!r} masks {label}, which is not an int action "
                       f"({target}); only int actions can be masked.")
    mask = obs_space.spaces[state]
    if not isinstance(mask, gym.spaces.MultiBinary) or tuple(mask.shape) != expected:
      raise ValueError(f"State {state!r} masks {label}: it must be dict(type='bool', "
                       f"shape={expected}) (the action's shape + (num_values,)), got {mask}.")


def split_masks(info: SpaceInfo, obs) -> tuple[Any, Any]:
  """``obs -> (network inputs, masks)``; masks is None, one array, or ``{action: mask}``."""
  names = info.mask_names
  if not names:
    return obs, None
  inputs = {k: v for k, v in obs.items() if k not in names}
  masks = {action: obs[state] for state, action in names.items()}
  if None in masks:
    return inputs, masks[None]
  return inputs, masks


# ------------------------------------------------------------------- observations


def float_obs(info: SpaceInfo, obs):
  """Observations as the networks take them: ``flat`` -> ``[..., D]`` float32; ``tree`` ->
  float leaves as float32, int/bool leaves as they are."""
  if info.layout == "flat":
    shape = info.observation_shape
    lead = jnp.shape(obs)[:jnp.ndim(obs) - len(shape)]
    return jnp.reshape(jnp.asarray(obs, jnp.float32), lead + (info.observation_size,))
  return jax.tree.map(
      lambda x, s: jnp.asarray(x, jnp.float32) if _is_float(s) else jnp.asarray(x),
      obs, _space_tree(info.observation_space))


def _is_float(space: gym.Space) -> bool:
  return isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating)


def _space_tree(space: gym.Space):
  """The space as a pytree matching observations (gym spaces are pytree leaves)."""
  if isinstance(space, gym.spaces.Dict):
    return dict(space.spaces)
  return space


def obs_stats_init(info: SpaceInfo):
  """Running statistics of the float observations (None for int/bool states and masks)."""
  if info.layout == "flat":
    return RunningStats.create((info.observation_size,))
  return jax.tree.map(
      lambda s: RunningStats.create(tuple(s.shape)) if _is_float(s) else None,
      _space_tree(info.observation_space))


def _stats_and_obs(stats, obs):
  """Pairs each RunningStats with its observation leaf (skipping stats that are None)."""
  if isinstance(stats, RunningStats):
    return [(None, stats, obs)]
  return [(name, s, obs[name]) for name, s in stats.items() if s is not None]


def obs_stats_update(stats, obs):
  if stats is None:  # one int/bool state: nothing to normalize
    return None
  if isinstance(stats, RunningStats):
    return stats.update(obs)
  updated = dict(stats)
  for name, s, x in _stats_and_obs(stats, obs):
    updated[name] = s.update(x)
  return updated


def normalize_obs_tree(stats, obs, clip: float, epsilon: float):
  if stats is None:
    return obs
  if isinstance(stats, RunningStats):
    return stats.normalize(obs, clip=clip, epsilon=epsilon)
  normalized = dict(obs)
  for name, s, x in _stats_and_obs(stats, obs):
    normalized[name] = s.normalize(x, clip=clip, epsilon=epsilon)
  return normalized


def obs_stats_mean_std(stats, epsilon: float) -> tuple[jax.Array, jax.Array]:
  """Average mean and std over all normalized elements (for TensorBoard)."""
  pairs = [(s.mean, s.std(epsilon)) for s in jax.tree.leaves(
      stats, is_leaf=lambda x: isinstance(x, RunningStats)) if isinstance(s, RunningStats)]
  if not pairs:
    return jnp.float32(0.0), jnp.float32(1.0)
  means = jnp.concatenate([jnp.ravel(m) for m, _ in pairs])
  stds = jnp.concatenate([jnp.ravel(s) for _, s in pairs])
  return jnp.mean(means), jnp.mean(stds)


def zero_obs(info: SpaceInfo, batch: tuple[int, ...]):
  """Zeros shaped like a batch of observations as ``float_obs`` returns them."""
  if info.layout == "flat":
    return jnp.zeros(batch + (info.observation_size,), jnp.float32)
  return zeros_like_space(info.observation_space, batch)


def zeros_like_space(space: gym.Space, batch: tuple[int, ...]):
  """Zeros for a batch of values of ``space``: float32 / int32 / bool leaves (dict for Dict)."""
  return jax.tree.map(lambda s: jnp.zeros(batch + tuple(s.shape), _leaf_dtype(s)),
                      _space_tree(space))


def _leaf_dtype(space: gym.Space):
  if _is_float(space):
    return jnp.float32
  if isinstance(space, gym.spaces.MultiBinary):
    return jnp.bool_
  return jnp.int32


# ------------------------------------------------------------------------ actions


def zero_raw_action(info: SpaceInfo, batch: tuple[int, ...]):
  """Zeros shaped like the policy's samples: int32 / bool / float32 per action."""
  if info.layout == "flat":
    if info.discrete:
      return jnp.zeros(batch, jnp.int32)
    return jnp.zeros(batch + (info.num_actions,), jnp.float32)
  return zeros_like_space(info.action_space, batch)


def env_action(info: SpaceInfo, raw_action, *, rescale: bool, clip: bool):
  """The policy's sample as the env takes it: int offsets (``start``) added; float actions
  rescaled from ``[-1, 1]`` to finite bounds when ``rescale``, clipped when ``clip``."""
  return jax.tree.map(
      lambda space, x: _env_action_leaf(space, x, rescale, clip),
      _space_tree(info.action_space), raw_action)


def _env_action_leaf(space: gym.Space, raw, rescale: bool, clip: bool):
  if isinstance(space, gym.spaces.Discrete):
    return raw + int(space.start)
  if isinstance(space, gym.spaces.MultiDiscrete):
    return raw + jnp.asarray(space.start, jnp.int32)
  if not isinstance(space, gym.spaces.Box):
    return raw
  low = jnp.asarray(space.low, jnp.float32)
  high = jnp.asarray(space.high, jnp.float32)
  action = raw
  if rescale:
    finite = jnp.isfinite(low) & jnp.isfinite(high)
    action = jnp.where(finite, low + (raw + 1.0) * 0.5 * (high - low), raw)
  if clip:
    action = jnp.clip(action, low, high)
  return action
