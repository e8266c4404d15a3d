"""The environments of one worker (or of an in-process BatchEnv), and a worker's command loop.

An ``EnvGroup`` builds, steps, auto-resets (as its ``AutoresetMode`` says), resets and
restarts its envs, writing their results into the batch arrays (``batch_layout``); what does
not fit there (infos, which envs ended an episode, errors, observations of non-array spaces)
comes back as a ``Report``. Exceptions raised by an env are caught and reported with its
index, so one failing env never hides the results of the others.

``serve_group`` is a worker process's main: build the group, say READY with its spaces,
then answer commands (STEP on the hot path: a header in, a header out when nothing
happened beyond the shared arrays) until CLOSE.
"""
from __future__ import annotations

import os
import pickle
import select
import time
from typing import Any, NamedTuple, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from batchrl.envs import launch, process
from batchrl.envs.batch_infos import info_block, info_columns
from batchrl.envs.batch_layout import Buffers, attach_block
from batchrl.envs.process import (
  ATTACH,
  CALL,
  CLOSE,
  EXCEPTION,
  HEADER,
  READY,
  RESET,
  RESTART,
  RESULT,
  SETATTR,
  STEP,
  EnvWorkerError,
  ErrorRecord,
  SpaceMismatchError,
)


class Report(NamedTuple):
  """What a command produced beyond the shared arrays (None where there is nothing)."""

  infos: dict | None = None  # info columns (see info_columns)
  info_block: tuple | None = None  # or all infos as one record block (see info_block)
  ended: list | None = None  # envs whose episode ended this step (final obs were written)
  final_infos: dict | None = None  # their final infos, as columns
  errors: list | None = None  # (env index, ErrorRecord)
  loose_obs: dict | None = None  # env index -> obs, for observation spaces not in shared memory
  loose_final: dict | None = None


EMPTY = Report()


class GroupSpec(NamedTuple):
  """What a group tells the BatchEnv once its envs are built."""

  spaces: list  # (observation space, action space) of each env, in env order
  metadata: dict  # the first env's metadata and render mode (a batch reports env 0's)
  render_mode: Any


class EnvGroup:
  """Builds, steps, auto-resets, resets and restarts a list of envs, writing into buffers.

  Exceptions raised by an env are caught and reported per env index, so one failing env
  never hides the results of the others.

  Auto-reset follows ``gymnasium.vector.SyncVectorEnv`` for each ``AutoresetMode``:
  SAME_STEP resets an env in the step that ended its episode (final obs and info reported);
  NEXT_STEP resets it on the following step instead of stepping it (reward 0, flags False,
  the reset's info); DISABLED never resets (the BatchEnv refuses to step an ended env). The
  env "ended last step" is read from the shared terminated/truncated arrays, which hold
  exactly Gymnasium's flags: the last step's, cleared by a reset, set by a restart.
  """

  def __init__(self, constructors: Sequence, indices: Sequence[int], slot: int,
               autoreset_mode: AutoresetMode = AutoresetMode.SAME_STEP,
               keep_infos: bool = True, int_actions: bool = True):
    self.keep_infos = keep_infos  # False: the envs' info dicts are dropped (BatchEnv(infos=))
    # Discrete actions from shared memory as Python ints (batchrl's own), or as the numpy
    # scalars Gymnasium's vector envs hand out (BatchEnv(check_actions=False)).
    self.int_actions = int_actions
    self.same_step = autoreset_mode == AutoresetMode.SAME_STEP
    self.next_step = autoreset_mode == AutoresetMode.NEXT_STEP
    self.constructors = list(constructors)
    self.indices = [int(i) for i in indices]
    self.pairs = list(enumerate(self.indices))  # (local, env index), in env order
    self.local = {i: j for j, i in enumerate(self.indices)}
    self.slot = slot
    self.envs: list[Any] = [None] * len(self.indices)
    self.bufs: Buffers | None = None
    self.keepalive = None  # the shared memory the views point into
    self.env_spaces: list = [None] * len(self.indices)  # each env's (obs, action) spaces
    self.discrete_actions = False
    # Observations of spaces that are not in shared memory, handed over with each reply.
    self._loose_obs: dict = {}
    self._loose_final: dict = {}
    self._record_types: dict = {}  # info layout -> record dtype and descr, see info_block

  def build(self) -> GroupSpec:
    """Constructs every env; raises EnvWorkerError naming the env that failed.

    Spaces are compared by the BatchEnv, which sees every group's (and knows the
    observation mode): a mismatch is the same error however the envs are split."""
    for j, i in enumerate(self.indices):
      try:
        self.envs[j] = process.make_env(self.constructors[j])
        self.env_spaces[j] = (self.envs[j].observation_space, self.envs[j].action_space)
      except Exception as exc:
        raise ErrorRecord.current(i).to_error(i, "construction") from exc
    self.discrete_actions = self.int_actions and isinstance(self.env_spaces[0][1],
                                                            gym.spaces.Discrete)
    first = self.envs[0]
    return GroupSpec(self.env_spaces, dict(getattr(first, "metadata", None) or {}),
                     getattr(first, "render_mode", None))

  def attach(self, bufs: Buffers, keepalive=None) -> None:
    self.bufs, self.keepalive = bufs, keepalive

  def step(self, actions: list | None = None) -> Report:
    """Steps every env once (actions from the shared buffer, or ``actions`` in order)."""
    bufs, progress, slot = self.bufs, self.bufs.progress, self.slot
    buffered, discrete, same_step = bufs.actions, self.discrete_actions, self.same_step
    pairs, infos, errors = self.pairs, None, None
    if self.next_step:  # before the loop, so that the default mode's loop pays nothing
      pairs, infos, errors = self._reset_ended()
    finals = None
    for j, i in pairs:
      progress[slot] = i  # lets the parent name the env if this process dies or hangs
      if actions is not None:
        action = actions[j]
      else:  # a copy (of a row, or a numpy scalar): an env may keep its action
        action = int(buffered[i]) if discrete else buffered[i].copy()
      try:
        env = self.envs[j]
        obs, reward, terminated, truncated, info = env.step(action)
        if (terminated or truncated) and same_step:
          final_obs, final_info = obs, info
          obs, info = env.reset()
          self._put_final(i, final_obs)
          finals = finals or []
          finals.append((i, final_info))
        self._put_obs(i, obs)
      except Exception:
        errors = errors or []
        errors.append((i, ErrorRecord.current(i)))
        continue
      bufs.rewards[i], bufs.terminated[i], bufs.truncated[i] = reward, terminated, truncated
      if info:
        infos = infos or []
        infos.append((i, info))
    if pairs is not self.pairs:  # resets came first: info columns want env order
      infos, errors = _in_env_order(infos), _in_env_order(errors)
    return self._report(infos, finals, errors)

  def _reset_ended(self) -> tuple[list, list | None, list | None]:
    """NEXT_STEP: envs whose last step ended an episode are reset instead of stepped (their
    action ignored; reward 0, flags False, the reset's obs and info), as in SyncVectorEnv.

    Returns the (local, env index) pairs left to step, and the resets' infos and errors.
    """
    bufs = self.bufs
    ended = (bufs.terminated[self.indices] | bufs.truncated[self.indices]).tolist()
    if not any(ended):
      return self.pairs, None, None
    reset = [i for i, done in zip(self.indices, ended) if done]
    infos, errors = self._reset_envs([(i, None) for i in reset], None)
    bufs.rewards[reset] = 0.0
    return [pair for pair, done in zip(self.pairs, ended) if not done], infos, errors

  def reset(self, targets: Sequence[tuple[int, int | None]], options: dict | None) -> Report:
    """Resets the envs in ``targets`` ((env index, seed) pairs)."""
    infos, errors = self._reset_envs(targets, options)
    return self._report(infos, None, errors)

  def _reset_envs(self, targets, options) -> tuple[list | None, list | None]:
    """Resets envs, writing their observations; returns their (infos, errors)."""
    infos = errors = None
    bufs = self.bufs
    for i, seed in targets:
      bufs.progress[self.slot] = i
      bufs.terminated[i] = bufs.truncated[i] = False  # a reset env owes no auto-reset
      try:
        obs, info = self.envs[self.local[i]].reset(seed=seed, options=options)
        self._put_obs(i, obs)
      except Exception:
        errors = errors or []
        errors.append((i, ErrorRecord.current(i)))
        continue
      if info:
        infos = infos or []
        infos.append((i, info))
    return infos, errors

  def restart(self, i: int, seed: int | None) -> Report:
    """Replaces env ``i`` with a freshly constructed one and resets it."""
    j = self.local[i]
    old, self.envs[j] = self.envs[j], None
    close_quietly(old)
    self.bufs.progress[self.slot] = i
    try:
      env = process.make_env(self.constructors[j])
      spaces = (env.observation_space, env.action_space)
      if spaces != self.env_spaces[j]:
        raise SpaceMismatchError(space_mismatch(i, spaces, i, self.env_spaces[j],
                                                "the env it replaces"))
      self.envs[j] = env
    except Exception:
      return self._report(None, None, [(i, ErrorRecord.current(i))])
    return self.reset([(i, seed)], None)

  def call(self, requests: Sequence[tuple[int, str, tuple, dict]]) -> list:
    """Per request (env index, name, args, kwargs): the attribute ``name`` found through the
    env's wrappers, called with the arguments if it is callable, as Gymnasium's ``call``."""
    results = []
    for i, name, args, kwargs in requests:
      value = _wrapper_attr(self.envs[self.local[i]], name)
      results.append(value(*args, **kwargs) if callable(value) else value)
    return results

  def set_attrs(self, requests: Sequence[tuple[int, str, Any]]) -> None:
    """Per request (env index, name, value): sets it where the wrappers have it, as
    Gymnasium's ``set_attr`` (``set_wrapper_attr``)."""
    for i, name, value in requests:
      env = self.envs[self.local[i]]
      if hasattr(env, "set_wrapper_attr"):
        env.set_wrapper_attr(name, value)
      else:
        setattr(env, name, value)

  def _put_obs(self, i: int, obs) -> None:
    if self.bufs.obs is not None:
      self.bufs.obs[i] = obs
    else:
      self._loose_obs[i] = obs

  def _put_final(self, i: int, obs) -> None:
    # Gymnasium hands out the env's own object as the final observation: only an array that
    # the shared buffer holds exactly goes there; anything else (a Python int, another
    # dtype) travels as it is.
    final = self.bufs.final_obs
    if (final is not None and type(obs) is np.ndarray and obs.dtype == final.dtype
        and obs.shape == final.shape[1:]):
      final[i] = obs
    else:
      self._loose_final[i] = obs

  def _report(self, infos, finals, errors) -> Report:
    if not self.keep_infos:  # which envs ended is kept: final observations go with it
      infos, finals = None, finals and [(i, {}) for i, _ in finals]
    loose_obs = loose_final = None
    if self.bufs.obs is None:  # hand over (and forget) the observations of this command
      loose_obs, self._loose_obs = self._loose_obs, {}
    if self._loose_final:
      loose_final, self._loose_final = self._loose_final, {}
    if (infos is None and finals is None and errors is None and loose_obs is None
        and loose_final is None):
      return EMPTY
    # Columns are built here, in the worker, where the work runs in parallel.
    block = info_block(infos, self._record_types) if infos and len(infos) == len(
        self.indices) else None
    return Report(info_columns(infos) if infos and block is None else None, block,
                   [i for i, _ in finals] if finals else None,
                   info_columns(finals) if finals else None,
                   errors, loose_obs, loose_final)

  def close(self) -> None:
    for env in self.envs:
      close_quietly(env)
    self.envs = [None] * len(self.indices)
    self.bufs = None  # drop the views before the memory they point into is closed
    if self.keepalive is not None:
      try:
        self.keepalive.close()
      except BufferError:  # a view is still referenced; the OS unmaps at process exit
        pass
      self.keepalive = None


def _in_env_order(pairs: list | None) -> list | None:
  return None if pairs is None else sorted(pairs, key=lambda pair: pair[0])


def space_mismatch(i, spaces, first, expected, which: str = "") -> str:
  other = which or f"environment {first}"
  return (f"environment {i} has observation/action spaces {spaces[0]} / {spaces[1]}, but "
          f"{other} has {expected[0]} / {expected[1]}; all environments of a "
          "BatchEnv must share their spaces")


def _wrapper_attr(env, name: str):
  """``env.get_wrapper_attr(name)``: the attribute of the innermost wrapper (or env) that has
  it, as Gymnasium's vector envs read attributes; plain ``getattr`` for other envs."""
  if hasattr(env, "get_wrapper_attr"):
    return env.get_wrapper_attr(name)
  return getattr(env, name)


def close_quietly(env) -> None:
  if env is None:
    return
  try:
    env.close()
  except Exception:  # closing is best effort; a broken env must not block the others
    pass


# ---------------------------------------------------------------------------------------
# A worker process: one group and its command loop.


def spin_until_readable(poller, seconds: float) -> bool:
  """Polls without sleeping for up to ``seconds``; True once the watched pipe is readable.

  Why: waking a process that sleeps in read() costs a scheduler round trip (tens of µs on
  a VM), as much as a cheap env step, and the woken process then runs cold: on a 2-vCPU
  VM, HalfCheetah steps taken right after a 200 µs sleep cost ~50% more (measured). A
  process that is still polling when its message lands skips both, and the writer's
  write() is cheaper too. ``sched_yield`` keeps the polling polite: any runnable process
  on this core goes first.
  """
  deadline = time.perf_counter() + seconds
  while not poller.poll(0):
    if time.perf_counter() > deadline:
      return False
    os.sched_yield()
  return True


def serve_group(conn, packed: bytes, indices: list[int], slot: int, spin: float = 0.0,
                autoreset_mode: str = AutoresetMode.SAME_STEP.value,
                keep_infos: bool = True, int_actions: bool = True) -> None:
  """Worker main: build the envs, report their spaces, then answer commands until CLOSE.

  ``packed``: the constructors of envs ``indices`` (``launch.pack_constructors``);
  ``autoreset_mode``: an ``AutoresetMode`` value ('SameStep', 'NextStep', 'Disabled');
  ``keep_infos``: False drops the envs' info dicts (``BatchEnv(infos=False)``);
  ``int_actions``: see ``EnvGroup``.
  """
  group = EnvGroup([], indices, slot, AutoresetMode(autoreset_mode), keep_infos, int_actions)
  try:
    group.constructors = pickle.loads(packed)  # may need modules this worker cannot import
    spaces = group.build()
  except Exception as exc:
    index = getattr(exc, "index", indices[0])
    record = ErrorRecord.current(index)
    if isinstance(exc, EnvWorkerError):  # keep the env's own traceback, not the wrapper's
      record = ErrorRecord(exc.exc_type, str(exc.__cause__), exc.traceback, index,
                           process.pickle_exception(exc.__cause__))
    conn.send_bytes(process.encode(EXCEPTION, 0, record))
    group.close()
    return
  try:
    conn.send_bytes(process.encode(READY, 0, spaces))
    _serve_commands(conn, group, spin)
  except (EOFError, OSError):  # the parent is gone (or closed the pipe): nothing to answer
    pass
  finally:
    group.close()


def _serve_commands(conn, group: EnvGroup, spin: float) -> None:
  unpack, size = HEADER.unpack_from, HEADER.size
  poller = select.poll()
  poller.register(conn.fileno(), select.POLLIN)
  while True:
    if spin > 0:
      spin_until_readable(poller, spin)
    data = process.recv_bytes(conn)  # EOFError when the parent is gone: handled by the caller
    kind, rid = unpack(data)
    if kind == STEP:  # the hot path: no body unless actions are not in shared memory
      report = group.step(pickle.loads(data[size:]) if len(data) > size else None)
      if report is EMPTY:
        process.send_bytes(conn, HEADER.pack(RESULT, rid))
      else:  # a plain tuple: cheaper to unpickle than the NamedTuple
        process.send_result(conn, rid, tuple(report))
      continue
    if kind == CLOSE:
      conn.send_bytes(HEADER.pack(RESULT, rid))
      return
    try:
      value = _group_command(conn, group, kind, pickle.loads(data[size:]))
    except Exception:
      process.send_exception(conn, rid)
      continue
    process.send_result(conn, rid, value)


def _group_command(conn, group: EnvGroup, kind: int, body):
  if kind == RESET:
    return group.reset(*body)
  if kind == RESTART:
    return group.restart(*body)
  if kind == CALL:
    return group.call(body)
  if kind == SETATTR:
    return group.set_attrs(body)
  if kind == ATTACH:
    memory = attach_block(launch.recv_fd(conn), body.nbytes)
    group.attach(body.views(memory), memory)
    return None
  raise ValueError(f"unknown command kind {kind}")
