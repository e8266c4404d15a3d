"""Action distributions as pytrees, one per TensorForce action type, and their combinators.

All are pytrees (``NamedTuple``s of arrays, or dataclasses whose static fields are pytree
metadata), so they pass through ``jit``, ``vmap``, ``lax.scan`` and can be stored in
rollouts (the "old policy" of PPO). Leading axes are batch axes (``[...]``); every method
(``log_prob``, ``entropy``, ``kl``) reduces over the event axes and returns ``[...]``;
``mode`` and ``sample`` return one action per batch element.

===================  ===================================  ============================
distribution         parameters                           action (event)
===================  ===================================  ============================
``DiagGaussian``     ``mean, std: [..., A]``              float ``[..., A]``
``Beta``             ``alpha, beta: [..., A]``, bounds    float ``[..., A]`` in bounds
``Categorical``      ``logits: [..., K]`` (maskable)      int32 ``[...]``
``Bernoulli``        ``logits: [...]``                    bool ``[...]``
``Independent``      a distribution, ``ndims``            sums the last ``ndims`` axes
``Reshaped``         a vector-event distribution, shape   ``[..., *shape]`` actions
``Joint``            ``{name: distribution}``             ``{name: action}``
===================  ===================================  ============================

Why the two wrappers: ``Categorical`` and ``Bernoulli`` have scalar events, so an int/bool
action of shape ``(n, m)`` is ``Independent(Categorical(logits[..., n, m, K]), 2)``. The
float distributions have a vector event ``[..., A]``, so a float action of any other shape
(``()`` included) is ``Reshaped(DiagGaussian(mean[..., A]), shape)`` with ``A = prod(shape)``:
``log_prob`` flattens ``[..., *shape]`` to ``[..., A]``, ``sample``/``mode`` unflatten.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betaln, digamma

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class DiagGaussian(NamedTuple):
  """Independent normal per action dimension. ``mean``, ``std``: ``[..., A]``."""

  mean: jax.Array
  std: jax.Array

  def log_prob(self, x: jax.Array) -> jax.Array:
    """``[..., A] -> [...]``."""
    z = (x - self.mean) / self.std
    return jnp.sum(-0.5 * jnp.square(z) - jnp.log(self.std) - _HALF_LOG_2PI, axis=-1)

  def entropy(self) -> jax.Array:
    return jnp.sum(0.5 + _HALF_LOG_2PI + jnp.log(self.std), axis=-1)

  def kl(self, other: "DiagGaussian") -> jax.Array:
    """``KL(self || other)`` in closed form."""
    var_ratio = jnp.square(self.std / other.std)
    mean_term = jnp.square((self.mean - other.mean) / other.std)
    return jnp.sum(0.5 * (var_ratio + mean_term - 1.0 - jnp.log(var_ratio)), axis=-1)

  def mode(self) -> jax.Array:
    return self.mean

  def sample(self, key: jax.Array) -> jax.Array:
    noise = jax.random.normal(key, jnp.shape(self.mean), jnp.result_type(self.mean))
    return self.mean + self.std * noise


class Categorical(NamedTuple):
  """Distribution over ``K`` classes from unnormalized ``logits: [..., K]``; samples are int32.

  ``Categorical.masked(logits, mask)`` forbids classes: their logits become the most negative
  finite float, so their probability is exactly 0 (never sampled, never the mode, an exact 0
  contribution to entropy and KL) and nothing turns into NaN or inf.
  """

  logits: jax.Array

  @classmethod
  def masked(cls, logits: jax.Array, mask: jax.Array | None) -> "Categorical":
    """``logits: [..., K]``, ``mask: [..., K]`` bool, True = allowed (``None``: all allowed).

    A row whose mask allows nothing gives a uniform distribution over all ``K`` classes;
    check ``mask_allows_nothing(mask)`` on the host and raise there.
    """
    if mask is None:
      return cls(logits)
    logits = jnp.asarray(logits)
    lowest = jnp.finfo(logits.dtype).min
    return cls(jnp.where(jnp.asarray(mask, bool), logits, lowest))

  @property
  def log_probs(self) -> jax.Array:
    return jax.nn.log_softmax(self.logits, axis=-1)

  def log_prob(self, x: jax.Array) -> jax.Array:
    """``x: [...]`` int class indices ``-> [...]``."""
    picked = jnp.take_along_axis(self.log_probs, x[..., None].astype(jnp.int32), axis=-1)
    return picked[..., 0]

  def entropy(self) -> jax.Array:
    log_p = self.log_probs
    return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)

  def kl(self, other: "Categorical") -> jax.Array:
    """``KL(self || other)``."""
    log_p = self.log_probs
    return jnp.sum(jnp.exp(log_p) * (log_p - other.log_probs), axis=-1)

  def mode(self) -> jax.Array:
    return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

  def sample(self, key: jax.Array) -> jax.Array:
    return jax.random.categorical(key, self.logits, axis=-1).astype(jnp.int32)


def mask_allows_nothing(mask) -> Any:
  """``mask: [..., K]`` bool (True = allowed) ``-> bool[...]``: rows that allow no value.

  numpy in, numpy out (a host-side check before acting); otherwise a jax array.
  """
  xp = np if isinstance(mask, np.ndarray) else jnp
  return xp.logical_not(xp.any(xp.asarray(mask, bool), axis=-1))


class Bernoulli(NamedTuple):
  """One bool per batch element from ``logits: [...]`` (``p(True) = sigmoid(logits)``).

  Scalar event: wrap in ``Independent`` for bool actions of shape ``(n, ...)``.
  """

  logits: jax.Array

  def log_prob(self, x: jax.Array) -> jax.Array:
    """``x: [...]`` bool or 0/1 ``-> [...]``."""
    x = jnp.asarray(x).astype(self.logits.dtype)
    return x * jax.nn.log_sigmoid(self.logits) + (1.0 - x) * jax.nn.log_sigmoid(-self.logits)

  def entropy(self) -> jax.Array:
    p = jax.nn.sigmoid(self.logits)
    return -(p * jax.nn.log_sigmoid(self.logits) + (1.0 - p) * jax.nn.log_sigmoid(-self.logits))

  def kl(self, other: "Bernoulli") -> jax.Array:
    """``KL(self || other)``."""
    p = jax.nn.sigmoid(self.logits)
    log_true = jax.nn.log_sigmoid(self.logits) - jax.nn.log_sigmoid(other.logits)
    log_false = jax.nn.log_sigmoid(-self.logits) - jax.nn.log_sigmoid(-other.logits)
    return p * log_true + (1.0 - p) * log_false

  def mode(self) -> jax.Array:
    return self.logits > 0

  def sample(self, key: jax.Array) -> jax.Array:
    return jax.random.bernoulli(key, jax.nn.sigmoid(self.logits))


_BETA_EPS = 1e-6  # log_prob clips u to [eps, 1 - eps]: a sample of exactly 0 or 1 stays finite


class Beta(NamedTuple):
  """Beta distribution scaled to ``[low, high]``; ``alpha, beta: [..., A]`` (both > 0),
  ``low, high`` broadcastable to ``[..., A]`` and finite.

  Densities are of the scaled variable ``x = low + u * (high - low)``, ``u ~ Beta(alpha,
  beta)``: ``log_prob`` and ``entropy`` include the ``log(high - low)`` Jacobian. ``kl`` is
  between Betas on the same bounds (where the Jacobians cancel). ``mode`` is the *mean*
  ``alpha / (alpha + beta)`` scaled, as TensorForce used for deterministic actions: it exists
  for every ``alpha, beta`` (the true mode does not when either is below 1).
  """

  alpha: jax.Array
  beta: jax.Array
  low: jax.Array
  high: jax.Array

  def _log_scale(self) -> jax.Array:
    return jnp.log(self.high - self.low)

  def log_prob(self, x: jax.Array) -> jax.Array:
    """``x: [..., A]`` in ``[low, high] -> [...]``."""
    u = jnp.clip((x - self.low) / (self.high - self.low), _BETA_EPS, 1.0 - _BETA_EPS)
    log_pdf = ((self.alpha - 1.0) * jnp.log(u) + (self.beta - 1.0) * jnp.log1p(-u)
               - betaln(self.alpha, self.beta) - self._log_scale())
    return jnp.sum(log_pdf, axis=-1)

  def entropy(self) -> jax.Array:
    a, b = self.alpha, self.beta
    unit = (betaln(a, b) - (a - 1.0) * digamma(a) - (b - 1.0) * digamma(b)
            + (a + b - 2.0) * digamma(a + b))
    return jnp.sum(unit + self._log_scale(), axis=-1)

  def kl(self, other: "Beta") -> jax.Array:
    """``KL(self || other)`` in closed form; both on the same ``[low, high]``."""
    a1, b1, a2, b2 = self.alpha, self.beta, other.alpha, other.beta
    kl = (betaln(a2, b2) - betaln(a1, b1) + (a1 - a2) * digamma(a1) + (b1 - b2) * digamma(b1)
          + (a2 - a1 + b2 - b1) * digamma(a1 + b1))
    return jnp.sum(kl, axis=-1)

  def mode(self) -> jax.Array:
    return self.low + self.alpha / (self.alpha + self.beta) * (self.high - self.low)

  def sample(self, key: jax.Array) -> jax.Array:
    shape = jnp.broadcast_shapes(jnp.shape(self.alpha), jnp.shape(self.beta))
    u = jax.random.beta(key, self.alpha, self.beta, shape, jnp.result_type(self.alpha))
    return self.low + u * (self.high - self.low)


def _sum_last(x: jax.Array, ndims: int) -> jax.Array:
  return jnp.sum(x, axis=tuple(range(-ndims, 0))) if ndims else x


@functools.partial(jax.tree_util.register_dataclass, data_fields=["base"],
                   meta_fields=["ndims"])
@dataclasses.dataclass(frozen=True)
class Independent:
  """Treats the last ``ndims`` batch axes of ``base`` as event axes: ``log_prob``,
  ``entropy`` and ``kl`` are summed over them. ``ndims`` is static (pytree metadata)."""

  base: Any
  ndims: int

  def log_prob(self, x) -> jax.Array:
    return _sum_last(self.base.log_prob(x), self.ndims)

  def entropy(self) -> jax.Array:
    return _sum_last(self.base.entropy(), self.ndims)

  def kl(self, other: "Independent") -> jax.Array:
    return _sum_last(self.base.kl(other.base), self.ndims)

  def mode(self):
    return self.base.mode()

  def sample(self, key: jax.Array):
    return self.base.sample(key)


@functools.partial(jax.tree_util.register_dataclass, data_fields=["base"],
                   meta_fields=["event_shape"])
@dataclasses.dataclass(frozen=True)
class Reshaped:
  """A vector-event distribution (``[..., A]``, ``A = prod(event_shape)``) whose actions
  have shape ``[..., *event_shape]`` (``()`` for a scalar float action, ``A = 1``).

  ``log_prob`` flattens the action's event axes; ``sample`` and ``mode`` unflatten.
  ``event_shape`` is static (pytree metadata).
  """

  base: Any
  event_shape: tuple[int, ...]

  def _flatten(self, x: jax.Array) -> jax.Array:
    x = jnp.asarray(x)
    return jnp.reshape(x, x.shape[:x.ndim - len(self.event_shape)] + (-1,))

  def _unflatten(self, x: jax.Array) -> jax.Array:
    return jnp.reshape(x, x.shape[:-1] + tuple(self.event_shape))

  def log_prob(self, x: jax.Array) -> jax.Array:
    """``x: [..., *event_shape] -> [...]``."""
    return self.base.log_prob(self._flatten(x))

  def entropy(self) -> jax.Array:
    return self.base.entropy()

  def kl(self, other: "Reshaped") -> jax.Array:
    return self.base.kl(other.base)

  def mode(self) -> jax.Array:
    return self._unflatten(self.base.mode())

  def sample(self, key: jax.Array) -> jax.Array:
    return self._unflatten(self.base.sample(key))


class Joint(NamedTuple):
  """Several named actions as one distribution: ``components: {name: distribution}``, all of
  the same batch shape ``[...]``. Actions are dicts ``{name: action}``; ``log_prob``,
  ``entropy`` and ``kl`` are sums over the components. ``sample`` gives each component its
  own key, split from ``key`` in sorted-name order (deterministic)."""

  components: dict[str, Any]

  def log_prob(self, x: dict[str, Any]) -> jax.Array:
    return sum(self.components[name].log_prob(x[name]) for name in sorted(self.components))

  def entropy(self) -> jax.Array:
    return sum(self.components[name].entropy() for name in sorted(self.components))

  def kl(self, other: "Joint") -> jax.Array:
    return sum(self.components[name].kl(other.components[name])
               for name in sorted(self.components))

  def mode(self) -> dict[str, Any]:
    return {name: dist.mode() for name, dist in self.components.items()}

  def sample(self, key: jax.Array) -> dict[str, Any]:
    names = sorted(self.components)
    keys = jax.random.split(key, len(names))
    return {name: self.components[name].sample(k) for name, k in zip(names, keys)}
