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

It rests on JAX internals (``batchrl.jax_internals.lean_callback``): where they are missing
or changed, ``host_call`` is ``io_callback(..., ordered=True)``, with the same results and
one warning. No ``vmap``, no autodiff (errors, as for an ordered ``io_callback``), as for
the host envs that use it.

Each XLA thread that calls ``fn`` keeps its Python thread state (``keep_thread_state``):
XLA's threads are not Python's, so by default every call creates a thread state and
deletes it on return. Measured on ``a2c_cartpole`` (8 CartPoles, one XLA thread, five A/B
pairs of runs): about 185 us of CPU per step before, 155-170 after.
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.experimental import io_callback

from batchrl import jax_internals

# ---------------------------------------------------------------- thread states
#
# How a kept thread state is handed back, and why not otherwise. ``PyGILState_Release``
# must run on the thread that called ``PyGILState_Ensure`` (from another thread it corrupts
# that thread's count: CPython 3.11 and 3.12 then crash, measured), and on an XLA thread
# Python runs only inside a callback. A ``threading.local`` finalizer cannot do it: the
# thread's locals are cleared only when its thread state is, which the kept Ensure is what
# prevents (and at interpreter exit they are cleared from the main thread). A foreign
# thread's exit runs no Python at all (CPython's GIL-state key has no destructor). So:
# - the state Ensure returned is kept per thread state (a ``threading.local``), and
#   ``release_thread_state`` gives it back on its own thread; host_call's callbacks do that
#   once ``KEEP_THREAD_STATES`` is False (the thread state then ends with that callback);
# - at interpreter exit ``Py_FinalizeEx`` clears and frees every thread state of the
#   interpreter, the kept ones included (no release needed or possible then);
# - a thread that ends before the process (its backend cleared) leaves its state until exit:
#   at most ``MAX_KEPT`` threads are kept, so that cost stays bounded.

KEEP_THREAD_STATES = True  # False: a callback on a kept thread gives its state back
MAX_KEPT = 64  # threads kept at most (XLA's pools: a few threads per backend)

_KEPT: set[int] = set()  # idents of the threads whose thread state is kept
_local = threading.local()  # .kept: the _Kept of this thread state


class _Kept:
  """What ``keep_thread_state`` holds in a thread state: the ``PyGILState_STATE`` that
  ``PyGILState_Ensure`` returned. Dropped with the thread state (a release, a Python
  thread's exit, interpreter exit), and the thread no longer counts as kept."""

  def __init__(self, ident: int, state: int):
    self.ident, self.state, self.kept = ident, state, _KEPT  # the set: alive at exit too
    self.kept.add(ident)

  def __del__(self):
    self.kept.discard(self.ident)


def keep_thread_state() -> None:
  """Keeps the calling thread's Python thread state alive between callbacks.

  Called from a foreign (XLA) thread inside a callback, where the GIL is held: one more
  ``PyGILState_Ensure``, so the callback's own release no longer deletes the thread state
  and the next callback on this thread reuses it instead of building a new one (a thread's
  ``threading.local`` values then last between its calls). Once per thread state; nothing
  once ``MAX_KEPT`` threads are kept.
  """
  if getattr(_local, "kept", None) is not None or len(_KEPT) >= MAX_KEPT:
    return
  _local.kept = _Kept(threading.get_ident(), ctypes.pythonapi.PyGILState_Ensure())


def release_thread_state() -> None:
  """Gives back the thread state ``keep_thread_state`` kept on the calling thread (nothing
  when it kept none). Must run on that thread: inside a callback the state lasts until the
  callback returns, then CPython deletes it as it would have without keeping."""
  kept = getattr(_local, "kept", None)
  if kept is not None:
    del _local.kept
    ctypes.pythonapi.PyGILState_Release(kept.state)


# ---------------------------------------------------------------- host_call


LEAN = True  # False: every host_call is io_callback(ordered=True) (read when traced;
# benchmarks/limits.py compares the two in one run)


def host_call(fn: Callable[..., Any], result_structs: Any, *args: jax.Array) -> Any:
  """``fn(*numpy_args)`` from inside ``jit``, ordered; returns ``result_structs``' pytree.

  ``args`` are arrays (not pytrees); ``fn`` returns a pytree of numpy arrays with the
  structure, shapes and dtypes of ``result_structs`` (``jax.ShapeDtypeStruct`` s).
  """
  bind = jax_internals.lean_callback() if LEAN else None
  if bind is None:
    return io_callback(fn, result_structs, *args, ordered=True)
  leaves, tree = jax.tree.flatten(result_structs)

  def flat_fn(*host_args):
    if KEEP_THREAD_STATES:
      keep_thread_state()
    else:
      release_thread_state()
    # copies: the env may keep the action, XLA reuses its buffers after the call
    return tuple(jax.tree.leaves(fn(*(np.array(a) for a in host_args))))

  return jax.tree.unflatten(tree, bind(flat_fn, leaves, *args))
