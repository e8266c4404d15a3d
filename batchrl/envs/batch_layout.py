"""Where a BatchEnv's batch arrays live: one block of bytes, numpy views into it.

With workers the block is shared memory: workers write observations, rewards,
terminated/truncated and final observations of their envs in place, the parent writes the
actions, and a step's messages carry almost nothing. The memory is an unnamed file handed
to the workers as a file descriptor: nothing is left in /dev/shm even if every process is
killed, and no resource tracker is involved. In-process it is a plain bytearray, so
both modes share one code path. Spaces without a fixed-size array form (Dict, Tuple, ...)
have no place here; their values travel pickled.
"""
from __future__ import annotations

import dataclasses
import mmap
import os
import tempfile

import gymnasium as gym
import numpy as np

FLAT_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
               gym.spaces.MultiBinary)


def item_shape_dtype(space: gym.Space) -> tuple[tuple[int, ...], np.dtype]:
  """Shape and dtype of one value of a flat space (``()`` for Discrete)."""
  if isinstance(space, gym.spaces.Discrete):
    return (), np.dtype(space.dtype)
  return tuple(space.shape), np.dtype(space.dtype)


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where each batch array lives inside one block of bytes: (name, shape, dtype, offset).

  Arrays: ``rewards`` [N] float64, ``terminated``/``truncated`` [N] bool, ``progress``
  [W] int64 (the env each worker is busy with, to name it if the worker dies or hangs),
  and for flat spaces ``obs``/``final_obs`` [N, *obs_shape] and ``actions`` [N, *act_shape].
  """

  fields: tuple[tuple[str, tuple[int, ...], str, int], ...]
  nbytes: int

  @classmethod
  def build(cls, num_envs: int, num_slots: int, obs_space, act_space) -> "Layout":
    specs = [("rewards", (num_envs,), np.dtype(np.float64)),
             ("terminated", (num_envs,), np.dtype(np.bool_)),
             ("truncated", (num_envs,), np.dtype(np.bool_)),
             ("progress", (num_slots,), np.dtype(np.int64))]
    if isinstance(obs_space, FLAT_SPACES):
      shape, dtype = item_shape_dtype(obs_space)
      specs += [("obs", (num_envs, *shape), dtype), ("final_obs", (num_envs, *shape), dtype)]
    if isinstance(act_space, FLAT_SPACES):
      shape, dtype = item_shape_dtype(act_space)
      specs.append(("actions", (num_envs, *shape), dtype))
    fields, offset = [], 0
    for name, shape, dtype in specs:
      offset = -(-offset // 64) * 64  # cache-line aligned
      fields.append((name, shape, dtype.str, offset))
      offset += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return cls(tuple(fields), max(offset, 1))

  def views(self, buffer) -> "Buffers":
    arrays = {name: np.ndarray(shape, np.dtype(dtype), buffer=buffer, offset=offset)
              for name, shape, dtype, offset in self.fields}
    return Buffers(arrays)


class Buffers:
  """Numpy views of the batch arrays; ``obs``/``final_obs``/``actions`` are None for spaces
  without a fixed-size array form (Dict, Tuple, ...), which travel pickled instead."""

  __slots__ = ("obs", "final_obs", "actions", "rewards", "terminated", "truncated", "progress")

  def __init__(self, arrays: dict[str, np.ndarray]):
    for name in self.__slots__:
      setattr(self, name, arrays.get(name))


def create_block(nbytes: int) -> tuple[int, mmap.mmap]:
  """A new zeroed block of shared memory: (file descriptor to send to workers, mapping)."""
  if hasattr(os, "memfd_create"):
    fd = os.memfd_create("batchrl-batch", os.MFD_CLOEXEC)
  else:  # no memfd (not Linux): a temporary file, unlinked at once, does the same
    fd, path = tempfile.mkstemp(prefix="batchrl-batch-")
    os.unlink(path)
  try:
    os.ftruncate(fd, nbytes)
    return fd, mmap.mmap(fd, nbytes)
  except BaseException:
    os.close(fd)
    raise


def attach_block(fd: int, nbytes: int) -> mmap.mmap:
  """Maps a block received from the parent (and closes the descriptor, which the mapping
  no longer needs)."""
  try:
    return mmap.mmap(fd, nbytes)
  finally:
    os.close(fd)
