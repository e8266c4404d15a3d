"""A batch run as equal parts side by side, one per CPU core: the independent lanes of a
vmapped program (seeds of ``--seeds``, trials of ``tune --batch-trials``), or the halves of
a minibatch whose gradient is a mean (PPO's host update loop).

Why: XLA:CPU runs the small kernels of such a program on one core, so one program over
every lane leaves the other cores idle (16 ``cartpole_fused`` trials on 2 cores: 180k env
steps/s as one program, 280k as two halves in two threads). Each part runs the same
compiled program (equal shapes: the last part is padded with copies of the last lane,
computed and dropped), in its own thread; a GPU runs the whole stack as one program.
Lanes never interact, so a lane's results are those of the whole stack up to float rounding
(XLA may vectorize another batch size differently).
"""
from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

from batchrl.cpus import usable_cpus


def largest_divisor(n: int, at_most: int) -> int:
  """The largest divisor of ``n`` not above ``at_most`` (1 at least)."""
  return max(d for d in range(1, max(1, min(n, at_most)) + 1) if n % d == 0)


@dataclasses.dataclass(frozen=True)
class LaneSplit:
  """``lanes`` lanes in ``count`` parts of ``size`` (the last one padded)."""

  lanes: int
  count: int

  @classmethod
  def for_backend(cls, lanes: int) -> "LaneSplit":
    """One part per usable core on the CPU backend; one part elsewhere."""
    cores = usable_cpus() if jax.default_backend() == "cpu" else 1
    return cls(lanes, max(1, min(lanes, cores)))

  @classmethod
  def unpadded(cls, lanes: int) -> "LaneSplit":
    """As many equal parts as the CPU backend has usable cores and ``lanes`` divides into
    (no padding: for a mean over the whole batch, each part an equal share); one part on
    other backends."""
    cores = usable_cpus() if jax.default_backend() == "cpu" else 1
    return cls(lanes, largest_divisor(lanes, cores))

  @property
  def size(self) -> int:
    return -(-self.lanes // self.count)

  def split(self, tree) -> list:
    """A tree whose leaves have a leading lane axis -> one tree per part."""
    if self.count == 1:
      return [tree]
    pad = self.size * self.count - self.lanes

    def padded(x):
      return jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]) if pad else x

    tree = jax.tree.map(padded, tree)
    return [jax.tree.map(lambda x, p=p: x[p * self.size:(p + 1) * self.size], tree)
            for p in range(self.count)]

  def join(self, trees: list):
    """The parts' trees (on the device) as one tree over the real lanes."""
    if self.count == 1:
      return trees[0]
    return jax.tree.map(lambda *xs: jnp.concatenate(xs)[:self.lanes], *trees)

  def join_host(self, trees: list):
    """The parts' host results (numpy) as one tree over the real lanes."""
    if self.count == 1:
      return trees[0]
    return jax.tree.map(lambda *xs: np.concatenate(xs)[:self.lanes], *trees)

  def locate(self, lane: int) -> tuple[int, int]:
    """(part, index in the part) of ``lane``."""
    return divmod(lane, self.size)


class PartRunner:
  """Runs a function over the parts, each call in its own thread (``with`` closes them)."""

  def __init__(self, parts: LaneSplit):
    self.parts = parts
    self._pool = ThreadPoolExecutor(parts.count, thread_name_prefix="batchrl-lanes")

  def each(self, fn, *per_part) -> list:
    """``fn(*args)`` for every part's ``args``, waited for in the part's thread so the
    parts' programs run side by side."""
    if self.parts.count == 1:
      return [jax.block_until_ready(fn(*args)) for args in zip(*per_part)]
    return list(self._pool.map(lambda args: jax.block_until_ready(fn(*args)), zip(*per_part)))

  def map(self, fn, items: list) -> list:
    """``[fn(item) for item in items]``, in order: the items in consecutive groups of equal
    size (the last may be smaller), one group per thread, each call waited for there."""
    size = -(-len(items) // self.parts.count)
    groups = [items[i:i + size] for i in range(0, len(items), size)]
    run = lambda group: [jax.block_until_ready(fn(item)) for item in group]
    return [out for outs in self.each(run, groups) for out in outs]

  def close(self) -> None:
    self._pool.shutdown(wait=True)

  def __enter__(self) -> "PartRunner":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
