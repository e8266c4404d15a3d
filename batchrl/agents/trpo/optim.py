"""The natural-gradient step of TRPO (Schulman et al. 2015), as pure functions of flat
parameter vectors ``[P]`` (``jax.flatten_util.ravel_pytree``).

  g  = grad L(theta)                       L: the surrogate objective (maximized)
  x  ~ (F + damping I)^-1 g                conjugate gradient on Fisher-vector products
  F v = d/dt grad KL(pi_old || pi_{theta + t v}) at t = 0   (jax.jvp of jax.grad; the
                                           Hessian of the mean KL at theta_old is the Fisher
                                           matrix: it is never formed)
  step = sqrt(2 max_kl / x^T (F + damping I) x) * x     (the quadratic model's KL = max_kl)
  backtracking line search on step * shrink^i, i = 0 .. line_search_steps - 1: accept the
  first candidate whose KL <= max_kl, whose surrogate improves (> 0) and whose improvement is
  at least ``accept_ratio`` times the linear prediction ``g . step * shrink^i``; when none
  passes, the parameters stay as they were.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

Vector = jax.Array  # [P]


def fisher_vector_product(kl_fn: Callable[[Vector], jax.Array], params: Vector,
                          damping: float) -> Callable[[Vector], Vector]:
  """``v -> (F + damping I) v`` with ``F`` the Hessian of ``kl_fn`` at ``params``.

  ``kl_fn(theta)`` is the mean ``KL(pi_old || pi_theta)`` with ``pi_old = pi_params`` held
  fixed; at ``theta = params`` its Hessian is the Fisher information of the policy.
  Forward-over-reverse: one ``jax.jvp`` of ``jax.grad`` per product, no ``[P, P]`` matrix.
  """
  grad_kl = jax.grad(kl_fn)

  def product(v: Vector) -> Vector:
    return jax.jvp(grad_kl, (params,), (v,))[1] + damping * v

  return product


def conjugate_gradient(matvec: Callable[[Vector], Vector], b: Vector, iterations: int,
                       tolerance: float = 1e-10) -> tuple[Vector, jax.Array]:
  """Approximately solves ``A x = b`` for symmetric positive definite ``A`` given as
  ``matvec``; at most ``iterations`` products, stopping once ``|r|^2 < tolerance``.

  Returns ``x`` and the norm of the final residual ``|b - A x|`` (as CG tracks it).
  """

  def cond(carry):
    i, _, _, _, rr = carry
    return jnp.logical_and(i < iterations, rr >= tolerance)

  def body(carry):
    i, x, r, p, rr = carry
    ap = matvec(p)
    alpha = rr / jnp.vdot(p, ap)
    x = x + alpha * p
    r = r - alpha * ap
    rr_new = jnp.vdot(r, r)
    p = r + (rr_new / rr) * p
    return i + 1, x, r, p, rr_new

  start = (jnp.int32(0), jnp.zeros_like(b), b, b, jnp.vdot(b, b))
  _, x, _, _, rr = jax.lax.while_loop(cond, body, start)
  return x, jnp.sqrt(rr)


class LineSearchResult(NamedTuple):
  params: Vector  # the accepted candidate, or the old parameters
  accepted: jax.Array  # [] bool
  steps: jax.Array  # [] int32 candidates evaluated (line_search_steps when none passed)
  improvement: jax.Array  # [] surrogate improvement of the accepted step (0 when none)
  kl: jax.Array  # [] KL of the accepted step (0 when none)


def line_search(objective: Callable[[Vector], jax.Array],
                kl_fn: Callable[[Vector], jax.Array], params: Vector, full_step: Vector,
                expected_improvement: jax.Array, *, max_kl: float, max_steps: int,
                accept_ratio: float, shrink: float) -> LineSearchResult:
  """Backtracking on ``params + shrink^i * full_step`` (see the module docstring).

  Args:
    objective: ``theta -> []`` the surrogate to maximize.
    kl_fn: ``theta -> []`` mean ``KL(pi_old || pi_theta)``.
    expected_improvement: ``[]`` ``g . full_step``, the first-order prediction.
  """
  base = objective(params)

  def cond(carry):
    i, accepted = carry[:2]
    return jnp.logical_and(i < max_steps, jnp.logical_not(accepted))

  def body(carry):
    i = carry[0]
    fraction = jnp.asarray(shrink, params.dtype) ** i
    candidate = params + fraction * full_step
    improvement = objective(candidate) - base
    kl = kl_fn(candidate)
    accepted = ((kl <= max_kl) & (improvement > 0)
                & (improvement >= accept_ratio * fraction * expected_improvement))
    return i + 1, accepted, candidate, improvement, kl

  zero = jnp.zeros((), params.dtype)
  i, accepted, candidate, improvement, kl = jax.lax.while_loop(
      cond, body, (jnp.int32(0), jnp.bool_(False), params, zero, zero))
  return LineSearchResult(jnp.where(accepted, candidate, params), accepted, i,
                          jnp.where(accepted, improvement, zero),
                          jnp.where(accepted, kl, zero))


class NaturalStep(NamedTuple):
  params: Vector
  metrics: dict


def natural_gradient_step(objective: Callable[[Vector], jax.Array],
                          kl_fn: Callable[[Vector], jax.Array], params: Vector, *,
                          max_kl: float, cg_iterations: int, cg_damping: float,
                          line_search_steps: int, accept_ratio: float,
                          shrink: float) -> NaturalStep:
  """One TRPO step from ``params``: CG direction, scaled to ``max_kl``, line search.

  Metrics: ``cg_residual``, ``expected_improvement``, ``surrogate_improvement``,
  ``line_search_steps``, ``step_accepted`` (0/1), ``kl`` (of the accepted step),
  ``policy_grad_norm``.
  """
  grad = jax.grad(objective)(params)
  fvp = fisher_vector_product(kl_fn, params, cg_damping)
  direction, residual = conjugate_gradient(fvp, grad, cg_iterations)
  curvature = jnp.vdot(direction, fvp(direction))
  # a zero gradient (or a degenerate direction) gives a zero step, which the search rejects
  scale = jnp.where(curvature > 0, jnp.sqrt(2.0 * max_kl / jnp.maximum(curvature, 1e-30)),
                    0.0)
  full_step = scale * direction
  expected = jnp.vdot(grad, full_step)
  result = line_search(objective, kl_fn, params, full_step, expected, max_kl=max_kl,
                       max_steps=line_search_steps, accept_ratio=accept_ratio, shrink=shrink)
  metrics = {"cg_residual": residual, "expected_improvement": expected,
             "surrogate_improvement": result.improvement,
             "line_search_steps": result.steps.astype(jnp.float32),
             "step_accepted": result.accepted.astype(jnp.float32), "kl": result.kl,
             "policy_grad_norm": jnp.linalg.norm(grad)}
  return NaturalStep(result.params, metrics)
