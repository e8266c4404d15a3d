"""``host_call``: an ordered call from a compiled program into Python, numpy in and out.

``jax.experimental.io_callback(fn, structs, *args, ordered=True)`` does what the host
environments need, but on every call JAX turns the arguments into ``jax.Array`` s
(``device_put``) and enters a ``default_device`` context before ``fn`` runs. For a
MuJoCo env stepped once per compiled step that wrapping is most of the crossing's cost:
measured on the 2-core CPU with a callback returning constants, about 75-105 us a call
through ``io_callback`` against 17-23 us through ``host_call`` (``benchmarks/limits.py``
prints the crossing of the run). ``host_call`` is the same primitive machinery with the
wrapping left out: ``fn`` gets numpy copies of the arguments and returns numpy arrays of
exactly the structs' shapes and dtypes (checked by JAX, as for ``io_callback``). Calls are
ordered like ``io_callback(..., ordered=True)`` (the same effect and token).

It rests on JAX internals (``jax._src``): where they are missing or changed, ``host_call``
is ``io_callback(..., ordered=True)``, with the same results. No ``vmap``, no autodiff
(errors, as for an ordered ``io_callback``), as for the host envs that use it.

Each XLA thread that calls ``fn`` keeps its Python thread state (``keep_thread_state``):
XLA's threads are not Python's, so by default every call creates a thread state and
deletes it on return. Measured on ``a2c_cartpole`` (8 CartPoles, one XLA thread, five A/B
pairs of runs): about 185 us of CPU per step before, 155-170 after.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any, Callable

import jax
import numpy as np
from jax.experimental import io_callback


try:  # private JAX pieces (see the module doc): without them, io_callback is used
  from jax._src import callback as _jax_callback
  from jax._src import core as _core
  from jax._src import dispatch as _dispatch
  from jax._src.interpreters import mlir as _mlir
  _EMIT = _jax_callback.emit_python_callback
  _EFFECT = _jax_callback._OrderedIOEffect
  _OP_SHARDING = _jax_callback._callback_op_sharding
except (ImportError, AttributeError):  # pragma: no cover  (another JAX)
  _EMIT = None


def _lean_primitive():
  """The primitive with its ordered lowering; None when this JAX lacks the internals used."""
  if _EMIT is None:
    return None
  prim = _core.Primitive("batchrl_host_call")
  prim.multiple_results = True
  _dispatch.prim_requires_devices_during_lowering.add(prim)

  def abstract_eval(*avals, fn, result_avals):
    del avals, fn
    return result_avals, {_EFFECT}

  def lowering(ctx, *args, fn, result_avals):
    del result_avals
    token = ctx.tokens_in.get(_EFFECT)
    result, token, _ = _EMIT(
        ctx, fn, token, list(args), ctx.avals_in, ctx.avals_out, has_side_effect=True,
        returns_token=True,
        sharding=_OP_SHARDING(ctx.module_context.axis_context, None, ctx.avals_out))
    ctx.set_tokens_out(ctx.tokens_in.update_tokens(_mlir.TokenSet({_EFFECT: token})))
    return result

  def impl(*args, fn, result_avals):  # outside jit: a plain call
    del result_avals
    return fn(*args)

  prim.def_effectful_abstract_eval(abstract_eval)
  prim.def_impl(impl)
  _mlir.register_lowering(prim, lowering, cacheable=False)
  return prim


_KEPT: set[int] = set()  # idents of the threads whose thread state is kept


def keep_thread_state() -> None:
  """Keeps the calling thread's Python thread state alive until the interpreter ends.

  Called from a foreign (XLA) thread inside a callback, where the GIL is held: one more
  ``PyGILState_Ensure`` that is never released, so the callback's own release no longer
  deletes the thread state, and the next callback on this thread reuses it instead of
  building a new one. A few thread states (one per XLA thread) stay allocated; nothing
  else changes (a thread's ``threading.local`` values now last between its calls).
  """
  ident = threading.get_ident()
  if ident not in _KEPT:
    _KEPT.add(ident)
    ctypes.pythonapi.PyGILState_Ensure()


LEAN = True  # False: every host_call is io_callback(ordered=True) (read when traced;
# benchmarks/limits.py compares the two in one run)


@functools.cache
def _primitive():
  return _lean_primitive()


def host_call(fn: Callable[..., Any], result_structs: Any, *args: jax.Array) -> Any:
  """``fn(*numpy_args)`` from inside ``jit``, ordered; returns ``result_structs``' pytree.

  ``args`` are arrays (not pytrees); ``fn`` returns a pytree of numpy arrays with the
  structure, shapes and dtypes of ``result_structs`` (``jax.ShapeDtypeStruct`` s).
  """
  prim = _primitive() if LEAN else None
  if prim is None:
    return io_callback(fn, result_structs, *args, ordered=True)
  leaves, tree = jax.tree.flatten(result_structs)
  avals = tuple(_core.ShapedArray(s.shape, s.dtype) for s in leaves)

  def flat_fn(*host_args):
    keep_thread_state()
    # copies: the env may keep the action, XLA reuses its buffers after the call
    return tuple(jax.tree.leaves(fn(*(np.array(a) for a in host_args))))

  return jax.tree.unflatten(tree, prim.bind(*args, fn=flat_fn, result_avals=avals))
