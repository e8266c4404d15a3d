"""Every use of JAX's private modules (``jax._src``) in batchrl, in one place.

Public JAX does not offer everything batchrl needs to be fast. Three hooks reach inside it,
each with a public path that gives the same results:

- ``backends_started``: whether JAX's backends exist yet (``xla_bridge``). Public path:
  None, "cannot tell" (callers then leave alone what must be set before the backends).
- ``lean_callback``: an ordered host-callback primitive without ``io_callback``'s per-call
  wrapping (``callback``, ``core``, ``dispatch``, ``mlir``; ``batchrl.envs.host_call``).
  Public path: ``jax.experimental.io_callback(..., ordered=True)``.
- ``unrolled_threefry`` / ``lower_unrolled``: the CPU lowering of JAX's random hash without
  its loop (``mlir``'s rule tables, ``random.threefry2x32``; ``batchrl.agent.fast_path``).
  Public path: JAX's own lowering.

One rule for all of them: if a hook cannot be installed on this JAX, or fails when a program
using it is lowered (any exception: a renamed attribute, a changed signature), the public
path runs instead for the rest of the process, and one warning (``InternalsWarning``, once
per hook per process) names the hook and the error. Only speed differs.
"""
from __future__ import annotations

import contextlib
import importlib
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np


class InternalsWarning(RuntimeWarning):
  """A hook into JAX's internals is off on this JAX: its public path runs instead."""


def _private(name: str) -> Any:
  """JAX's private module ``name``, or the ImportError saying why not (each hook needing it
  then fails to install, alone: another module moving does not turn off every hook)."""
  try:
    return importlib.import_module(name)
  except ImportError as e:
    return e


_xla_bridge = _private("jax._src.xla_bridge")
_callback = _private("jax._src.callback")
_core = _private("jax._src.core")
_dispatch = _private("jax._src.dispatch")
_mlir = _private("jax._src.interpreters.mlir")
_threefry = _private("jax._src.random.threefry2x32")


def _get(module: Any, *names: str) -> tuple:
  """Attributes of a private module; raises (so the hook falls back) when any is missing."""
  if isinstance(module, ImportError):
    raise module
  return tuple(getattr(module, name) for name in names)


_WARNED: set[str] = set()  # hooks whose fall-back was announced in this process


def _warn(hook: str, error: BaseException, public: str) -> None:
  if hook not in _WARNED:
    _WARNED.add(hook)
    warnings.warn(f"batchrl: the JAX-internals hook {hook!r} is off on JAX {jax.__version__} "
                  f"({type(error).__name__}: {error}); {public} instead (same results, "
                  "slower)", InternalsWarning, stacklevel=3)


class _Hook:
  """One hook: installed at first use; after its first failure, off for the process."""

  def __init__(self, name: str, public: str, install: Callable[[], Any]):
    self.name, self.public, self._install = name, public, install
    self._lock = threading.RLock()  # one install at a time (agents may compile in threads)
    self.reset()

  def reset(self) -> None:
    """Forgets the installed hook or its failure (tests: install again)."""
    self.value, self.error = None, None

  def get(self) -> Any:
    """What ``install`` returned, or None when the hook is off."""
    if self.value is None and self.error is None:
      with self._lock:
        if self.value is None and self.error is None:
          try:
            self.value = self._install()
          except Exception as e:  # the rule: any failure means the public path
            self.fail(e)
    return self.value

  def fail(self, error: BaseException) -> None:
    """Turns the hook off for good (the public path runs) and says so once."""
    self.value, self.error = None, error
    _warn(self.name, error, self.public)


# ---------------------------------------------------------------- backends_started


def backends_started() -> bool | None:
  """Whether JAX's backends exist already; None when this JAX cannot tell (no public API
  says it)."""
  try:
    return bool(_get(_xla_bridge, "backends_are_initialized")[0]())
  except Exception as e:  # any JAX that changed it: unknown
    _warn("backends_started", e, "settings that must precede the backends are skipped")
    return None


# ---------------------------------------------------------------- lean_callback
#
# A lowering failure happens inside the caller's ``jit``, after its program was traced with
# the lean primitive: nothing can retrace it from there, and a lowering rule that fell back
# to io_callback's lowering would lean on internals again (and could leave a half-emitted
# call behind: a callback emitted twice steps an env twice). So the hook proves itself
# instead: at first use it lowers, compiles and runs a tiny program (a scan of ordered calls)
# and checks the calls and results; on any failure it is off before the caller's program is
# traced, which then holds io_callback from the start. What the probe cannot meet, a lowering
# context of one program (partly automatic shard_map, several platforms at once), fails the
# same checks in io_callback's own lowering, so the public path would not help there.


def _emit_lean_callback(ctx, fn, args, effect, emit, op_sharding, token_set):
  """Emits one ordered call of ``fn`` (``io_callback``'s lowering without its wrapper)."""
  token = ctx.tokens_in.get(effect)
  result, token, _ = emit(
      ctx, fn, token, list(args), ctx.avals_in, ctx.avals_out, has_side_effect=True,
      returns_token=True,
      sharding=op_sharding(ctx.module_context.axis_context, None, ctx.avals_out))
  ctx.set_tokens_out(ctx.tokens_in.update_tokens(token_set({effect: token})))
  return result


def _install_lean_callback() -> Callable:
  emit, effect, op_sharding = _get(_callback, "emit_python_callback", "_OrderedIOEffect",
                                   "_callback_op_sharding")
  primitive_type, shaped_array = _get(_core, "Primitive", "ShapedArray")
  (needs_devices,) = _get(_dispatch, "prim_requires_devices_during_lowering")
  register_lowering, token_set = _get(_mlir, "register_lowering", "TokenSet")

  prim = primitive_type("batchrl_host_call")
  prim.multiple_results = True

  def abstract_eval(*avals, fn, result_avals):
    del avals, fn
    return result_avals, {effect}

  def lowering(ctx, *args, fn, result_avals):
    del result_avals
    # a module-level function, looked up per lowering: tests make it raise
    return _emit_lean_callback(ctx, fn, args, effect, emit, op_sharding, token_set)

  def impl(*args, fn, result_avals):  # outside jit: a plain call
    del result_avals
    return fn(*args)

  prim.def_effectful_abstract_eval(abstract_eval)
  prim.def_impl(impl)
  needs_devices.add(prim)  # as io_callback's: the callback is placed on a device
  register_lowering(prim, lowering, cacheable=False)

  def bind(fn: Callable, structs, *args) -> list:
    avals = tuple(shaped_array(s.shape, s.dtype) for s in structs)
    return prim.bind(*args, fn=fn, result_avals=avals)

  _probe_lean_callback(bind)
  return bind


def _probe_lean_callback(bind: Callable) -> None:
  """Lowers, compiles and runs a scan of three ordered calls through ``bind``; raises
  unless the calls came in order with the right arguments and results."""
  seen = []

  def fn(count, scale):
    seen.append((int(count), float(scale)))
    return np.int32(count * 2), np.full(2, scale, np.float32)

  structs = (jax.ShapeDtypeStruct((), np.int32), jax.ShapeDtypeStruct((2,), np.float32))

  def body(count, _):
    doubled, scale = bind(fn, structs, count, jax.lax.convert_element_type(count, np.float32))
    return count + 1, (doubled, scale)

  program = jax.jit(lambda c: jax.lax.scan(body, c, None, length=3)[1])
  # run now, eagerly, though usually called while the caller's program is traced: else
  # the call (and the runtime token of ordered effects) would be staged into that program
  # (lowered and compiled explicitly: under ``jax.disable_jit`` a call would not lower)
  with jax.ensure_compile_time_eval():
    doubled, scale = program.lower(np.int32(1)).compile()(np.int32(1))
  if (seen != [(1, 1.0), (2, 2.0), (3, 3.0)] or np.asarray(doubled).tolist() != [2, 4, 6]
      or np.asarray(scale).tolist() != [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]):
    raise RuntimeError(f"the probe program's calls went wrong: {seen}, {doubled}, {scale}")


LEAN_CALLBACK = _Hook("lean_callback", "jax.experimental.io_callback(ordered=True) runs",
                      _install_lean_callback)


def lean_callback() -> Callable | None:
  """``bind(flat_fn, structs, *args) -> list`` of the lean ordered host callback, or None
  when the hook is off (then use ``io_callback(..., ordered=True)``).

  ``flat_fn`` gets numpy views of the arguments (valid during the call only) and returns a
  tuple of arrays with the shapes and dtypes of ``structs`` (checked, as for io_callback).
  Calls are ordered as ``io_callback(..., ordered=True)`` calls are (the same effect and
  token). No vmap, no autodiff (errors). The first call probes the hook (see above)."""
  return LEAN_CALLBACK.get()


# ---------------------------------------------------------------- unrolled threefry
#
# JAX's CPU lowering keeps its threefry hash's five rounds in a loop, to compile big programs
# faster; in a program as small as one act, running that loop costs more than the rest of
# the policy (measured: 2-2.5 µs of a ~25 µs act + observe). Other platforms get the
# unrolled rule; swapping it into the CPU table while a program is lowered gives the same
# bits (integer arithmetic) without the loop.


def _install_unrolled_threefry() -> tuple:
  tables, entry_type = _get(_mlir, "_platform_specific_lowerings", "LoweringRuleEntry")
  prim, unrolled = _get(_threefry, "threefry2x32_p", "_threefry2x32_lowering_rule")
  table = tables.get("cpu")
  if table is None or prim not in table:
    raise LookupError("JAX's CPU lowering table has no threefry2x32 rule to replace")
  return table, prim, entry_type(unrolled, False)


UNROLLED_THREEFRY = _Hook("unrolled_threefry", "JAX's own (rolled) CPU lowering runs",
                          _install_unrolled_threefry)
_swap_lock = threading.RLock()  # one swap at a time (agents may compile in threads)


@contextlib.contextmanager
def unrolled_threefry() -> Iterator[None]:
  """Inside, JAX lowers its threefry hash for the CPU unrolled, as for other platforms
  (nothing changes when the hook is off). Prefer ``lower_unrolled``: it also falls back
  when the lowering fails."""
  swap = UNROLLED_THREEFRY.get()
  if swap is None:
    yield
    return
  table, prim, entry = swap
  with _swap_lock:
    rolled = table[prim]
    table[prim] = entry
    try:
      yield
    finally:
      table[prim] = rolled


def lower_unrolled(program, *args):
  """``program`` (a ``jax.jit``) once lowered for arguments like ``args`` with the hash
  unrolled: its first call with such arguments finds that lowering in JAX's cache (were it
  not found, the call lowers it again the usual way: slower, same results).

  When lowering fails with the swap but not without it, the hook is at fault: it is turned
  off (one warning) and the program keeps JAX's lowering. A program that fails either way
  raises its own error."""
  if UNROLLED_THREEFRY.get() is None:
    return program
  try:
    with unrolled_threefry():
      program.lower(*args)
  except Exception as e:  # the rule: any failure means the public path
    program.lower(*args)  # raises when the program itself is at fault
    UNROLLED_THREEFRY.fail(e)
  return program
