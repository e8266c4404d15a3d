"""Action heads: features ``[..., F]`` -> the action distribution of a TensorForce-style spec.

``ActionSpec`` is one action as a head sees it (static, hashable); ``action_specs_from_space``
makes them from a Gymnasium space. ``ActionHeads`` maps features to

==========================  ==========================================================
action                      distribution (batch shape ``[...]`` of the features)
==========================  ==========================================================
int, shape ``()``           ``Categorical(logits[..., K])`` (masked when given a mask)
int, shape ``s``            ``Independent(Categorical(logits[..., *s, K]), len(s))``
bool, shape ``()`` / ``s``  ``Bernoulli(logits[...])`` / ``Independent(.., len(s))``
float, shape ``(A,)``       ``DiagGaussian(mean, std: [..., A])`` (or ``Beta``)
float, other shapes         ``Reshaped(DiagGaussian(.. [..., prod(s)]), s)`` (or ``Beta``)
several named actions       ``Joint({name: distribution})``
==========================  ==========================================================

Float actions are raw: the Gaussian mean is linear (or ``tanh``-squashed to ``[-1, 1]``) and
the agent rescales to the env's bounds; the Beta is already in ``[low, high]``. Int actions
are indices ``0 .. num_values - 1``; the env's ``start`` offset is added by the agent.

Output layers start small (``init_output_factor``) so the initial policy is near uniform
(categorical, Bernoulli), near its mean (Gaussian, with ``std == init_std``) or near the
symmetric ``Beta(1.69, 1.69)`` (``alpha, beta = 1 + softplus(.)``: unimodal, as TensorForce).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.errors import did_you_mean
from batchrl.networks.distributions import (
  Bernoulli,
  Beta,
  Categorical,
  DiagGaussian,
  Independent,
  Joint,
  Reshaped,
)

ACTION_KINDS = ("float", "int", "bool")
FLOAT_DISTRIBUTIONS = ("gaussian", "beta")
BOUNDED_MEANS = ("none", "tanh")
SINGLE_ACTION_NAME = "action"  # parameter scope of a single unnamed action


def _choice(value: str, valid, what: str) -> None:
  if value not in valid:
    raise ValueError(f"{what} must be one of {', '.join(map(repr, valid))}; got "
                     f"{value!r}{did_you_mean(value, valid)}.")


def _as_bound(value, shape: tuple[int, ...], what: str):
  """A bound as ``None`` (all infinite), a float (all equal) or nested tuples of ``shape``."""
  if value is None:
    return None
  array = np.asarray(value, np.float64)
  try:
    array = np.broadcast_to(array, shape)
  except ValueError:
    raise ValueError(f"ActionSpec {what} of shape {np.shape(value)} does not broadcast to "
                     f"the action shape {shape}.") from None
  if np.all(np.isinf(array)):
    return None
  if array.size and np.all(array == array.flat[0]):
    return float(array.flat[0])
  return _nested_tuple(array.tolist())


def _nested_tuple(value):
  return tuple(_nested_tuple(v) for v in value) if isinstance(value, list) else float(value)


@dataclasses.dataclass(frozen=True)
class ActionSpec:
  """One action as the head sees it (static and hashable).

  Attributes:
    kind: ``'float'``, ``'int'`` or ``'bool'``.
    shape: per-sample shape, ``()`` for a scalar action; every dimension positive.
    num_values: number of values of an int action (``K``); int actions only.
    low, high: float bounds: ``None`` (unbounded), a float, or nested tuples of ``shape``
      (numpy arrays are accepted and converted; infinite entries mean unbounded there).
    start: the env's first int value (``Discrete(n, start)``); samples are ``0 .. K - 1``.
  """

  kind: str
  shape: tuple[int, ...] = ()
  num_values: int | None = None
  low: Any = None
  high: Any = None
  start: int = 0

  def __post_init__(self):
    _choice(self.kind, ACTION_KINDS, "ActionSpec kind")
    shape = (self.shape,) if isinstance(self.shape, (int, np.integer)) else self.shape
    shape = tuple(int(d) for d in shape)
    if any(d < 1 for d in shape):
      raise ValueError(f"ActionSpec shape must have positive dimensions; got {self.shape}.")
    object.__setattr__(self, "shape", shape)
    if self.kind == "int":
      if self.num_values is None or int(self.num_values) < 1:
        raise ValueError(f"An int ActionSpec needs num_values >= 1; got {self.num_values}.")
      object.__setattr__(self, "num_values", int(self.num_values))
    elif self.num_values is not None:
      raise ValueError(f"num_values is for int actions only; got it for a {self.kind} action.")
    if self.kind != "float" and (self.low is not None or self.high is not None):
      raise ValueError(f"low/high are for float actions only; got them for a {self.kind} "
                       "action.")
    object.__setattr__(self, "low", _as_bound(self.low, shape, "low"))
    object.__setattr__(self, "high", _as_bound(self.high, shape, "high"))
    low, high = self.bounds()
    if np.any(low >= high):
      raise ValueError(f"ActionSpec needs low < high everywhere; got low={self.low}, "
                       f"high={self.high}.")

  @property
  def size(self) -> int:
    """Number of scalar elements, ``prod(shape)``."""
    return math.prod(self.shape)

  def bounds(self) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` as float32 arrays of ``shape``, ``-inf``/``inf`` where unbounded."""
    low = -np.inf if self.low is None else np.asarray(self.low, np.float32)
    high = np.inf if self.high is None else np.asarray(self.high, np.float32)
    return (np.broadcast_to(np.float32(low), self.shape).astype(np.float32),
            np.broadcast_to(np.float32(high), self.shape).astype(np.float32))

  @property
  def bounded(self) -> bool:
    """Whether every element has finite low and high."""
    low, high = self.bounds()
    return bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))


def action_specs_from_space(space: gym.Space) -> dict[str, ActionSpec] | ActionSpec:
  """``Discrete(n, start)`` -> int ``()``; ``MultiDiscrete`` (one ``n`` and ``start`` for all
  elements) -> int of its shape; ``MultiBinary`` -> bool; float ``Box`` -> float with bounds
  (infinite = unbounded); ``Dict`` of those -> ``{name: ActionSpec}``.

  A ``MultiDiscrete`` with different ``nvec`` entries is refused rather than padded: use a
  ``Dict`` of ``Discrete`` spaces, or pad the env's values and pass masks.
  """
  if isinstance(space, gym.spaces.Dict):
    specs = {}
    for name, sub in space.spaces.items():
      if isinstance(sub, (gym.spaces.Dict, gym.spaces.Tuple)):
        raise TypeError(f"Nested action space under {name!r} is not supported: {sub}. "
                        "Flatten it into one Dict of Discrete/MultiDiscrete/MultiBinary/Box.")
      specs[name] = action_specs_from_space(sub)
    return specs
  if isinstance(space, gym.spaces.Discrete):
    return ActionSpec("int", (), int(space.n), start=int(space.start))
  if isinstance(space, gym.spaces.MultiDiscrete):
    return _multi_discrete(space)
  if isinstance(space, gym.spaces.MultiBinary):
    return ActionSpec("bool", tuple(np.atleast_1d(space.n).tolist()))
  if isinstance(space, gym.spaces.Box):
    if not np.issubdtype(space.dtype, np.floating):
      raise TypeError(f"Box action spaces must have a float dtype; got {space.dtype}. "
                      "Use Discrete or MultiDiscrete for int actions.")
    return ActionSpec("float", space.shape, low=space.low, high=space.high)
  raise TypeError(f"Unsupported action space {space}; valid: Discrete, MultiDiscrete, "
                  "MultiBinary, Box (float) and a Dict of those.")


def _multi_discrete(space: gym.spaces.MultiDiscrete) -> ActionSpec:
  nvec, start = np.asarray(space.nvec), np.asarray(space.start)
  if np.any(nvec != nvec.flat[0]) or np.any(start != start.flat[0]):
    raise ValueError(f"MultiDiscrete actions need one value count and one start for all "
                     f"elements; got nvec={nvec.tolist()}, start={start.tolist()}. Use a Dict "
                     "of Discrete spaces (or pad to max(nvec) and mask the extra values).")
  return ActionSpec("int", space.shape, int(nvec.flat[0]), start=int(start.flat[0]))


def _small_kernel(factor: float):
  return nn.initializers.variance_scaling(factor, "fan_avg", "uniform")


class _IntHead(nn.Module):
  """``[..., F]`` -> logits ``[..., *shape, K]`` -> (masked) Categorical."""

  spec: ActionSpec
  init_output_factor: float

  @nn.compact
  def __call__(self, features, mask=None):
    k = self.spec.num_values
    logits = nn.Dense(self.spec.size * k, kernel_init=_small_kernel(self.init_output_factor))(
        features)
    logits = jnp.reshape(logits, logits.shape[:-1] + self.spec.shape + (k,))
    dist = Categorical.masked(logits, mask)
    return Independent(dist, len(self.spec.shape)) if self.spec.shape else dist


class _BoolHead(nn.Module):
  """``[..., F]`` -> logits ``[..., *shape]`` -> Bernoulli."""

  spec: ActionSpec
  init_output_factor: float

  @nn.compact
  def __call__(self, features):
    logits = nn.Dense(self.spec.size, kernel_init=_small_kernel(self.init_output_factor))(
        features)
    dist = Bernoulli(jnp.reshape(logits, logits.shape[:-1] + self.spec.shape))
    return Independent(dist, len(self.spec.shape)) if self.spec.shape else dist


def _reshaped(dist, shape: tuple[int, ...]):
  return dist if len(shape) == 1 else Reshaped(dist, shape)


class _GaussianHead(nn.Module):
  """Mean ``[..., A]`` from a small-init dense layer (optionally ``tanh``); state-independent
  ``std = softplus(raw_std)``, ``raw_std: [A]`` starting at ``softplus^-1(init_std)``."""

  spec: ActionSpec
  init_output_factor: float
  init_std: float
  bounded_mean: str

  @nn.compact
  def __call__(self, features):
    size = self.spec.size
    mean = nn.Dense(size, kernel_init=_small_kernel(self.init_output_factor))(features)
    if self.bounded_mean == "tanh":
      mean = jnp.tanh(mean)
    raw_init = float(np.log(np.expm1(self.init_std)))
    raw_std = self.param("raw_std", nn.initializers.constant(raw_init), (size,))
    std = jnp.broadcast_to(nn.softplus(raw_std), mean.shape)
    return _reshaped(DiagGaussian(mean, std), self.spec.shape)


class _BetaHead(nn.Module):
  """``alpha, beta = 1 + softplus(dense)``, ``[..., A]``, on the spec's finite bounds."""

  spec: ActionSpec
  init_output_factor: float

  @nn.compact
  def __call__(self, features):
    size = self.spec.size
    out = nn.Dense(2 * size, kernel_init=_small_kernel(self.init_output_factor))(features)
    alpha, beta = 1.0 + nn.softplus(out[..., :size]), 1.0 + nn.softplus(out[..., size:])
    low, high = (jnp.broadcast_to(jnp.asarray(b.reshape(-1)), alpha.shape)
                 for b in self.spec.bounds())
    return _reshaped(Beta(alpha, beta, low, high), self.spec.shape)


class ActionHeads(nn.Module):
  """Features ``[..., F]`` -> the distribution of ``actions`` (see the module docstring).

  Attributes:
    actions: one ``ActionSpec`` (-> the bare distribution) or ``{name: ActionSpec}``
      (-> ``Joint``; each action's parameters live under its name).
    float_distribution: ``'gaussian'``, or ``'beta'`` (every float action must be bounded).
    init_output_factor: variance scale of the output layers' initial kernels.
    init_std: initial std of the Gaussians (learned, state-independent, per element).
    bounded_mean: ``'tanh'`` squashes the Gaussian mean to ``[-1, 1]`` (as BatchPPO did);
      ``'none'`` keeps it linear.
  """

  actions: Any
  float_distribution: str = "gaussian"
  init_output_factor: float = 0.01
  init_std: float = 0.5
  bounded_mean: str = "none"

  @nn.compact
  def __call__(self, features, masks=None):
    """``masks``: ``{name: bool[..., *shape, K]}`` for int actions (True = allowed), a single
    array for a single unnamed action, or ``None``. Returns the distribution, batch ``[...]``."""
    _choice(self.float_distribution, FLOAT_DISTRIBUTIONS, "float_distribution")
    _choice(self.bounded_mean, BOUNDED_MEANS, "bounded_mean")
    if self.init_std <= 0:
      raise ValueError(f"init_std must be positive; got {self.init_std}.")
    if isinstance(self.actions, ActionSpec):
      return self._head(SINGLE_ACTION_NAME, self.actions, features, masks)
    masks = _named_masks(self.actions, masks)
    return Joint({name: self._head(name, spec, features, masks.get(name))
                  for name, spec in sorted(self.actions.items())})

  def _head(self, name: str, spec: ActionSpec, features, mask):
    if not isinstance(spec, ActionSpec):
      raise TypeError(f"Action {name!r} must be an ActionSpec; got {type(spec).__name__}.")
    if mask is not None:
      _check_mask(name, spec, mask)
    if spec.kind == "int":
      return _IntHead(spec, self.init_output_factor, name=name)(features, mask)
    if spec.kind == "bool":
      return _BoolHead(spec, self.init_output_factor, name=name)(features)
    if self.float_distribution == "gaussian":
      return _GaussianHead(spec, self.init_output_factor, self.init_std, self.bounded_mean,
                           name=name)(features)
    if not spec.bounded:
      raise ValueError(f"float_distribution='beta' needs finite low and high for every "
                       f"element of float action {name!r}; got low={spec.low}, "
                       f"high={spec.high}. Give bounds or use float_distribution='gaussian'.")
    return _BetaHead(spec, self.init_output_factor, name=name)(features)


def _named_masks(actions: Mapping[str, ActionSpec], masks) -> Mapping[str, Any]:
  if masks is None:
    return {}
  if not isinstance(masks, Mapping):
    raise TypeError("With named actions, masks must be a dict {action name: bool array}; "
                    f"got {type(masks).__name__}.")
  for name in masks:
    if name not in actions:
      raise ValueError(f"Mask for unknown action {name!r}{did_you_mean(name, actions)}; "
                       f"actions are {sorted(actions)}.")
  return masks


def _check_mask(name: str, spec: ActionSpec, mask) -> None:
  if spec.kind != "int":
    raise ValueError(f"Masks are for int actions only; got one for {spec.kind} action "
                     f"{name!r}.")
  event = spec.shape + (spec.num_values,)
  if tuple(np.shape(mask)[-len(event):]) != event:
    raise ValueError(f"Mask of action {name!r} must have shape [..., *shape, num_values] "
                     f"= [..., {', '.join(map(str, event))}]; got {np.shape(mask)}.")


def sample_uniform(key: jax.Array, spec, batch_shape: tuple[int, ...] = (), mask=None):
  """Uniform random actions ``[*batch_shape, *spec.shape]`` (exploration, random agents).

  int: allowed indices ``0 .. K - 1`` (int32; ``mask[..., *shape, K]`` True = allowed);
  bool: fair coins; float: uniform in ``[low, high]``, with ``[-1, 1]`` where unbounded
  (``[low, low + 2]`` / ``[high - 2, high]`` where bounded on one side). A dict of specs gives
  a dict of actions (keys split in sorted-name order; ``mask`` then a dict of masks). A mask
  row that allows nothing gives uniform indices over all ``K``: check ``mask_allows_nothing``.
  """
  batch_shape = tuple(batch_shape)
  if not isinstance(spec, Mapping):
    return _sample_uniform_one(key, SINGLE_ACTION_NAME, spec, batch_shape, mask)
  masks = _named_masks(spec, mask)
  names = sorted(spec)
  keys = jax.random.split(key, len(names))
  return {name: _sample_uniform_one(k, name, spec[name], batch_shape, masks.get(name))
          for name, k in zip(names, keys)}


def _sample_uniform_one(key, name: str, spec: ActionSpec, batch_shape: tuple, mask):
  shape = batch_shape + spec.shape
  if mask is not None:
    _check_mask(name, spec, mask)
  if spec.kind == "bool":
    return jax.random.bernoulli(key, 0.5, shape)
  if spec.kind == "int":
    if mask is None:
      return jax.random.randint(key, shape, 0, spec.num_values, jnp.int32)
    logits = jnp.zeros(shape + (spec.num_values,), jnp.float32)
    return Categorical.masked(logits, jnp.broadcast_to(mask, logits.shape)).sample(key)
  low, high = _finite_box(*spec.bounds())
  return jax.random.uniform(key, shape, jnp.float32, low, high)


def _finite_box(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  low_finite, high_finite = np.isfinite(low), np.isfinite(high)
  new_low = np.where(low_finite, low, np.where(high_finite, high - 2.0, -1.0))
  new_high = np.where(high_finite, high, new_low + 2.0)
  return new_low.astype(np.float32), new_high.astype(np.float32)
