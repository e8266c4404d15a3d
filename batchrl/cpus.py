"""``usable_cpus()``: the CPUs this process may run on. Its own module, free of JAX, because
the batch env's parent side (which never imports JAX), the CPU thread settings and the
splitting of a batch over cores (``batchrl.parts``) all size themselves by it."""
from __future__ import annotations

import os


def usable_cpus() -> int:
  """The CPUs this process may run on (its affinity on Linux, else all of them)."""
  return len(usable_cpu_ids())


def usable_cpu_ids() -> list[int]:
  """The ids of those CPUs, sorted (on systems without affinity: 0 to count - 1)."""
  try:
    return sorted(os.sched_getaffinity(0))
  except AttributeError:  # not on Linux
    return list(range(os.cpu_count() or 1))
