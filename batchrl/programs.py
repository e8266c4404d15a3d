"""Compiled programs on batchrl's terms: ``jit(fun, kind)`` compiles with XLA options for
that kind of program, ``compile_ahead`` compiles one on an idle core before it is needed.

Compilation is most of a short run's time on a CPU, so a run's programs are compiled by
``jit(fun, kind)`` with ``compiler_options(kind)``: XLA's legacy loop emitters on the CPU
(measured on fused CartPole PPO: the training chunk compiles in about half the time of the
newer fusion emitters and runs as fast), and for programs that run once or briefly
(``"once"``: ``init_sim``, evaluation, summaries) no LLVM optimization as well (init 2.3 ->
0.4 s, evaluation 1.8 -> 0.3 s). ``BATCHRL_FAST_COMPILE=0`` keeps XLA's defaults;
``BATCHRL_FAST_COMPILE=all`` compiles every program as ``"once"``, for runs that only check
that a config builds and trains (the named-config tests): SAC's MuJoCo training chunk then
compiles in 2.7 s instead of 5.6 s, DroQ's in 4.3 s instead of 12 s, and runs slower.

YNNPACK (CPU): ``_YNN`` names the operations XLA hands to it, whatever this jaxlib's
default list: dots and reductions, never convolutions. YNNPACK runs each convolution on a
single core and, with 'valid' padding, slowly; measured on the 2-core CPU where a jaxlib
sent convolutions there, the Nature CNN ('valid'): a PPO update of 1024 frames (16 gradient
steps of 256, in shares of 64) 4.2 s -> 2.9 s with them on XLA's own multi-threaded
kernels; a forward pass of 8 frames 3 -> 2 ms. jaxlib 0.10.2's default list is empty, so
there ``_YNN`` turns YNNPACK on for dots and reductions (SAC's MuJoCo update, paired runs:
no measurable difference either way).
"""
from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Callable

import jax
import jax.numpy as jnp

# XLA options per kind of program (CPU only): "loop" programs run many times (training
# chunks), "once" programs run once or for a moment (init, evaluation, summaries), "long"
# programs run for minutes or hours (the chunks of long host-env runs), where XLA's fusion
# emitters are worth their longer compile: sac_mujoco's chunk ~10% faster a step (paired
# runs, 2 cores: median 8.4 against 9.5 ms), compiling 0.4-2 s longer (SAC, TD3).
_YNN = {"xla_cpu_experimental_ynn_fusion_type":  # dots and reductions, never convs (above)
        "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"}
_CPU_OPTIONS = {
    "loop": {"xla_cpu_use_fusion_emitters": False, **_YNN},
    "once": {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0, **_YNN},
    "long": {"xla_cpu_use_fusion_emitters": True, **_YNN},
}
FAST_COMPILE_ENV = "BATCHRL_FAST_COMPILE"  # "0": XLA's defaults; "all": every kind as "once"


def compiler_options(kind: str) -> dict:
  """The XLA options ``jax.jit(..., compiler_options=...)`` gets for a ``kind`` of program.

  ``kind`` is ``"loop"`` (run many times: keep full optimization), ``"once"`` (run once
  or briefly: optimize nothing) or ``"long"`` (run for minutes: XLA's fusion emitters as
  well). Empty off the CPU or with ``BATCHRL_FAST_COMPILE=0``; ``"once"``'s whatever the
  kind with ``BATCHRL_FAST_COMPILE=all``. An option this jaxlib does not know is left out
  (checked once on a tiny program).
  """
  if kind not in _CPU_OPTIONS:
    raise ValueError(f"Unknown program kind {kind!r}; valid: {', '.join(_CPU_OPTIONS)}.")
  known = _known_options()
  if os.environ.get(FAST_COMPILE_ENV) == "all":
    kind = "once"
  return {name: value for name, value in _CPU_OPTIONS[kind].items() if name in known}


@functools.cache
def _known_options() -> frozenset:
  """The options of ``_CPU_OPTIONS`` this jaxlib takes (each tried on a tiny program when
  all of them together fail); none off the CPU or with ``BATCHRL_FAST_COMPILE=0``."""
  if os.environ.get(FAST_COMPILE_ENV, "1") == "0" or jax.default_backend() != "cpu":
    return frozenset()
  every = {k: v for options in _CPU_OPTIONS.values() for k, v in options.items()}
  if _compiles(every):
    return frozenset(every)
  return frozenset(k for k, v in every.items() if _compiles({k: v}))


def _compiles(options: dict) -> bool:
  try:
    jax.jit(lambda: jnp.zeros(()), compiler_options=options).lower().compile()
  except Exception:  # an unknown option: XLA's defaults still work
    return False
  return True


def jit(fun: Callable, kind: str, **jit_kwargs) -> Callable:
  """``jax.jit(fun, **jit_kwargs)`` compiled with ``compiler_options(kind)``.

  JAX takes compiler options only on the outermost ``jit``: called inside another
  transformation (any argument a tracer), ``fun`` is jitted plainly and the outer program's
  options apply. ``lower``/``trace``/``eval_shape`` are those of the top-level function.
  The options are read at the first use, not here: a module may define its programs at
  import without starting JAX's backend (``run.xla_threads`` must come first).
  """
  if kind not in _CPU_OPTIONS:
    raise ValueError(f"Unknown program kind {kind!r}; valid: {', '.join(_CPU_OPTIONS)}.")

  # One pair of jitted functions per set of options, the options read at each call: a
  # program defined at import and first called under BATCHRL_FAST_COMPILE=all (a test)
  # keeps its optimized compilation for the calls made without it.
  @functools.cache
  def jitted_with(options: tuple) -> tuple[Callable, Callable]:
    top = jax.jit(fun, compiler_options=dict(options) or None, **jit_kwargs)
    return top, (jax.jit(fun, **jit_kwargs) if options else top)

  def jitted() -> tuple[Callable, Callable]:
    return jitted_with(tuple(sorted(compiler_options(kind).items())))

  @functools.wraps(fun)
  def call(*args, **kwargs):
    top, nested = jitted()
    traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs)))
    return (nested if traced else top)(*args, **kwargs)

  call.lower = lambda *args, **kwargs: jitted()[0].lower(*args, **kwargs)
  call.trace = lambda *args, **kwargs: jitted()[0].trace(*args, **kwargs)
  call.eval_shape = lambda *args, **kwargs: jitted()[0].eval_shape(*args, **kwargs)
  return call


def jit_now(fun: Callable, kind: str, **jit_kwargs) -> Callable:
  """``jax.jit(fun, **jit_kwargs)`` with ``compiler_options(kind)`` read now: a plain
  ``jax.jit``, for programs built when they are about to run and called where every
  microsecond counts (the object API's act costs tens of them; ``jit``'s per-call check for
  tracers would add several). Never call it inside another transformation: JAX takes
  compiler options only on the outermost program."""
  return jax.jit(fun, compiler_options=compiler_options(kind) or None, **jit_kwargs)


def compile_ahead(lower: Callable) -> threading.Thread:
  """Compiles what ``lower()`` lowers (``lambda: program.lower(*args)``, ``program`` a
  ``jit``) in a thread, and returns the thread: ``join()`` it before the program's first
  call with such arguments, which then finds the program in JAX's cache.

  Why: XLA compiles a program on one core, and a run's training chunk (compiling, or
  running on one core) leaves the others idle, so a program needed later (evaluation, the
  Ray learner's update) compiles there for free. A failure loses only the head start: the
  first call compiles as it would have.
  """
  def work():
    try:
      lower().compile()
    except Exception as e:  # the first call compiles instead
      logging.getLogger("batchrl").debug("not compiled ahead: %s", e)

  # Not a daemon: the interpreter waits for it at exit. A daemon thread still compiling
  # then (a run that ends before its first evaluation: already complete, or failed) is
  # stopped inside XLA's C++ code, which aborts the whole process (exit code 134).
  thread = threading.Thread(target=work, daemon=False, name="batchrl-compile-ahead")
  thread.start()
  return thread
