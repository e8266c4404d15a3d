"""``start_cpu_backend(threads)``: JAX's CPU backend with fewer pool threads (``run.xla_threads``).

Why: a training program over host envs is a chain of small kernels around one host
callback per step (``batchrl.envs.host_call``). With XLA's default pool (one thread per
CPU) the chain and the Python callback hop between the pool's threads, and so between
cores: each hop wakes a thread, runs it on a cold cache, and leaves the other spinning.
Measured on the 2-core CPU, ``a2c_cartpole``'s compiled step (8 CartPoles, act, store,
update every 5 steps): about 265-340 us of CPU per step with 2 threads, 200 with one; the
same program over an in-graph env 45 us against 27. A run stays deterministic for a given
setting, but two settings may differ in float rounding: XLA splits some kernels by the pool's
size. ``a2c_cartpole`` and ``ppo_mujoco`` (61k HalfCheetah steps) gave the same metrics bit
for bit with 1 and 2 threads; ``trpo_cheetah`` did not (100k steps: final eval 1154 with
2 threads, 1672 with one, each reproducible), so it keeps JAX's default.

How: XLA sizes its pool by the CPUs this process may run on when the backend starts
(``sched_getaffinity``), and JAX offers no other knob. So the backend is started while the
process may use ``threads`` CPUs only, then every thread gets its CPUs back (the new ones,
the pool's, all those the process had): the pool is smaller, nothing stays pinned. It only
works before anything started the backend (``batchrl train`` builds the trainer first);
otherwise, and off Linux, it does nothing and says so by returning False. Whether the
backend runs is read from JAX's internals (``jax_internals.backends_started``: no public API
says it); a JAX where that fails is treated as started, so the setting is then skipped,
never wrong.
"""
from __future__ import annotations

import os

import jax

from batchrl import jax_internals


def backend_started() -> bool:
  """Whether JAX's backends exist already (True when this JAX cannot tell: then nothing is
  changed)."""
  return jax_internals.backends_started() is not False


def start_cpu_backend(threads: int | None) -> bool:
  """Starts JAX's backends with ``threads`` CPU threads in XLA's pool; False (nothing done)
  when ``threads`` is None or not below the CPUs available, the backends already run, or
  the platform cannot set CPU affinity."""
  if threads is None or not hasattr(os, "sched_setaffinity") or backend_started():
    return False
  allowed = os.sched_getaffinity(0)
  if threads >= len(allowed):
    return False
  before = {tid: _affinity(tid) for tid in _threads()}
  os.sched_setaffinity(0, set(sorted(allowed)[:threads]))
  try:
    jax.devices()
  finally:  # threads that existed get their CPUs back, the new ones (XLA's) this thread's
    for tid in _threads():
      _set_affinity(tid, before.get(tid) or allowed)
  return True


def _threads() -> list[int]:
  """Ids of this process's threads (just this one, as 0, without /proc)."""
  try:
    return [int(tid) for tid in os.listdir("/proc/self/task")]
  except OSError:
    return [0]


def _affinity(tid: int) -> set[int] | None:
  try:
    return os.sched_getaffinity(tid)
  except OSError:  # the thread ended meanwhile
    return None


def _set_affinity(tid: int, cpus: set[int]) -> None:
  try:
    os.sched_setaffinity(tid, cpus)
  except OSError:  # the thread ended meanwhile
    pass
