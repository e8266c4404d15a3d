"""Action exploration (TensorForce style) as pure JAX functions.

An ``Exploration`` is built once from a spec (Python-level parsing in
``batchrl.exploration_spec``, free of JAX so that configs check it before JAX is imported;
errors name the key and the closest valid word) and applied to the actions the policy chose
for ``N`` streams. Its only state is the Ornstein-Uhlenbeck noise, one value per stream and
action element, kept in an explicit pytree so ``apply`` jits, vmaps over seeds and is
checkpointed with the agent.

What the value means depends on the action kind (as in TensorForce):

- ``int`` / ``bool``: the value is epsilon. Each action element is, with probability epsilon,
  replaced by a uniformly random value, for ``int`` drawn among the allowed ones only
  (``mask[..., k]`` True = allowed).
- ``float``: additive noise, ``value * N(0, 1)`` (or the OU state), then clipped to the
  action bounds when they are given.

Types (``dict(type=..., **keys)``; ``t`` the global timestep):

=========================  ======================================================================
type (keys, defaults)      value(t)
=========================  ======================================================================
``constant`` (value=0)     ``value``; a bare number ``x`` means ``dict(type='constant', value=x)``
``linear_decay``           ``initial + (final - initial) * clip((t - start_after) / timesteps, 0,
(initial_value=1,          1)``: ``initial`` until ``start_after``, ``final`` from ``start_after +
final_value=0.1,           timesteps`` on
timesteps=10000,
start_after=0)
``epsilon_anneal``         the same line, TensorForce's epsilon names (``initial_epsilon``,
(initial_epsilon=1,        ``final_epsilon``); both types accept either naming
final_epsilon=0.1,
timesteps=10000,
start_after=0)
``epsilon_decay``          ``initial`` until ``start_after``, then ``final + (initial - final) *
(initial_epsilon=1,        0.5 ** (half_lives * (t - start_after) / timesteps)``: ``half_lives``
final_epsilon=0.1,         halvings of the distance to ``final`` over ``timesteps``; it keeps
timesteps=10000,           decaying towards ``final`` afterwards
half_lives=10,
start_after=0)
``gaussian`` (sigma=0.3)   ``sigma`` (float actions only)
``ornstein_uhlenbeck``     ``sigma``; per stream and element ``x <- x + theta * (mu - x) + sigma *
(sigma=0.3, mu=0,          N(0, 1)`` each step, and the new ``x`` is added to the action (float
theta=0.15)                actions only; stationary variance ``sigma^2 / (1 - (1 - theta)^2)``);
                           ``reset`` zeroes a stream's ``x`` at episode start
=========================  ======================================================================

``start_timestep`` is accepted for ``start_after`` (TensorForce 0.3's name).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from batchrl.errors import did_you_mean
from batchrl.exploration_spec import (
  ExplorationSpec,
  ExplorationSpecError,
  parse_exploration_spec,
)


@dataclasses.dataclass(frozen=True)
class Exploration(ExplorationSpec):
  """One built exploration: an ``ExplorationSpec`` (its fields, see there) with the JAX
  functions that explore; hashable, so it can be a static argument of ``jax.jit``."""

  def value(self, timestep: jax.Array | int) -> jax.Array:
    """Epsilon (int/bool actions) or noise scale (float actions) at global ``timestep``."""
    t = jnp.asarray(timestep, jnp.float32) - self.start_after
    if self.schedule == "constant":
      return jnp.full(t.shape, self.initial, jnp.float32)
    if self.schedule == "linear":
      fraction = jnp.clip(t / self.timesteps, 0.0, 1.0)
      return self.initial + (self.final - self.initial) * fraction
    decayed = self.final + (self.initial - self.final) * 0.5 ** (
        self.half_lives * jnp.maximum(t, 0.0) / self.timesteps)
    return decayed.astype(jnp.float32)

  def init(self, num_streams: int, action_shape: tuple[int, ...] = ()) -> Any:
    """Ornstein-Uhlenbeck state ``[N, *action_shape]`` zeros; ``()`` for other types."""
    if not self.is_ou:
      return ()
    shape = (action_shape,) if isinstance(action_shape, int) else tuple(action_shape)
    return jnp.zeros((num_streams,) + shape, jnp.float32)

  def reset(self, state: Any, reset_mask: jax.Array) -> Any:
    """Zeroes the OU state of streams where ``reset_mask`` [N] is True (episode start)."""
    if not self.is_ou:
      return state
    return jnp.where(_rows(reset_mask, state), 0.0, state)

  def apply(self, state: Any, key: jax.Array, action: jax.Array, timestep: jax.Array | int, *,
            kind: str, low=None, high=None, num_values=None, mask=None, active=None
            ) -> tuple[Any, jax.Array]:
    """Explores the policy's ``action`` [N, *shape] for N streams.

    Args:
      state: from ``init`` (OU noise); ``()`` otherwise.
      key: PRNG key.
      action: ``[N, *shape]``, chosen by the policy.
      timestep: global timestep (scalar, may be traced).
      kind: 'int' | 'bool' | 'float' (static).
      low, high: float: bounds the explored action is clipped to (either may be None).
        int: the first value (``low``, default 0), and without ``num_values`` and ``mask``
        the inclusive range ``[low, high]``.
      num_values: int actions: number of values K (scalar or per element).
      mask: int actions: ``bool[N, *shape, K]``, True = allowed (None = all allowed); value
        ``k`` of the mask is action ``low + k``.
      active: optional ``bool[N]``: streams that really act; the OU state of the others is
        left as it was.
    Returns:
      ``(state, action)``, the action with the dtype and shape it came with.
    """
    self.check_kind(kind)
    action = jnp.asarray(action)
    if kind == "float":
      return self._explore_float(state, key, action, timestep, low, high, active)
    if mask is not None and kind == "bool":
      raise ExplorationSpecError("action masks apply to int actions only, got one for a bool "
                                 "action")
    coin_key, value_key = jax.random.split(key)
    explore = jax.random.uniform(coin_key, action.shape) < self.value(timestep)
    if kind == "bool":
      random = jax.random.bernoulli(value_key, 0.5, action.shape)
    else:
      random, explore = _random_ints(value_key, action, explore, low, high, num_values, mask)
    return state, jnp.where(explore, random.astype(action.dtype), action)

  def _explore_float(self, state, key, action, timestep, low, high, active):
    if self.is_ou:
      if jnp.shape(state) != action.shape:
        raise ValueError(f"Ornstein-Uhlenbeck state has shape {jnp.shape(state)} but the "
                         f"action has shape {action.shape}; init(N, action_shape) must match")
      step = state + self.theta * (self.mu - state) + self.initial * jax.random.normal(
          key, action.shape)
      state = step if active is None else jnp.where(_rows(active, state), step, state)
      noise = step
    else:
      noise = self.value(timestep) * jax.random.normal(key, action.shape)
    explored = action + noise.astype(action.dtype)
    if low is not None or high is not None:
      explored = jnp.clip(explored, low, high)
    return state, explored


def _rows(mask: jax.Array, x: jax.Array) -> jax.Array:
  return jnp.asarray(mask, bool).reshape((-1,) + (1,) * (x.ndim - 1))


def _random_ints(key, action, explore, low, high, num_values, mask):
  """Uniform allowed values ``[N, *shape]`` and where to use them (never where none is allowed)."""
  offset = 0 if low is None else low
  if mask is not None:
    mask = jnp.asarray(mask, bool)
    if mask.shape[:-1] != action.shape:
      raise ValueError(f"mask must be [N, *shape, num_values] = {action.shape} + (K,), "
                       f"got {mask.shape}")
    if isinstance(num_values, (int, np.integer)) and mask.shape[-1] != num_values:
      raise ValueError(f"mask has {mask.shape[-1]} values per action but num_values is "
                       f"{num_values}")
    logits = jnp.where(mask, 0.0, -jnp.inf)
    index = jax.random.categorical(key, logits)
    return offset + index, explore & jnp.any(mask, axis=-1)
  if num_values is not None:
    return offset + jax.random.randint(key, action.shape, 0, num_values), explore
  if low is None or high is None:
    raise ValueError("int exploration needs num_values, a mask, or both low and high")
  return jax.random.randint(key, action.shape, low, jnp.asarray(high) + 1), explore


def exploration_of(spec: ExplorationSpec | None) -> Exploration | None:
  """The ``Exploration`` of a checked spec (None: none)."""
  if spec is None:
    return None
  return Exploration(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})


def build_exploration(spec: Any, where: str = "exploration") -> Exploration | None:
  """An ``Exploration`` from a spec: None / 0 (none), a number (constant), a type name, or a dict.

  Raises:
    ExplorationSpecError: unknown type or key (with the closest valid one), bad values.
  """
  return exploration_of(parse_exploration_spec(spec, where))


def build_explorations(spec: Any, action_names=None, kinds: Mapping[str, str] | str | None = None
                       ) -> dict[str, Exploration | None] | Exploration | None:
  """Explorations for one unnamed action (``action_names`` None) or for named actions.

  Args:
    spec: one spec for every action, or a dict ``action name -> spec`` (names not mentioned
      get no exploration). A dict is one spec when it has a 'type'.
    action_names: the names of the actions, or None for a single unnamed action.
    kinds: optional action kinds ('int' | 'bool' | 'float', one for all or per name), to check
      at build time that each exploration fits its action.
  Raises:
    ExplorationSpecError: unknown action names (with the closest one), bad specs, misfits.
  """
  if action_names is None:
    built = build_exploration(spec)
    if built is not None and isinstance(kinds, str):
      built.check_kind(kinds)
    return built
  names = list(action_names)
  if isinstance(spec, Mapping) and "type" not in spec:
    for name in spec:
      if name not in names:
        raise ExplorationSpecError(f"exploration: no action named {name!r}"
                                   f"{did_you_mean(name, names)}; actions: "
                                   f"{', '.join(map(str, names))}")
    built = {name: build_exploration(spec.get(name), f"exploration[{name!r}]") for name in names}
  else:
    shared = build_exploration(spec)
    built = {name: shared for name in names}
  for name, exploration in built.items():
    kind = kinds.get(name) if isinstance(kinds, Mapping) else kinds
    if exploration is not None and kind is not None:
      try:
        exploration.check_kind(kind)
      except ExplorationSpecError as error:
        raise ExplorationSpecError(f"exploration[{name!r}]: {error}") from None
  return built
