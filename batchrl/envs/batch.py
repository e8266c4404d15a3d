"""BatchEnv: N environments stepped as one, with the Gymnasium vector API.

Two modes, one code path for the environments themselves (``EnvGroup``):

- ``num_workers=0``: every env in this process, stepped in a plain loop.
- ``num_workers=W``: W worker processes, each hosting about N/W envs. Observations,
  rewards, terminated/truncated and final observations live in ONE shared-memory block
  that workers write and the parent reads through numpy views; actions are written there
  by the parent. A step costs one tiny pipe message per worker (its request id) and one
  reply (empty unless some env returned infos, ended an episode or raised). Commands go to
  every worker before any reply is awaited. A waiting process polls its pipe for up to
  ``spin`` seconds before it sleeps (see ``spin_until_readable`` for why).
- ``num_workers=W, step_in_parent=True``: the same, but this process steps the first group
  itself while W-1 workers step the others, instead of sleeping until they answer.

Constructors may be anything ``gymnasium.vector.AsyncVectorEnv`` takes: lambdas, closures,
classes defined in a script or a notebook (they travel by value), in a script with or without
an ``if __name__ == "__main__":`` guard, or piped on standard input (workers never re-run the
main module; see ``launch``).

Auto-reset follows Gymnasium's ``AutoresetMode``s exactly (step for step the results of
``SyncVectorEnv(..., autoreset_mode=same)``). The default is SAME_STEP, what the trainers
use: when an env ends an episode, the observation returned is the first one of the next
episode and ``infos["final_obs"]`` (an object array [N], valid where
``infos["_final_obs"]``) holds the last one, for bootstrapping. Gymnasium's own default is
NEXT_STEP; code written against Gymnasium's vector envs swaps in ``BatchEnv.drop_in(...)``,
which takes their arguments and has their defaults (docs/environments.md says what differs).

    env = BatchEnv([lambda: gym.make("CartPole-v1")] * 8, num_workers=2, seed=0)
    obs, infos = env.reset()
    obs, rewards, terminated, truncated, infos = env.step(actions)   # actions [8]
    env.close()

The parts, one idea per file: ``batch_layout`` (the shared-memory arrays), ``batch_group``
(the envs of one worker and its command loop), ``batch_backends`` (in-process or worker
processes), ``batch_infos`` (infos as columns, merged into vector infos); ``launch`` starts
workers and ``process`` holds the wire format, errors and ``ExternalProcess``.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.error import AlreadyPendingCallError, NoAsyncCallError
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import (
  batch_differing_spaces,
  batch_space,
  concatenate,
  create_empty_array,
  iterate,
)

from batchrl.cpus import usable_cpus
from batchrl.envs import process
from batchrl.envs.batch_backends import LocalBackend, ProcessBackend
from batchrl.envs.batch_group import GroupSpec, Report, space_mismatch
from batchrl.envs.batch_infos import collect_infos, merge_infos
from batchrl.envs.batch_layout import Layout, item_shape_dtype
from batchrl.envs.process import (
  EnvClosedError,
  EnvError,
  EnvWorkerDied,
  EnvWorkerError,
  EnvWorkerTimeout,
  SpaceMismatchError,
)
from batchrl.errors import did_you_mean

# Which numpy dtype kinds an action may have, by the kind of the space's dtype. Floats are
# refused for integer spaces: silently truncating 1.7 to 1 hides bugs.
_ACTION_KINDS = {"f": "fiu", "i": "iu", "u": "iu", "b": "biu"}


class BatchEnv(VectorEnv):
  """N environments stepped as one; the Gymnasium vector API, any of its auto-reset modes.

  Args:
    env_fns: one constructor per env: zero-argument callables returning an env (functions,
      lambdas, closures, classes; from a module, a script or a notebook: workers receive
      them by value, with cloudpickle), or env id strings.
    num_workers: 0 to step every env in this process; W > 0 to split the envs into W groups
      stepped in parallel, each by a worker process (see ``step_in_parent``).
    seed: the per-env seeds of the first ``reset()``, derived from it as ``seeding`` says; the
      same seed gives the same trajectories in either mode.
    restart: a RestartPolicy (or True for the default one) to recreate failing envs; None
      raises their errors (EnvWorkerError / EnvWorkerDied / EnvWorkerTimeout, naming the env).
    timeout: seconds to wait for the workers' answer to any one command.
    context: 'spawn' or 'forkserver' (never fork: JAX may be loaded here).
    start_timeout: seconds allowed for workers to start and build their envs.
    spin: seconds a waiting worker (and the parent, while a CPU is free) polls before
      sleeping. Waking a sleeping process is slow on VMs, and it then steps its envs
      slower for a while (cold caches). Polling yields the CPU to any other runnable
      process; 0 always sleeps (use it when the time between steps is long, e.g. a slow
      learner, and idle CPU matters).
    step_in_parent: with workers, this process steps the first group itself instead of
      waiting idle for the workers (so W-1 worker processes). Faster when the workers would
      take every CPU (e.g. 2 groups on 2 cores): one process and its wake-ups fewer. The
      price is isolation for that group: exceptions are still caught, named and restarted,
      but a crash of one of its envs ends this process and a hang blocks it (no timeout).
    autoreset_mode: a ``gymnasium.vector.AutoresetMode`` or its name ('SAME_STEP' or
      'SameStep', ...), with Gymnasium's semantics, declared in ``metadata["autoreset_mode"]``:
      - SAME_STEP (the default here, NOT Gymnasium's): an env that ends an episode is reset
        in the same step; the step returns the new episode's first observation and the reset's
        info, with the last observation and info in ``infos["final_obs"]`` /
        ``infos["final_info"]`` (valid where ``infos["_final_obs"]`` / ``["_final_info"]``).
      - NEXT_STEP (Gymnasium's default): the step returns the episode's last observation;
        the env's next step resets it instead (its action is ignored; reward 0,
        terminated/truncated False, the reset's observation and info).
      - DISABLED: nothing is reset automatically; an env that ended must be reset with
        ``reset(options={"reset_mask": mask})`` before the next ``step()``, which refuses
        otherwise.
      An env recreated by ``restart`` ends its episode as truncated, and then follows the mode
      like any other.
    infos: False drops the envs' own info dicts where they are made (in the workers): the
      infos hold only what the autoreset mode needs (``final_obs``/``_final_obs`` and an
      empty ``final_info``), ``env_restarted`` and the errors' reports. For consumers that
      read no infos (``InGraphBatchEnv`` in training): merging a MuJoCo env's four floats
      into vector infos cost about a fifth of a one-env step's overhead.
    observation_mode: as Gymnasium's: 'same' (every env has the same observation space),
      'different' (spaces of one shape and dtype, e.g. other bounds, batched with
      ``batch_differing_spaces``), or a tuple ``(observation_space, single_observation_space)``.
    check_actions: True refuses actions that do not fit the action space (shape, dtype kind,
      Discrete range) with a ValueError before any env sees them, and Discrete actions reach
      the envs as Python ints; False passes them on as Gymnasium does: each env gets what
      Gymnasium's ``iterate`` gives (a numpy scalar from an array, a list's own items), and a
      scalar where a batch is due is a TypeError.
    seeding: how ``seed`` and ``reset(seed=s)`` give per-env seeds: 'batchrl' with
      ``SeedSequence(s).spawn(N)`` (well-mixed streams; ``reset(seed=s)`` also seeds
      ``action_space``), 'gymnasium' as Gymnasium's vector envs do: env i gets ``s + i``.

  ``BatchEnv.drop_in(...)`` takes the arguments of Gymnasium's ``AsyncVectorEnv`` and
  ``SyncVectorEnv`` and gives their behaviour (NEXT_STEP, actions passed on, ``seed + i``).
  """

  metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}  # the default; instances set theirs

  def __init__(self, env_fns: Sequence[Callable | str], num_workers: int = 0,
               seed: int | None = None, restart: RestartPolicy | bool | None = None,
               timeout: float = 60.0, context: str = "spawn", start_timeout: float = 120.0,
               spin: float = 0.002, step_in_parent: bool = False,
               autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
               infos: bool = True, observation_mode: str | tuple = "same",
               check_actions: bool = True, seeding: str = "batchrl"):
    fns = self._check_args(env_fns, num_workers, restart, context)
    for name, flag in (("step_in_parent", step_in_parent), ("infos", infos),
                       ("check_actions", check_actions)):
      if not isinstance(flag, bool):
        raise ValueError(f"{name} must be True or False, got {flag!r}")
    self.observation_mode = _check_observation_mode(observation_mode)
    if seeding not in _SEEDINGS:
      raise ValueError(f"seeding must be one of {_SEEDINGS}, got {seeding!r}")
    self._check_actions, self._gym_seeding = check_actions, seeding == "gymnasium"
    self.autoreset_mode = check_autoreset_mode(autoreset_mode)
    self._disabled = self.autoreset_mode is AutoresetMode.DISABLED
    self.metadata = {"autoreset_mode": self.autoreset_mode}
    self.num_envs = len(fns)
    self._policy = RestartPolicy() if restart is True else (restart or None)
    self._seed_root = _check_seed(seed)
    spin = _check_spin(spin)
    self._backend = None
    self._pending: tuple | None = None  # (kind, ...) of a reset_async/step_async not waited for
    if num_workers == 0:
      self._backend = LocalBackend(fns, self.autoreset_mode, infos, check_actions)
    else:
      self._backend = ProcessBackend(fns, num_workers, context, process.check_timeout(timeout),
                                     process.check_timeout(start_timeout, "start_timeout"),
                                     spin, step_in_parent, self.autoreset_mode, infos,
                                     check_actions)
    try:
      self._setup_spaces(self._backend.start())
      self._bufs = self._backend.attach(self._layout)
    except BaseException:
      self._backend.close()
      raise
    self._first_seeds = self._env_seeds(self._seed_root)
    self._restarts = np.zeros(self.num_envs, np.int64)
    self._ready = np.zeros(self.num_envs, np.bool_)  # reset since creation / last failure
    self._ended = np.zeros(self.num_envs, np.bool_)  # DISABLED: ended, not reset since
    self._loose_obs: list = [None] * self.num_envs
    if self._seed_root is not None:
      self.action_space.seed(self._seed_root)

  @classmethod
  def drop_in(cls, env_fns: Sequence[Callable | str], shared_memory: bool = True,
              copy: bool = True, context: str | None = None, daemon: bool = True,
              worker=None, observation_mode: str | tuple = "same",
              autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, *,
              num_workers: int | None = None, **options) -> "BatchEnv":
    """A BatchEnv that behaves as ``gymnasium.vector.AsyncVectorEnv(env_fns, ...)`` (or
    ``SyncVectorEnv``) with the same arguments, defaults included: NEXT_STEP auto-reset,
    actions passed on unchecked, ``reset(seed=s)`` seeding env i with ``s + i``.

    ``shared_memory``, ``copy`` and ``daemon`` are accepted and change nothing: observations
    always travel in shared memory, results are always copies, and workers never outlive
    this process. ``context=None`` is 'spawn' (never fork). ``num_workers`` (None: one per
    usable CPU, at most one per env) and other ``options`` are BatchEnv's own.
    """
    if worker is not None:
      raise ValueError("worker= replaces AsyncVectorEnv's own worker function; BatchEnv has "
                       "its own workers and cannot take one (leave worker=None)")
    fns = list(env_fns)
    if num_workers is None:
      num_workers = min(len(fns), usable_cpus())
    del shared_memory, copy, daemon  # accepted for Gymnasium's signature; see the docstring
    options = {"check_actions": False, "seeding": "gymnasium", **options}
    return cls(fns, num_workers=num_workers, context=context or "spawn",
               observation_mode=observation_mode, autoreset_mode=autoreset_mode, **options)

  @classmethod
  def from_id(cls, env_id: str, num_envs: int, num_workers: int = 0, seed: int | None = None,
              restart: RestartPolicy | bool | None = None, timeout: float = 60.0,
              context: str = "spawn", start_timeout: float = 120.0, spin: float = 0.002,
              step_in_parent: bool = False,
              autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
              **make_kwargs) -> "BatchEnv":
    """``num_envs`` copies of ``gymnasium.make(env_id, **make_kwargs)``."""
    process.check_env_id(env_id)
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
      raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    fn = functools.partial(process.make_from_id, env_id, **make_kwargs)
    return cls([fn] * num_envs, num_workers=num_workers, seed=seed, restart=restart,
               timeout=timeout, context=context, start_timeout=start_timeout, spin=spin,
               step_in_parent=step_in_parent, autoreset_mode=autoreset_mode)

  @staticmethod
  def _check_args(env_fns, num_workers, restart, context) -> list:
    fns = list(env_fns)
    if not fns:
      raise ValueError("env_fns is empty; a BatchEnv needs at least one environment constructor")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or not (
        0 <= num_workers <= len(fns)):
      raise ValueError(f"num_workers must be an int from 0 (in-process) to num_envs={len(fns)}, "
                       f"got {num_workers!r}")
    if not (restart is None or restart is True or isinstance(restart, RestartPolicy)):
      raise ValueError(f"restart must be None, True or a RestartPolicy, got {restart!r}")
    process.get_context(context)  # validates the name
    for fn in fns:
      if num_workers > 0:
        process.check_constructor(fn)
      elif isinstance(fn, str):
        process.check_env_id(fn)
      elif not callable(fn):
        raise TypeError(f"an environment constructor must be a callable or an env id string, "
                        f"got {type(fn).__name__}: {fn!r}")
    return fns

  def _setup_spaces(self, groups: list[tuple[int, GroupSpec]]) -> None:
    """Spaces, metadata and render mode from what the groups built (groups in env order)."""
    spaces = [pair for _, spec in groups for pair in spec.spaces]
    first = groups[0][1]
    self.metadata = {**first.metadata, "autoreset_mode": self.autoreset_mode}
    self.render_mode = first.render_mode
    obs_space, act_space = spaces[0]
    mode = self.observation_mode
    if isinstance(mode, tuple):
      self.observation_space, obs_space = mode
    elif mode == "same":
      self.observation_space = batch_space(obs_space, self.num_envs)
    else:
      self.observation_space = None  # after the check below: it needs equivalent spaces
    for index, pair in enumerate(spaces):
      fits = pair[0] == obs_space if mode == "same" else is_space_dtype_shape_equiv(
          pair[0], obs_space)
      if not fits or pair[1] != act_space:
        hint = ("" if mode != "same" or pair[1] != act_space else "; observation_mode="
                "'different' batches observation spaces of one shape and dtype")
        raise SpaceMismatchError(space_mismatch(index, pair, 0, spaces[0]) + hint,
                                 index=index)
    if self.observation_space is None:
      self.observation_space = batch_differing_spaces([pair[0] for pair in spaces])
    self.single_observation_space, self.single_action_space = obs_space, act_space
    self.action_space = batch_space(act_space, self.num_envs)
    self._layout = Layout.build(self.num_envs, max(1, self._backend.num_workers), obs_space,
                                 act_space)

  # -- public API -------------------------------------------------------------------------

  @property
  def num_workers(self) -> int:
    return self._backend.num_workers

  @property
  def restarts(self) -> np.ndarray:
    """How many times each env was recreated by the restart policy ([N] int64, a copy)."""
    return self._restarts.copy()

  @property
  def worker_pids(self) -> list[int]:
    """Process ids of the workers (empty in-process)."""
    return [] if self.closed else self._backend.pids

  def reset(self, seed: int | Sequence[int | None] | None = None, options: dict | None = None,
            indices: Sequence[int] | None = None):
    """Resets all envs (or those in ``indices``); returns the full batch ``(obs, infos)``.

    ``seed``: an int (per-env seeds derived from it as ``seeding`` says), a list of one
    seed per reset env, or None (the constructor's seeds on each env's first reset, then
    unseeded). Envs outside ``indices`` keep their current observation in the batch.
    ``options={"reset_mask": mask}`` (a bool array [N]) is Gymnasium's way to say
    ``indices``: as in ``SyncVectorEnv`` the mask is popped from ``options`` (the envs get
    the rest), and a seed list then has one seed per env of the batch.
    """
    self.reset_async(seed=seed, options=options, indices=indices)
    return self.reset_wait()

  def step(self, actions):
    """Steps every env once; returns ``(obs, rewards, terminated, truncated, infos)``."""
    return self._finish_step(self._send_step("step", actions), None)

  # -- the split-phase API of Gymnasium's AsyncVectorEnv ----------------------------------

  def reset_async(self, seed: int | Sequence[int | None] | None = None,
                  options: dict | None = None, indices: Sequence[int] | None = None) -> None:
    """Sends ``reset`` (as ``reset()`` takes it) to the envs; ``reset_wait()`` returns it.
    The workers reset while this process does other work."""
    self._check_idle("reset_async")
    indices, seed, options = self._reset_selection(indices, seed, options)
    targets = self._reset_targets(indices, seed)
    reset = [i for i, _ in targets]
    self._ready[reset] = False
    self._pending = ("reset", reset, self._interruptible(
        lambda: self._backend.send_reset(targets, options)))

  def reset_wait(self, timeout: float | None = None):
    """The ``(obs, infos)`` of the reset sent by ``reset_async``, waiting at most ``timeout``
    seconds for the workers (the constructor's ``timeout`` by default)."""
    reset, pending = self._take_pending("reset", timeout)
    reports, failures = self._interruptible(lambda: self._backend.finish(pending, timeout))
    _, extra = self._recover(reports, failures, "reset")
    reports += extra
    self._ready[reset], self._ended[reset] = True, False
    for report in reports:
      self._absorb(report)
    return self._read_obs(), collect_infos(reports, self.num_envs)

  def step_async(self, actions) -> None:
    """Sends the step (``actions`` as ``step()`` takes them) to the envs; ``step_wait()``
    returns its results. The workers step while this process does other work."""
    self._pending = ("step", None, self._send_step("step_async", actions))

  def step_wait(self, timeout: float | None = None):
    """``(obs, rewards, terminated, truncated, infos)`` of the step sent by ``step_async``,
    waiting at most ``timeout`` seconds for the workers (the constructor's by default)."""
    return self._finish_step(self._take_pending("step", timeout)[1], timeout)

  def _send_step(self, what: str, actions):
    self._check_idle(what)
    if not self._ready.all():
      raise EnvError(self._not_ready_message())
    loose_actions = self._write_actions(actions)
    return self._interruptible(lambda: self._backend.send_step(loose_actions))

  def _finish_step(self, pending, timeout: float | None):
    reports, failures = self._interruptible(lambda: self._backend.finish(pending, timeout))
    restarted, extra = self._recover(reports, failures, "step")
    for report in reports + extra:
      self._absorb(report)
    result = self._step_result(reports + extra, restarted)
    if self._disabled:
      ended = result[2] | result[3]
      self._ready[ended], self._ended[ended] = False, True
    return result

  def _check_idle(self, what: str) -> None:
    self._check_open(what)
    if self._pending is not None:
      kind = self._pending[0]
      raise AlreadyPendingCallError(f"Calling `{what}` while waiting for a pending call to "
                                    f"`{kind}` to complete", kind)

  def _take_pending(self, kind: str, timeout) -> tuple:
    self._check_open(f"{kind}_wait")
    if self._pending is None or self._pending[0] != kind:
      raise NoAsyncCallError(f"Calling `{kind}_wait` without any prior call to "
                             f"`{kind}_async`.", kind)
    if timeout is not None:
      process.check_timeout(timeout)
    _, extra, pending = self._pending
    self._pending = None
    return extra, pending

  def call(self, name: str, *args, **kwargs) -> tuple:
    """``name`` of every env (found through its wrappers, as ``get_wrapper_attr`` does),
    called with the arguments if callable, else as it is; the results in env order.

    As in Gymnasium's ``AsyncVectorEnv``, 'reset', 'step' and 'close' are refused: calling
    them behind the batch's back would leave its arrays and auto-reset state stale."""
    return tuple(self._backend.finish_calls(self._send_call("call", name, args, kwargs)))

  def call_async(self, name: str, *args, **kwargs) -> None:
    """Sends ``call(name, *args, **kwargs)`` to the envs; ``call_wait()`` returns it."""
    self._pending = ("call", None, self._send_call("call_async", name, args, kwargs))

  def call_wait(self, timeout: float | None = None) -> tuple:
    """The results of the call sent by ``call_async``, waiting at most ``timeout`` seconds
    for each worker (the constructor's ``timeout`` by default)."""
    return tuple(self._backend.finish_calls(self._take_pending("call", timeout)[1], timeout))

  def _send_call(self, what: str, name: str, args: tuple, kwargs: dict):
    self._check_idle(what)
    if name in ("reset", "step", "close"):
      raise ValueError(f"Trying to call function `{name}` with `call`, use `{name}` directly "
                       "instead.")
    requests = [(i, name, args, kwargs) for i in range(self.num_envs)]
    return self._backend.send_calls(process.CALL, requests)

  def get_attr(self, name: str) -> tuple:
    """``call(name)``, as in Gymnasium: the attribute of every env (a method is called)."""
    self._check_open("get_attr")
    return self.call(name)

  def set_attr(self, name: str, values) -> None:
    """Sets attribute ``name`` of every env (where its wrappers have it, as
    ``set_wrapper_attr``): ``values`` a list or tuple of one value per env, else one value
    for all."""
    self._check_idle("set_attr")
    if not isinstance(values, (list, tuple)):
      values = [values] * self.num_envs
    if len(values) != self.num_envs:
      raise ValueError("Values must be a list or tuple with length equal to the number of "
                       f"environments. Got `{len(values)}` values for {self.num_envs} "
                       "environments.")
    requests = [(i, name, value) for i, value in enumerate(values)]
    self._backend.finish_calls(self._backend.send_calls(process.SETATTR, requests))

  @property
  def np_random_seed(self) -> tuple:
    """The seed of each env's ``np_random`` (Gymnasium's ``np_random_seed``), in env order."""
    return self.get_attr("np_random_seed")

  @property
  def np_random(self) -> tuple:
    """Each env's random generator (copies, from workers), in env order."""
    return self.get_attr("np_random")

  def render(self):
    return self.call("render")

  def close_extras(self, **kwargs) -> None:
    """Closes every env and worker and frees the shared memory. Idempotent (via close())."""
    self._bufs = None
    self._pending = None  # a call not waited for is dropped with the workers
    if self._backend is not None:
      self._backend.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()

  def __repr__(self) -> str:
    state = ", closed" if self.closed else ""
    return f"BatchEnv(num_envs={self.num_envs}, num_workers={self.num_workers}{state})"

  # -- internals ------------------------------------------------------------------------

  def _check_open(self, what: str) -> None:
    if self.closed:
      raise EnvClosedError(f"{what}() on a closed BatchEnv; create a new one")

  def _not_ready_message(self) -> str:
    ended = np.flatnonzero(~self._ready & self._ended).tolist()
    unknown = np.flatnonzero(~self._ready & ~self._ended).tolist()
    parts = []
    if ended:
      parts.append(f"autoreset_mode=DISABLED: environments {ended} ended an episode and were "
                   "not reset; reset them before the next step, e.g. "
                   "env.reset(options={'reset_mask': terminated | truncated})")
    if unknown:
      parts.append(f"call reset() before step(): environments {unknown} have not been reset "
                   "since they were created or since an error left them in an unknown state")
    return "; ".join(parts)

  def _reset_selection(self, indices, seed, options):
    """(indices, seed, options) with Gymnasium's ``options["reset_mask"]`` taken into account."""
    if options is None or "reset_mask" not in options:
      return self._check_indices(indices), seed, options
    if indices is not None:
      raise ValueError("pass either indices= or options['reset_mask'] to reset(), not both")
    mask = options.pop("reset_mask")  # popped, as SyncVectorEnv does: wrappers above rely on it
    if not (isinstance(mask, np.ndarray) and mask.dtype == np.bool_
            and mask.shape == (self.num_envs,) and mask.any()):
      raise ValueError(f"options['reset_mask'] must be a numpy bool array of shape "
                       f"({self.num_envs},) with at least one True, got {mask!r}")
    chosen = np.flatnonzero(mask).tolist()
    if seed is not None and not isinstance(seed, (int, np.integer)):
      seed = list(seed)
      if len(seed) != self.num_envs:
        raise ValueError(f"with options['reset_mask'], a seed list has one seed per env "
                         f"({self.num_envs}), got {len(seed)}")
      seed = [seed[i] for i in chosen]
    return chosen, seed, options

  def _check_indices(self, indices) -> list[int]:
    if indices is None:
      return list(range(self.num_envs))
    arr = np.asarray(indices)
    if arr.dtype == np.bool_ and arr.shape == (self.num_envs,):
      arr = np.flatnonzero(arr)
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or (
        arr.size and (arr.min() < 0 or arr.max() >= self.num_envs)):
      raise ValueError(f"indices must be env indices in [0, {self.num_envs - 1}] or a boolean "
                       f"mask of length {self.num_envs}, got {indices!r}")
    return sorted(set(arr.tolist()))

  def _env_seeds(self, seed: int | None) -> list[int | None]:
    """Each env's seed from one seed (see ``seeding``)."""
    if seed is None:
      return [None] * self.num_envs
    if self._gym_seeding:
      return [seed + i for i in range(self.num_envs)]
    return _derived_seeds(seed, self.num_envs)

  def _reset_targets(self, indices: list[int], seed) -> list[tuple[int, int | None]]:
    if seed is None:
      seeds = [self._first_seeds[i] for i in indices]
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
      self._seed_root = _check_seed(seed)
      derived = self._env_seeds(self._seed_root)
      seeds = [derived[i] for i in indices]
      if not self._gym_seeding:  # Gymnasium leaves the action space's seed alone
        self.action_space.seed(self._seed_root)
    else:
      seeds = list(seed)
      if len(seeds) != len(indices):
        raise ValueError(f"seed lists need one seed per reset env ({len(indices)}), "
                         f"got {len(seeds)}")
      seeds = [_check_seed(s, "each seed") for s in seeds]
    for i in indices:
      self._first_seeds[i] = None  # constructor seeds apply to the first reset only
    return list(zip(indices, seeds))

  def _write_actions(self, actions) -> list | None:
    """Writes the actions into shared memory; returns them as a list where they travel
    pickled instead (spaces without an array form; unchecked actions that do not fit)."""
    buffer = self._bufs.actions
    if buffer is not None and self._check_actions:
      buffer[...] = _check_actions(actions, self.single_action_space, self.num_envs)
      return None
    if buffer is not None:
      arr = np.asarray(actions)
      if arr.ndim == 0:  # what Gymnasium's iterate raises, said more plainly
        raise TypeError(f"actions must be a batch of {self.num_envs} actions (an array of "
                        f"shape {buffer.shape}), got the scalar {actions!r}")
      if type(actions) is np.ndarray and arr.shape == buffer.shape and (
          arr.dtype == buffer.dtype):
        buffer[...] = arr  # each env gets its row (a numpy scalar, for Discrete), as Gymnasium
        return None
      # Otherwise each env gets its action as Gymnasium's iterate gives it (a list's items
      # as they are, another dtype unconverted); they travel pickled.
    items = list(iterate(self.action_space, actions))
    if len(items) != self.num_envs:
      raise ValueError(f"expected actions for {self.num_envs} environments, got {len(items)}")
    return items

  def _interruptible(self, command):
    """Runs a backend command; if it is interrupted (Ctrl-C) every env needs a reset."""
    try:
      return command()
    except BaseException:
      self._ready[:] = False
      raise

  # -- failures ---------------------------------------------------------------------------

  def _recover(self, reports: list[Report], failures: list, during: str):
    """Applies the restart policy to one command's env errors and lost workers.

    Returns (mask of restarted envs or None, reports of the restarts' resets).
    """
    errors = [(i, record) for report in reports if report.errors for i, record in report.errors]
    if not errors and not failures:
      return None, []
    restarted = np.zeros(self.num_envs, np.bool_)
    extra: list[Report] = []
    for w, error in failures:  # lost workers first: they are the more serious failures
      extra += self._restart_worker(w, error, restarted)
    for i, record in errors:
      extra += self._restart_env(i, record.to_error(i, during), restarted)
    return restarted, extra

  def _restart_env(self, i: int, error: EnvError, restarted: np.ndarray) -> list[Report]:
    while True:
      self._check_restart_allowed([i], error)
      self._restarts[i] += 1
      restarted[i] = True
      try:
        report = self._backend.restart_env(i, self._restart_seed(i))
      except (EnvWorkerDied, EnvWorkerTimeout) as exc:  # the worker went down while restarting
        return self._restart_worker(self._backend.worker_of(i), exc, restarted)
      if not report.errors:
        return [report]
      error = report.errors[0][1].to_error(i, "restart")

  def _restart_worker(self, w: int, error: EnvError, restarted: np.ndarray) -> list[Report]:
    indices = self._backend.parts[w]
    while True:
      self._check_restart_allowed(indices, error)
      self._restarts[indices] += 1
      restarted[indices] = True
      try:
        self._backend.respawn(w)
        reports, failures = self._backend.reset(
            [(i, self._restart_seed(i)) for i in indices], None)
      except EnvError as exc:  # a constructor failed in the new worker, or it died again
        error = exc
        continue
      if failures:
        error = failures[0][1]
        continue
      extra = list(reports)
      for i, record in reports[0].errors or ():
        extra += self._restart_env(i, record.to_error(i, "reset"), restarted)
      return extra

  def _check_restart_allowed(self, indices: list[int], error: EnvError) -> None:
    policy = self._policy
    if policy is None or not policy.allows(error):
      self._give_up(error)
    capped = [i for i in indices if self._restarts[i] >= policy.max_restarts]
    if capped:
      error.add_note(f"not restarted: environment(s) {capped} were already restarted "
                     f"{policy.max_restarts} times (RestartPolicy.max_restarts)")
      self._give_up(error)

  def _give_up(self, error: EnvError):
    self._ready[:] = False  # this command's results are lost: every env needs a reset
    if isinstance(error, (EnvWorkerDied, EnvWorkerTimeout)):
      error.add_note("the BatchEnv was closed: a worker process was lost and not replaced "
                     "(pass restart=RestartPolicy(...) to replace lost workers)")
      self.close()
    raise error

  def _restart_seed(self, i: int) -> int | None:
    """A reproducible seed for the k-th restart of env i (distinct from its first seed)."""
    if self._seed_root is None:
      return None
    sequence = np.random.SeedSequence(self._seed_root, spawn_key=(i, int(self._restarts[i])))
    return int(sequence.generate_state(1, np.uint64)[0])

  # -- results ----------------------------------------------------------------------------

  def _absorb(self, report: Report) -> None:
    if report.loose_obs:
      for i, obs in report.loose_obs.items():
        self._loose_obs[i] = obs

  def _read_obs(self):
    if self._bufs.obs is not None:
      return self._bufs.obs.copy()  # a copy: the shared buffer is overwritten next step
    space = self.single_observation_space
    if any(obs is None for obs in self._loose_obs):  # envs never reset yet: zeros
      blank = next(iter(iterate(batch_space(space, 1), create_empty_array(space, 1))))
      items = [blank if obs is None else obs for obs in self._loose_obs]
    else:
      items = self._loose_obs
    return concatenate(space, items, create_empty_array(space, self.num_envs))

  def _step_result(self, reports: list[Report], restarted: np.ndarray | None):
    bufs, n = self._bufs, self.num_envs
    restarted = restarted if restarted is not None and restarted.any() else None
    if restarted is not None:
      # In the shared arrays, not in copies: they are the flags NEXT_STEP resets by.
      bufs.rewards[restarted], bufs.terminated[restarted], bufs.truncated[restarted] = (
          0.0, False, True)
    obs = self._read_obs()
    rewards, terminated, truncated = (bufs.rewards.copy(), bufs.terminated.copy(),
                                      bufs.truncated.copy())
    infos = collect_infos(reports, n)
    if any(report.ended for report in reports):
      self._add_finals(infos, reports)
    if restarted is not None:
      infos["env_restarted"], infos["_env_restarted"] = restarted, restarted.copy()
    return obs, rewards, terminated, truncated, infos

  def _add_finals(self, infos: dict, reports: list[Report]) -> None:
    """SAME_STEP's final observations and infos, laid out as SyncVectorEnv's: ``final_obs``
    an object array [N] (None where no episode ended), ``final_info`` vector infos."""
    n, index = self.num_envs, [i for report in reports if report.ended for i in report.ended]
    mask = np.zeros(n, np.bool_)
    mask[index] = True
    final_obs = np.full(n, None, dtype=object)
    loose = {}
    for report in reports:  # the env's own objects, where the shared buffer could not hold them
      if report.loose_final:
        loose.update(report.loose_final)
    for i in index:  # copies: the shared buffer is overwritten next step
      final_obs[i] = loose[i] if i in loose else self._bufs.final_obs[i].copy()
    infos["final_obs"], infos["_final_obs"] = final_obs, mask
    final_infos = merge_infos([report.final_infos for report in reports if report.ended], n)
    infos["final_info"], infos["_final_info"] = final_infos, mask.copy()


# ---------------------------------------------------------------------------------------
# Failures.


@dataclasses.dataclass(frozen=True, init=False)
class RestartPolicy:
  """What to do when an environment fails: recreate it, reset it, and go on.

  The failed env's step is reported with ``truncated=True``, reward 0 and
  ``infos["env_restarted"][i]=True`` (its episode was cut, never merged with the next one);
  the observation returned is the fresh env's first observation.

  Attributes:
    max_restarts: how many times any one environment may be recreated; the failure after
      that raises the original error (with a note saying the cap was reached).
    on_error: restart when the env raises an exception in step or reset.
    on_death: restart when its worker process dies (the worker and all its envs are
      recreated; every one of those envs counts a restart).
    on_timeout: restart when its worker does not answer within the timeout (it is killed,
      then recreated with all its envs).
  """

  max_restarts: int = 3
  on_error: bool = True
  on_death: bool = True
  on_timeout: bool = True

  # Not batchrl.configs.configclass: importing batchrl.configs loads the agents (and JAX),
  # which every worker process would then pay for at start-up.
  def __init__(self, **kwargs):
    names = [f.name for f in dataclasses.fields(self)]
    for key, value in kwargs.items():
      if key not in names:
        raise ValueError(f"unknown RestartPolicy field {key!r}{did_you_mean(key, names)}; "
                         f"valid: {', '.join(names)}")
    for f in dataclasses.fields(self):
      object.__setattr__(self, f.name, kwargs.get(f.name, f.default))
    self._check()

  def _check(self) -> None:
    if type(self.max_restarts) is not int or self.max_restarts < 0:
      raise ValueError(f"RestartPolicy.max_restarts must be an int >= 0, got {self.max_restarts!r}")
    for name in ("on_error", "on_death", "on_timeout"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"RestartPolicy.{name} must be True or False, got {getattr(self, name)!r}")

  def allows(self, error: EnvError) -> bool:
    if isinstance(error, EnvWorkerTimeout):
      return self.on_timeout
    if isinstance(error, EnvWorkerDied):
      return self.on_death
    return self.on_error


# ---------------------------------------------------------------------------------------
# Seeds and actions.


def _derived_seeds(seed: int, n: int) -> list[int]:
  """Distinct, reproducible per-env seeds from one seed."""
  return [int(child.generate_state(1, np.uint64)[0])
          for child in np.random.SeedSequence(seed).spawn(n)]


_MODE_NAMES = ", ".join(f"AutoresetMode.{m.name} ({m.name!r} or {m.value!r})"
                        for m in AutoresetMode)


def check_autoreset_mode(mode) -> AutoresetMode:
  """An ``AutoresetMode`` from itself, its name ('NEXT_STEP') or its value ('NextStep')."""
  if isinstance(mode, AutoresetMode):
    return mode
  if isinstance(mode, str):
    for member in AutoresetMode:
      if mode in (member.name, member.value):
        return member
  raise ValueError(f"autoreset_mode must be one of {_MODE_NAMES}; got {mode!r}")


_SEEDINGS = ("batchrl", "gymnasium")


def _check_observation_mode(mode):
  if isinstance(mode, tuple) and len(mode) == 2 and all(isinstance(s, gym.Space) for s in mode):
    return mode
  if isinstance(mode, str) and mode in ("same", "different"):
    return mode
  raise ValueError("Invalid `observation_mode`, expected: 'same' or 'different' or tuple of "
                   f"single and batch observation space, actual got {mode!r}")


def _check_spin(spin) -> float:
  if isinstance(spin, bool) or not isinstance(spin, (int, float)) or not 0 <= spin <= 1:
    raise ValueError(f"spin must be a number of seconds in [0, 1] (0: always sleep), got {spin!r}")
  return float(spin)


def _check_seed(seed, name: str = "seed") -> int | None:
  if seed is None:
    return None
  if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
    raise ValueError(f"{name} must be None or an int >= 0, got {seed!r}")
  return int(seed)


def _check_actions(actions, space: gym.Space, n: int) -> np.ndarray:
  """The actions as an array of the space's shape and dtype, or a ValueError saying why not."""
  arr = np.asarray(actions)
  shape, dtype = item_shape_dtype(space)
  if arr.shape != (n, *shape):
    if arr.ndim == 0 or arr.shape[0] != n:
      raise ValueError(f"expected actions for {n} environments, an array of shape "
                       f"{(n, *shape)}, got shape {arr.shape}")
    raise ValueError(f"each action must have shape {shape} for action space {space}, got "
                     f"actions of shape {arr.shape} (per env {arr.shape[1:]})")
  if arr.dtype.kind not in _ACTION_KINDS.get(dtype.kind, dtype.kind):
    raise ValueError(f"actions of dtype {arr.dtype} do not fit action space {space} (dtype "
                     f"{dtype}); use an array of kind {_ACTION_KINDS.get(dtype.kind)!r}")
  if isinstance(space, gym.spaces.Discrete):
    low, high = arr.min(), arr.max()
    if low < space.start or high >= space.start + space.n:
      raise ValueError(f"discrete actions must lie in [{space.start}, {space.start + space.n - 1}]"
                       f" for {space}, got values in [{low}, {high}]")
  return arr


__all__ = ["BatchEnv", "RestartPolicy", "EnvError", "EnvWorkerError", "EnvWorkerDied",
           "EnvWorkerTimeout", "EnvClosedError", "SpaceMismatchError"]

