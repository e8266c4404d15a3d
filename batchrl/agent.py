"""``batchrl.Agent``: the object users drive themselves (TensorForce's act / observe API).

    agent = Agent.create(agent='ppo', environment='CartPole-v1', batch_size=1024)
    state = env.reset()
    while True:
      action = agent.act(state)
      state, terminal, reward = env.execute(action)
      agent.observe(reward=reward, terminal=terminal)

In TensorForce's words this object is the *Agent* (interaction: preprocessing, exploration,
streams, checkpoints) and ``batchrl.agents.core.Model`` the *Model* (actions and updates).
All of the agent's state is one pytree on the device (``batchrl.agents.interaction``); a
step is one compiled call (``act``), ``observe`` only records the reward on the host. A
transition is handed to the model once its next state is known, at the stream's next
``act`` (or, on the fast path below, with many others a little later, but always before
anything reads the model); updates therefore run inside ``act`` (``observe`` reports them).

Streams: ``parallel_interactions=N`` lets one agent act for ``N`` environments. Give a batch
of states with ``parallel=[...]`` (default: streams ``0..k-1``); one call acts for all.

Terminal values: 0/False continue; 1/True the episode ended (no value after it); 2 cut short
(time limit): the update bootstraps from the next state, which ``observe(...,
next_states=...)`` may give (``Runner`` does); without it, from the last state acted on.

Speed: when all streams act in each call and the model's ``act`` reads nothing its
``store`` changes (feed-forward policies without observation normalization, e.g. PPO's
defaults), an act runs alone and transitions wait on the host, stored many at a time
(``batchrl.agents.fast_path``); the results are the same. With one stream and a float
vector state, ``act`` and ``observe`` keep their bookkeeping in scalar reads and writes
(``_act_one``, ``_observe_one``) and hand anything unusual to the general path. Creating
the first agent also turns JAX's CPU async dispatch off (``_prefer_inline_dispatch``): an act
computes for microseconds, less than handing it to another thread costs. Set
``BATCHRL_ASYNC_DISPATCH=1`` to keep JAX's default.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

import gymnasium as gym
import numpy as np

from batchrl.agents.core import Model
from batchrl.agents.errors import AgentUsageError, StateError, StreamAheadError
from batchrl.agents.families import FAMILIES, family_of_type
from batchrl.agents.fast_path import DeferredCommits, fast_plan
from batchrl.agents.runtime import STAGE_DEPTH, build_runtime
from batchrl.agents.states import all_finite
from batchrl.configclass import ConfigError
from batchrl.errors import UserInputError
from batchrl.export import export_agent
from batchrl.networks.layers import NetworkSpecError

# the errors are public here too: ``from batchrl.agent import AgentUsageError``
__all__ = ["Agent", "AgentUsageError", "StateError", "StreamAheadError"]

SPEC_FILE = "agent.json"
ASYNC_DISPATCH_ENV = "BATCHRL_ASYNC_DISPATCH"  # "1": leave JAX's CPU async dispatch on


def _load_json(path: str | os.PathLike, what: str) -> Any:
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    raise FileNotFoundError(f"{what} file {str(path)!r} does not exist.") from None
  except json.JSONDecodeError as e:
    raise ConfigError(f"{what} file {str(path)!r} is not valid JSON: {e.msg} at line "
                      f"{e.lineno}, column {e.colno}.") from None


def _looks_like_path(value: Any) -> bool:
  return isinstance(value, (str, os.PathLike)) and (
      str(value).endswith(".json") or os.sep in str(value))


def _resolve_agent(agent: Any, kwargs: dict) -> tuple[str, dict]:
  """``agent=`` (a name, a dict with ``type``, or a JSON file) -> (type, merged kwargs)."""
  if _looks_like_path(agent):
    agent = _load_json(agent, "agent spec")
  if isinstance(agent, dict):
    spec = dict(agent)
    name = spec.pop("type", spec.pop("agent", None))
    if name is None:
      raise ConfigError("an agent spec dict needs 'type' (e.g. {'type': 'ppo', ...}).")
    overlap = {k for k in kwargs if k in spec and spec[k] != kwargs[k]}
    if overlap:
      raise ConfigError(f"keys {sorted(overlap)} are given both in the agent spec and as "
                        "arguments with different values; give each once.")
    return name, {**spec, **kwargs}
  if isinstance(agent, str):
    return agent, dict(kwargs)
  raise ConfigError(f"agent must be an agent name, a dict with 'type' or a JSON file path, "
                    f"got {type(agent).__name__}.")


def _resolve_network(network: Any) -> Any:
  if _looks_like_path(network):
    return _load_json(network, "network spec")
  return network


@contextlib.contextmanager
def _naming_spec_files(agent: Any, network: Any) -> Iterator[None]:
  """A mistake in a spec read from a JSON file names the file (the user edits the file, not
  the dict it became), and comes without the chained traceback of where it was found."""
  try:
    yield
  except UserInputError as e:
    is_network = isinstance(e, NetworkSpecError) or isinstance(e.__cause__, NetworkSpecError)
    what, path = ("network", network) if is_network else ("agent", agent)
    if not _looks_like_path(path) or str(path) in str(e):
      raise
    message = f"{what} spec file {str(path)!r}: {e}"
    try:
      renamed = type(e)(message)
    except TypeError:  # an error type with its own constructor
      renamed = ConfigError(message)
    # a user's mistake needs no traceback; anything else wrapped in one keeps its cause
    cause = e.__cause__
    raise renamed from (None if cause is None or isinstance(cause, UserInputError)
                        else cause)


def _prefer_inline_dispatch() -> None:
  """Turns JAX's CPU async dispatch off, unless the user chose (``BATCHRL_ASYNC_DISPATCH=1``
  or ``JAX_CPU_ENABLE_ASYNC_DISPATCH``) or the CPU backend already exists.

  With async dispatch each compiled call is handed to a JAX thread and the caller waits for
  it: for an act that computes for a few microseconds that hand-over is most of the cost
  (measured on 2 cores: act + observe ~60 µs of CPU inline, ~90 µs of CPU and several
  times the wall time async). Large compiled programs (the fused training loops) run as
  fast either way. JAX reads the setting when it creates the CPU backend, once per process,
  so it is left alone when the backend exists.
  """
  chosen = "JAX_CPU_ENABLE_ASYNC_DISPATCH" in os.environ
  if chosen or os.environ.get(ASYNC_DISPATCH_ENV) == "1":
    return
  import jax
  try:
    from jax._src import xla_bridge  # no public way to ask whether the backend exists
    started = xla_bridge.backends_are_initialized()
  except (ImportError, AttributeError):
    started = False  # then the update below changes nothing already running
  if not started:
    jax.config.update("jax_cpu_enable_async_dispatch", False)


def _env_specs(environment) -> tuple[dict, dict, int | None]:
  """states, actions and max_episode_timesteps of an environment, id or gym env."""
  from batchrl.envs.core import Environment, GymEnvironment
  if isinstance(environment, Environment):
    limit = getattr(environment, "max_episode_timesteps", None)
    if isinstance(environment, GymEnvironment) and limit is None:
      spec = getattr(environment.env, "spec", None)
      limit = getattr(spec, "max_episode_steps", None)
    return environment.states, environment.actions, limit
  from batchrl.envs.core import make
  env = make(environment)
  try:
    spec = getattr(env.env, "spec", None)
    return env.states, env.actions, getattr(spec, "max_episode_steps", None)
  finally:
    env.close()


class Agent:
  """An agent driven by ``act`` / ``observe``; build it with ``Agent.create`` or ``Agent.load``."""

  # ------------------------------------------------------------------------ creating

  @classmethod
  def create(cls, agent: Any = "ppo", environment: Any = None, *, states: dict | None = None,
             actions: dict | None = None, max_episode_timesteps: int | None = None,
             network: Any = "auto", preprocessing: Any = None,
             reward_preprocessing: Any = None, exploration: Any = None,
             seed: int | None = None, parallel_interactions: int = 1,
             **agent_kwargs) -> "Agent":
    """Builds an agent.

    Args:
      agent: an agent name (``batchrl.agents.families.api_names()``: 'ppo', 'random',
        'constant', ...), a dict with ``type`` and the agent's keys, or a JSON file path.
      environment: takes states, actions and the episode limit from a
        ``batchrl.envs.Environment``, a Gymnasium id or a Gymnasium env.
      states, actions: spec dicts (``batchrl.specs``): one spec or a dict of named specs.
        A bool state ``<action>_mask`` of shape ``action.shape + (num_values,)`` masks an
        int action (True = allowed; ``action_mask`` for the single unnamed action).
      max_episode_timesteps: episode limit (checked in ``observe``; Runner cuts there).
      network: 'auto', a layer list, a ``branches`` dict, or a JSON file path
        (``batchrl.networks.layered``).
      preprocessing: per-state preprocessing (``batchrl.preprocessing``).
      reward_preprocessing: preprocessing of rewards.
      exploration: action exploration (``batchrl.exploration``), off when deterministic.
      seed: seeds parameters, sampling and exploration (None: a random seed, recorded in
        ``agent.spec``).
      parallel_interactions: number of streams one agent acts for.
      **agent_kwargs: the agent's own keys (each agent's ``keys.py``, e.g.
        ``batchrl.agents.ppo.keys``).
    """
    with _naming_spec_files(agent, network):
      name, kwargs = _resolve_agent(agent, agent_kwargs)
    if environment is not None:
      if states is not None or actions is not None:
        raise ConfigError("give environment= or states=/actions=, not both.")
      states, actions, env_limit = _env_specs(environment)
      max_episode_timesteps = max_episode_timesteps or env_limit
    if states is None or actions is None:
      raise ConfigError("Agent.create needs states= and actions= (spec dicts) or "
                        "environment=.")
    if seed is None:
      seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
    with _naming_spec_files(agent, network):
      spec = dict(type=name, states=states, actions=actions,
                  max_episode_timesteps=max_episode_timesteps,
                  network=_resolve_network(network), preprocessing=preprocessing,
                  reward_preprocessing=reward_preprocessing, exploration=exploration,
                  seed=seed, parallel_interactions=parallel_interactions, config=kwargs)
      return cls(_jsonable(spec))

  def __init__(self, spec: dict):
    """Use ``Agent.create`` or ``Agent.load``; ``spec`` is what ``agent.spec`` returns."""
    _prefer_inline_dispatch()  # before anything below starts JAX's backend
    self.spec = spec
    self._rt = build_runtime(spec)  # shared with agents of this spec but for the seed
    self._seed = int(spec["seed"])
    self._device = self._rt.init_state(self._seed)  # read through _state: syncs the fast path
    n = self.parallel_interactions
    self._acted = np.zeros(n, bool)
    self._held = np.zeros(n, bool)
    self._reward = np.zeros(n, np.float32)
    self._terminal = np.zeros(n, np.int32)
    self._start = np.ones(n, bool)
    self._staged = np.zeros(n, np.int64)
    self._episode_steps = np.zeros(n, np.int64)
    self._next: dict[int, Any] = {}
    self._updated: set[int] = set()  # streams whose last act ran an update (rarely any)
    self._rows = 0  # rows stored since the last update (None: unknown, the model decides)
    self._fast = None  # DeferredCommits once an act of all streams found the agent fit
    self._ranges: dict[int, tuple] = {}  # k -> streams 0..k-1 (see _first)
    self._n = n
    self._fast_refusal: str | None = None  # why the agent cannot take the fast path
    self._independent_acts = 0  # each independent act gets its own key
    self.timesteps = 0
    self.episodes = 0
    self.updates = 0  # updates that learned (see _update_learned)
    self._learned = _learning_updates(self._rt.parts.model, self._device.model)
    self._one = _one_stream_shape(self._rt.adapters.raw_space) if n == 1 else None
    self._period = self._rt.parts.model.period

  # ------------------------------------------------------------------------ properties

  @property
  def states(self) -> dict:
    return self.spec["states"]

  @property
  def actions(self) -> dict:
    return self.spec["actions"]

  @property
  def parallel_interactions(self) -> int:
    return int(self.spec["parallel_interactions"])

  @property
  def max_episode_timesteps(self) -> int | None:
    return self.spec["max_episode_timesteps"]

  @property
  def timesteps_per_update(self) -> int | None:
    """Timesteps (over all streams) from one update to the next where that is fixed and
    every update learns (PPO's ``batch_size``); None where the first learning update waits
    for something else (a replay agent's ``first_update``, whole episodes)."""
    if self._period is None or self._learned is not None:
      return None
    return self._period * self._n

  @property
  def _state(self):
    """The whole device state (``interaction.AgentState``); first stores the transitions
    the fast path still holds on the host, so it is exactly the fused path's state."""
    self._sync()
    return self._device

  def _sync(self) -> None:
    if self._fast is not None:
      self._device = self._fast.sync(self._device)

  def __repr__(self) -> str:
    return (f"Agent(type={self.spec['type']!r}, parallel_interactions="
            f"{self.parallel_interactions}, timesteps={self.timesteps}, "
            f"updates={self.updates})")

  # ------------------------------------------------------------------------ acting

  def act(self, states, deterministic: bool = False, independent: bool = False,
          parallel=None, internals=None):
    """Actions for one state or a batch (see the module docstring).

    Returns a Python scalar for one scalar action, an ``np.ndarray`` otherwise, a dict for
    several actions; with ``independent=True`` and ``internals`` (recurrent policies),
    ``(actions, internals)``.
    """
    if (self._one is not None and self._fast is not None and parallel is None
        and not independent and internals is None):
      action = self._act_one(states, deterministic)
      if action is not _DECLINED:
        return action
    obs, batched = self._rt.adapters.check_states(states)
    k = len(obs) if type(obs) is np.ndarray else len(next(iter(obs.values())))
    if independent:
      return self._act_independent(obs, batched, deterministic, internals)
    if internals is not None:
      raise AgentUsageError("internals= is only for independent=True acting; the training "
                            "streams keep their own.")
    idx, rows = self._streams(parallel, k, batched)
    acted = self._acted[rows]
    if _any(acted):
      raise AgentUsageError(f"act called twice for stream {int(idx[acted][0])} without "
                            "observe in between; call agent.observe(reward, terminal) after "
                            "each act.")
    self._check_limit(idx, rows)
    held = self._held[rows]
    every = isinstance(rows, slice) and k == self._n  # all streams, in order
    commit, slots, flush = self._plan_commit(idx, held, every)
    update = self._plan_update(commit)
    fast = self._fast_path(every, commit, update)
    if fast is not None:
      self._device = fast.act(self._device, obs, self._start, self._reward, self._terminal,
                              commit, bool(deterministic))
      self._after_act(idx, rows, held, False)
      return fast.last_action(batched)
    self._sync()
    next_held, has_next = self._rt.held_next(self._device, self._next, idx)
    self._device, action, updated = self._rt.act(
        self._device, obs, idx, self._reward[idx], self._terminal[idx] * held, next_held,
        has_next, self._start[idx], commit=commit, slots=slots, flush=flush, update=update,
        deterministic=bool(deterministic))
    if self._fast is not None:
      self._fast.forget()  # this act changed the device state: key, timestep, last act
    ran = _update_ran(commit, flush, update, updated) and self._update_learned()
    self._after_act(idx, rows, held, ran)
    return self._rt.adapters.to_user(action, batched)

  def _act_one(self, states, deterministic):
    """``act`` of the one stream on the fast path, for a float32 vector state: what the
    general path below does, with the per-stream bookkeeping read and written as scalars
    (a numpy slice, mask or reduction costs ~0.2-1 µs, an element ~0.04 µs). Returns
    ``_DECLINED``, having changed nothing, for anything else (another state type, a NaN, an
    error to raise, an update due, a cut step's next state): the general path takes it."""
    fast = self._fast
    if (type(states) is not np.ndarray or states.dtype is not _F32 or states.shape != self._one
        or self._acted[0] or self._staged[0] or self._next or fast.scalar is None):
      return _DECLINED
    limit = self.spec["max_episode_timesteps"]
    if limit is not None and self._episode_steps[0] >= limit:
      return _DECLINED
    # a float64 sum of float32 values is finite iff they all are (and never warns)
    if not math.isfinite(sum(states.tolist())):
      return _DECLINED
    if self._held[0]:  # _plan_commit: 'direct'; _plan_update: 'store' unless an update is due
      rows = self._rows
      if rows is None or rows + 1 >= self._period:
        return _DECLINED
      self._rows = rows + 1
      self._device, action = fast.act_one(self._device, states, self._start[0],
                                          self._reward[0], self._terminal[0], True,
                                          bool(deterministic))
    else:
      self._device, action = fast.act_one(self._device, states, self._start[0], 0.0, 0, False,
                                          bool(deterministic))
    self._acted[0] = True  # _after_act
    self._held[0] = False
    self._start[0] = False
    if self._updated:
      self._updated.discard(0)
    self.timesteps += 1
    return action

  def _update_learned(self) -> bool:
    """Whether the update that just ran learned. Replay models (DQN, NAF, DQFD) call
    ``update`` every period but learn only from ``first_update`` steps on, counting the
    updates that did in their state; ``agent.updates`` counts those."""
    count = _learning_updates(self._rt.parts.model, self._device.model)
    if count is None:
      return True
    learned = count != self._learned
    self._learned = count
    return learned

  def _fast_path(self, every: bool, commit: str, update: str):
    """The fast path (``DeferredCommits``) when this act may take it, else None.

    It may when all streams act, in order, no update is due in this act, no cut step waits
    with its given next state (those commit inside the act, fused), and the agent is fit
    for it (``fast_plan``, checked once).
    """
    if not every or self._next:
      return None
    if not (commit == "none" or (commit == "direct" and update == "store")):
      return None
    if self._fast is None and self._fast_refusal is None:
      plan = fast_plan(self._rt, self._device)
      if isinstance(plan, str):
        self._fast_refusal = plan
      else:
        self._fast = DeferredCommits(self._rt, plan)
    return self._fast

  def _plan_commit(self, idx: np.ndarray, held: np.ndarray, every: bool):
    """How this act hands held transitions to the model: 'none', 'direct' or 'staged'."""
    if not _any(held):
      return "none", None, 0
    if _all(held) and every and not _any(self._staged):
      return "direct", None, 0
    if self._rt.recurrent:
      raise AgentUsageError("A recurrent policy with parallel_interactions > 1 needs every "
                            "stream in each act call (parallel=list(range(N))), e.g. a "
                            "Runner with several environments.")
    counts = self._staged.copy()
    full = idx[held & (counts[idx] >= STAGE_DEPTH)]
    if len(full):
      lag = int(np.argmin(counts))
      raise StreamAheadError(f"stream {int(full[0])} is {STAGE_DEPTH} steps ahead of stream "
                             f"{lag}; the model learns from rows holding one step of every "
                             "stream, so step the streams evenly (ThreadedRunner waits).")
    slots = np.where(held, counts[idx], STAGE_DEPTH).astype(np.int32)  # non-held: dropped
    counts[idx[held]] += 1
    flush = int(counts.min())
    self._staged = counts - flush
    return "staged", slots, flush

  def _plan_update(self, commit: str) -> str:
    """For models with a fixed period, count stored rows here so the step needs no cond."""
    period = self._rt.parts.model.period
    if commit != "direct" or period is None:
      if commit == "staged" and period is not None:
        self._rows = None  # rows flushed from staging update under cond: stop counting
      return "cond"
    if self._rows is None:
      return "cond"
    self._rows += 1
    if self._rows >= period:
      self._rows = 0
      return "now"
    return "store"

  def _after_act(self, idx, rows, held, updated: bool) -> None:
    if self._next:  # first: ``held`` may be a view of ``self._held``
      for i in idx[held]:
        self._next.pop(int(i), None)
    self._acted[rows] = True
    self._held[rows] = False
    self._start[rows] = False
    if updated:
      self._updated.update(idx.tolist())
    elif self._updated:
      self._updated.difference_update(idx.tolist())
    self.timesteps += len(idx)

  def _act_independent(self, obs, batched, deterministic, internals):
    # no sync: act reads nothing that the held transitions would change (fast_plan)
    self._independent_acts += 1
    actions, new_internals = self._rt.act_independent(
        self._device, obs, deterministic, internals, seed=self._seed,
        count=self._independent_acts)
    result = self._rt.adapters.to_user(actions, batched)
    return (result, new_internals) if internals is not None else result

  def _streams(self, parallel, k: int, batched: bool):
    """``(idx, rows)``: the ``int32[k]`` stream indices of an act or observe call, and what
    selects them in the per-stream host arrays: a slice when they are ``0..k-1`` (numpy
    slices cost a fraction of index arrays)."""
    n = self._n
    if k <= n and (parallel is None or (batched and isinstance(parallel, list)
                                        and parallel == self._first(k)[1])):
      first = self._first(k)  # validated once, cached
      return first[0], first[2]
    if parallel is None:
      idx = np.arange(k)
    else:
      idx = np.atleast_1d(np.asarray(parallel))
      if idx.dtype.kind not in "iu":
        raise AgentUsageError(f"parallel must be stream indices (ints), got {parallel!r}.")
      if not batched and idx.shape != (1,):
        raise AgentUsageError(f"one state was given, so parallel must be one index, got "
                              f"{parallel!r}.")
      if len(idx) != k:
        raise AgentUsageError(f"parallel lists {len(idx)} streams but {k} states were given.")
    values = idx.tolist()  # checked in Python: numpy's reductions cost more on small arrays
    if len(set(values)) != len(values):
      raise AgentUsageError(f"parallel has repeated streams: {parallel!r}.")
    if values and (min(values) < 0 or max(values) >= n):
      raise AgentUsageError(f"parallel index {max(values) if max(values) >= n else min(values)}"
                            f" is out of range: this agent has parallel_interactions={n} "
                            f"(streams 0..{n - 1}).")
    if values == self._first(k)[1]:
      return self._first(k)[0], self._first(k)[2]
    return idx.astype(np.int32), idx

  def _first(self, k: int) -> tuple[np.ndarray, list, slice]:
    """Streams ``0..k-1`` as ``int32[k]`` (never written to), as a list and as a slice."""
    first = self._ranges.get(k)
    if first is None:
      first = self._ranges[k] = (np.arange(k, dtype=np.int32), list(range(k)), slice(0, k))
    return first

  def _check_limit(self, idx, rows) -> None:
    limit = self.max_episode_timesteps
    if limit is not None and _any(self._episode_steps[rows] >= limit):
      i = int(idx[self._episode_steps[rows] >= limit][0])
      raise AgentUsageError(f"stream {i} has run {limit} timesteps, max_episode_timesteps; "
                            "end the episode with observe(terminal=2) (cut short) at the "
                            "limit, or create the agent with a larger limit.")

  # ------------------------------------------------------------------------ observing

  def observe(self, reward, terminal=False, parallel=None, next_states=None) -> bool:
    """Records the reward of the last ``act`` of each stream; returns whether an update ran
    during this step (in its ``act``)."""
    if (self._n == 1 and parallel is None and next_states is None
        and (type(reward) is float or type(reward) is int)
        and (type(terminal) is bool or type(terminal) is int)):
      updated = self._observe_one(reward, terminal)
      if updated is not None:
        return updated
    if type(reward) is float:  # one stream's reward, the common case: no array needed
      rewards, batched = np.float32(reward), False
    else:
      rewards = _rewards_array(reward)
      if rewards.ndim > 1:
        raise AgentUsageError(f"reward must be one value or a batch [k], got shape "
                              f"{rewards.shape}.")
      batched = rewards.ndim == 1
    terminals = _terminal_codes(terminal)  # one int code, or int32[k]
    k = rewards.shape[0] if batched else 1
    idx, rows = self._streams(parallel, k, batched)
    if not isinstance(terminals, int) and terminals.shape != (k,):
      raise AgentUsageError(f"terminal must be one value or {k} values, got shape "
                            f"{terminals.shape}.")
    if not (all_finite(rewards) if batched else math.isfinite(rewards)):
      raise AgentUsageError(f"reward must be finite, got {reward!r}.")
    acted = self._acted[rows]
    if not _all(acted):
      raise AgentUsageError(f"observe called for stream {int(idx[~acted][0])} without an "
                            "act before it; call agent.act(states) first.")
    if next_states is not None:
      self._store_next(next_states, idx, np.broadcast_to(terminals, (k,)))
    self._acted[rows] = False
    self._held[rows] = True
    self._reward[rows] = rewards
    self._terminal[rows] = terminals
    self._episode_steps[rows] += 1
    self._end_episodes(idx, rows, terminals)
    updated = False
    if self._updated:  # an update ran in the act of one of these streams
      streams = idx.tolist()
      updated = not self._updated.isdisjoint(streams)
      self._updated.difference_update(streams)
    if updated:
      self.updates += 1
    return updated

  def _observe_one(self, reward, terminal) -> bool | None:
    """``observe`` of the one stream for a Python number and bool/int terminal, with scalar
    bookkeeping; None, having changed nothing, where the general path must check or
    raise."""
    code = _SCALAR_CODES.get(terminal)
    # float32(reward) is finite (NaN fails both comparisons)
    if code is None or not -_F32_LIMIT < reward < _F32_LIMIT or not self._acted[0]:
      return None
    self._acted[0] = False
    self._held[0] = True
    self._reward[0] = reward
    self._terminal[0] = code
    if code:  # _end_episodes
      self.episodes += 1
      self._start[0] = True
      self._episode_steps[0] = 0
    else:
      self._episode_steps[0] += 1
    if self._updated and 0 in self._updated:
      self._updated.discard(0)
      self.updates += 1
      return True
    return False

  def _end_episodes(self, idx, rows, terminals) -> None:
    if isinstance(terminals, int):
      if not terminals:
        return
      ended = rows
      self.episodes += len(idx)
    else:
      count = np.count_nonzero(terminals)
      if not count:
        return
      ended = idx[terminals != 0]
      self.episodes += count
    self._start[ended] = True
    self._episode_steps[ended] = 0

  def _store_next(self, next_states, idx, terminals) -> None:
    obs, batched = self._rt.adapters.check_states(next_states)
    rows = self._rt.process_next(self._device, obs, idx)  # preprocessing state is current
    for j, i in enumerate(idx):
      if terminals[j] == 2:
        self._next[int(i)] = self._rt.row(rows, j)

  def reset(self) -> None:
    """Ends every running episode: an un-observed act is dropped; a step observed without
    a terminal is kept as cut short (terminal 2, bootstrapped from its own state)."""
    self._acted[:] = False
    cut = self._held & (self._terminal == 0)
    self._terminal[cut] = 2
    self._start[:] = True
    self._episode_steps[:] = 0

  def initial_internals(self):
    """Internal state (recurrent carries) for ``act(..., independent=True, internals=...)``
    of one stream; ``{}`` for feed-forward policies."""
    return self._rt.initial_internals()

  # ---------------------------------------------------------------- replay memories

  def import_observations(self, observations) -> None:
    """Replay agents (dqn, ddqn, dqn_nstep, naf, dqfd): fills the replay memory with
    recorded experience (TensorForce's name); DQFD's demonstrations go through
    ``import_demonstrations`` instead.

    ``observations``: a list of dicts (``state``, ``action``, ``reward``, ``terminal`` with
    2 = cut short, ``internal`` empty), consecutive entries being consecutive steps, or a
    dict of arrays (``states``, ``actions``, ``rewards``, ``terminals``, optional
    ``next_states``). States and actions are checked against the specs first; an error
    names the field and index. With ``parallel_interactions=N`` the count must be a
    multiple of N (each of N consecutive chunks fills one stream's column). Imported steps
    do not count as timesteps (``first_update``, exploration schedules)."""
    self._host_method("import_observations", observations)

  def import_demonstrations(self, demonstrations) -> None:
    """DQFD: adds demonstrations to the demonstration memory (TensorForce's name).

    ``demonstrations``: as ``import_observations``'s ``observations``; checked the same
    way. More than the memory holds grows it (``spec["config"]["demo_memory_capacity"]``
    follows, so ``save``/``load`` keep them all; the next act compiles again)."""
    self._respec(self._host_method("import_demonstrations", demonstrations))

  def set_demonstrations(self, batch) -> None:
    """DQFD: replaces the stored demonstrations by ``batch`` (as ``import_demonstrations``)."""
    self._respec(self._host_method("set_demonstrations", batch))

  def _respec(self, changes: dict | None) -> None:
    """After a host method that changed the model's config (``changes``: agent keys and
    values, e.g. a grown demonstration memory): the spec, and the runtime built from it,
    follow; the state (already of the new shapes) is kept."""
    if not changes:
      return
    self._sync()
    self.spec = {**self.spec, "config": {**(self.spec.get("config") or {}), **changes}}
    self._rt = build_runtime(self.spec)
    self._fast, self._fast_refusal = None, None  # both belong to the old runtime

  def pretrain(self, steps: int) -> dict[str, float]:
    """DQFD: ``steps`` updates on the demonstrations alone; returns their mean metrics.
    Without demonstrations it is an error that says how to add them."""
    metrics = self._host_method("pretrain", steps)
    return {k: float(v) for k, v in metrics.items()}

  def _host_method(self, name: str, argument):
    """Runs the agent family's host method ``name`` (``AgentFamily.host_methods``) on the
    model state; agents whose family has none get an error naming the agents that do."""
    method = family_of_type(self.spec["type"]).host_methods.get(name)
    if method is None:
      offered = [t.name for f in FAMILIES if name in f.host_methods for t in f.api_types]
      which = ", ".join(repr(t) for t in offered) + (" agents" if len(offered) > 1 else " agent")
      raise AgentUsageError(f"{name} is for the {which}; this agent is {self.spec['type']!r}.")
    if self.spec.get("preprocessing"):
      raise AgentUsageError("imported experience is stored as the model sees states; with "
                            "state preprocessing configured, give it to an agent without it.")
    state = self._state  # commits what the fast path holds
    model, result = method(state.model, argument)
    self._device = state._replace(model=model)
    if self._fast is not None:
      self._fast.forget()
    return result

  def save(self, directory, keep: int | None = 5) -> str:
    """Writes a checkpoint (``ckpt-<timesteps>``) and the agent spec (``agent.json``) into
    ``directory``; returns the checkpoint path. ``Agent.load(directory)`` needs nothing else."""
    from batchrl import checkpoint
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _write_json_atomic(directory / SPEC_FILE, self.spec)
    path = checkpoint.save(directory, self.timesteps, self._state, config=self.spec,
                           counters=self._counters(), keep=keep)
    return str(path)

  def export(self, path, format: str = "onnx") -> str:
    """Writes the deterministic policy (``act(..., deterministic=True, independent=True)``,
    preprocessing and normalization included) to ``path`` as a file that runs without
    batchrl: ``format="onnx"`` (onnxruntime; needs ``pip install "batchrl[export]"``) or
    ``"jax"`` (``jax.export`` StableHLO). Returns the path; see ``batchrl.export``."""
    return str(export_agent(self._rt, self._state, path, format))

  def _counters(self) -> dict:
    return {"timesteps": self.timesteps, "episodes": self.episodes, "updates": self.updates,
            "held": self._held.tolist(), "reward": self._reward.tolist(),
            "terminal": self._terminal.tolist(), "start": self._start.tolist(),
            "staged": self._staged.tolist(), "episode_steps": self._episode_steps.tolist(),
            "rows": self._rows}

  @classmethod
  def load(cls, directory) -> "Agent":
    """The agent saved in ``directory`` (its newest good checkpoint)."""
    spec = _read_spec(directory)
    agent = cls(spec)
    agent.restore(directory)
    return agent

  def restore(self, directory) -> None:
    """Restores this agent's state from the newest good checkpoint in ``directory`` (saved
    by an agent of the same spec)."""
    from batchrl import checkpoint
    saved = _read_spec(directory)
    if _comparable(saved) != _comparable(self.spec):
      raise ConfigError(f"the agent saved in {directory} has another spec; use "
                        "Agent.load(directory) to rebuild it.")
    state, manifest = checkpoint.restore(directory, self._device)
    counters = manifest.get("counters") or {}
    self._device = state
    if self._fast is not None:
      self._fast.forget()  # what it held belongs to the state just replaced
    self.timesteps = int(counters.get("timesteps", 0))
    self.episodes = int(counters.get("episodes", 0))
    self.updates = int(counters.get("updates", 0))
    self._learned = _learning_updates(self._rt.parts.model, state.model)
    self._acted[:] = False
    for name, dtype in (("held", bool), ("reward", np.float32), ("terminal", np.int32),
                        ("start", bool), ("staged", np.int64), ("episode_steps", np.int64)):
      if name in counters:
        setattr(self, f"_{name}", np.asarray(counters[name], dtype))
    self._next.clear()
    self._rows = counters.get("rows")

  def close(self) -> None:
    """Stores the transitions the fast path holds. The compiled programs belong to the
    runtime, shared by agents of the same spec but for the seed: they go once no agent
    holds it and it has left ``batchrl.agents.runtime``'s small cache of recent runtimes."""
    self._sync()


def _rewards_array(reward) -> np.ndarray:
  """``reward`` as float32, or an error that says it is the reward that is wrong (numpy's
  own says only that a string is not a float)."""
  try:
    return np.asarray(reward, np.float32)
  except (TypeError, ValueError):
    raise AgentUsageError(f"reward must be a number or a batch [k] of numbers, got "
                          f"{reward!r}.") from None


def _learning_updates(model: Model, state) -> int | None:
  """The count of updates that learned, for models whose ``update`` may skip learning
  (``Model.learned_updates``); None for models that learn in every update."""
  return None if model.learned_updates is None else int(model.learned_updates(state))


def _update_ran(commit: str, flush: int, update: str, flag) -> bool:
  """Whether a fused act ran an update; reads the device flag only where the model chose."""
  if commit == "none" or (commit == "staged" and flush == 0):
    return False
  if commit == "direct" and update != "cond":
    return update == "now"
  return bool(np.asarray(flag))


_SCALAR_CODES = {False: 0, True: 1, 2: 2}  # also matches 0, 1, 0.0, numpy scalars (==, hash)
_F32 = np.dtype(np.float32)
_F32_LIMIT = 2.0 ** 128 - 2.0 ** 103  # the float32 rounding of a number below this is finite
_DECLINED = object()  # _act_one: the general path takes this act
ONE_STREAM_SIZE = 64  # _act_one checks states in Python, ~10 ns an element


def _one_stream_shape(raw_space) -> tuple | None:
  """The shape of the states ``Agent._act_one`` takes: a single float vector state of at
  most ``ONE_STREAM_SIZE`` elements (None: every act takes the general path)."""
  if (isinstance(raw_space, gym.spaces.Box) and np.issubdtype(raw_space.dtype, np.floating)
      and len(raw_space.shape) == 1 and raw_space.shape[0] <= ONE_STREAM_SIZE):
    return tuple(raw_space.shape)
  return None


def _terminal_codes(terminal) -> int | np.ndarray:
  """One terminal code (an int) or ``int32[k]``; anything but bools and 0/1/2 is an error."""
  try:
    return _SCALAR_CODES[terminal]
  except (KeyError, TypeError):  # an array (unhashable) or a bad value
    pass
  codes = np.asarray(terminal)
  if codes.dtype == bool:
    codes = codes.astype(np.int32)
  elif codes.dtype.kind not in "iuf" or np.count_nonzero((codes != 0) & (codes != 1)
                                                          & (codes != 2)):
    raise AgentUsageError(f"terminal must be a bool or 0/1/2 (2 = cut short, bootstrap), "
                          f"got {terminal!r}.")
  return int(codes) if codes.ndim == 0 else codes.astype(np.int32)


# Host checks on every act/observe: np.count_nonzero instead of .any()/.all(), which go
# through numpy's reduction machinery and cost several times more on small arrays; one
# stream's flag is read directly.


def _any(mask: np.ndarray) -> bool:
  return bool(mask[0]) if mask.size == 1 else np.count_nonzero(mask) > 0


def _all(mask: np.ndarray) -> bool:
  return bool(mask[0]) if mask.size == 1 else np.count_nonzero(mask) == mask.size







def _comparable(spec: dict) -> str:
  return json.dumps(spec, sort_keys=True)


def _read_spec(directory) -> dict:
  path = Path(directory) / SPEC_FILE
  if not Path(directory).is_dir():
    raise FileNotFoundError(f"no saved agent at {str(directory)!r}: the directory does not "
                            "exist.")
  if not path.exists():
    raise FileNotFoundError(f"no saved agent in {str(directory)!r}: {SPEC_FILE} is missing "
                            "(save with agent.save(directory)).")
  return _load_json(path, "saved agent spec")


def _write_json_atomic(path: Path, value) -> None:
  tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
  tmp.write_text(json.dumps(value, indent=1, sort_keys=True), encoding="utf-8")
  os.replace(tmp, path)


def _jsonable(value):
  """The spec through JSON, so what is saved is exactly what was built (tuples -> lists)."""
  try:
    return json.loads(json.dumps(value, default=_json_default))
  except TypeError as e:
    raise ConfigError(f"the agent spec must be JSON-able: {e}") from None


def _json_default(value):
  if isinstance(value, np.generic):
    return value.item()
  if isinstance(value, np.ndarray):
    return value.tolist()
  raise TypeError(f"{type(value).__name__} {value!r} is not JSON-able")

