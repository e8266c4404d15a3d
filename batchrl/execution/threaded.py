"""ThreadedRunner: one Python thread per environment, all feeding ONE agent.

    runner = ThreadedRunner(agent, environments=[RobotEnv(host) for host in hosts])
    runner.run(num_episodes=100)

When to use which runner:

- ``Runner`` with several environments: the fastest for simulators. All envs step as one
  ``BatchEnv`` and the agent makes one batched ``act`` and one batched ``observe`` per step.
  But every step waits for the slowest env.
- ``ThreadedRunner``: for environments that wait on the outside world (real time, remote
  simulators, robots, network services). Each env steps in its own thread, so while one
  waits the others go on; its agent calls are single-row (``parallel=[i]``), which costs more
  agent calls than ``Runner`` makes. Threads only help where envs block (and so release
  Python's GIL); CPU-bound Python envs gain nothing.

Thread ``i`` uses the agent's parallel stream ``i`` (the agent needs
``parallel_interactions >= len(environments)``). The agent is not thread-safe: every agent call
is made under one lock, and env steps run outside it so blocking envs overlap. An agent
that updates on aligned rows of all streams (PPO) may refuse to let one stream run too
far ahead: ``act`` then raises ``batchrl.agent.errors.StreamAheadError`` and that thread
waits on a condition variable until another stream has made progress, then retries.

The callback (``callback(runner)`` or ``callback(runner, parallel)``) is called from the
thread whose episode ended, while it holds the agent lock: it sees consistent statistics
and may call the agent (e.g. ``agent.save``), but blocks every other thread's agent calls
while it runs, and must not call ``run`` again. An exception in any thread stops all of
them and is re-raised by ``run`` in the calling thread (with a note naming the env).

Statistics and episode continuation across ``run()`` calls behave as in ``Runner``.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from batchrl.agent.errors import StreamAheadError
from batchrl.execution.runner import (
  Progress,
  RunOptions,
  RunStats,
  borrowed_gym_env,
  callback_caller,
  check_count,
  check_streams,
  env_seeds,
  environment_sources,
  episode_limit,
  resolve_run_options,
  tree_batch1,
  tree_row,
)

_GIVE_UP = object()  # an agent call that can no longer succeed in this run


class _Slot:
  """One environment and its episode in progress."""

  def __init__(self, env, owned: bool, seed: int | None):
    self.env, self.owned, self.seed = env, owned, seed
    self.state = None
    self.needs_reset = True
    self.length, self.reward, self.start = 0, 0.0, 0.0

  def begin(self) -> None:
    """Starts a new episode (blocking env call: made outside the lock)."""
    seed, self.seed = self.seed, None  # the seed applies to the first reset only
    self.state = self.env.reset(seed=seed)[0]
    self.needs_reset = False
    self.length, self.reward, self.start = 0, 0.0, time.perf_counter()


class ThreadedRunner(RunStats):
  """Runs an agent in several environments, each in its own thread (see the module doc).

  Args:
    agent: a ``batchrl.Agent`` with ``parallel_interactions >= len(environments)``.
    environments: a list of ``batchrl.envs.Environment`` instances, Gymnasium envs or ids.
    environment: alternatively a Gymnasium id, of which ``num_parallel`` copies run.
    num_parallel: how many copies of ``environment``.
    max_episode_timesteps: default episode length limit of ``run()``.
    seed: seeds the environments' first reset (per-env seeds derived from it).
  """

  def __init__(self, agent, environments=None, environment=None, num_parallel=None,
               max_episode_timesteps=None, seed=None):
    sources = environment_sources(environment, environments, num_parallel)
    check_streams(agent, len(sources))
    check_count(max_episode_timesteps, "max_episode_timesteps")
    self.agent = agent
    self.environments = tuple(sources)
    self.num_parallel = len(sources)
    self.max_episode_timesteps = max_episode_timesteps
    self._slots = []
    try:
      for source, env_seed in zip(sources, env_seeds(seed, len(sources))):
        self._slots.append(_Slot(*borrowed_gym_env(source), env_seed))
    except BaseException:
      self._close_slots()
      raise
    self.environment = [slot.env for slot in self._slots]
    self._cond = threading.Condition(threading.Lock())
    self._open_mode: str | None = None
    self._agent_dirty = True  # see Runner: the agent may be mid-episode
    self._closed = False
    self._running = False
    self._reset_stats()

  # -- public ---------------------------------------------------------------------------

  def run(self, num_episodes=None, num_timesteps=None, *, episodes=None, timesteps=None,
          max_timesteps=None, max_episode_timesteps=None, deterministic=False,
          evaluation=False, callback=None, episode_finished=None,
          callback_episode_frequency=None, progress=None, use_tqdm=None) -> None:
    """Runs all environments until ``num_episodes`` episodes ended or ``num_timesteps``
    timesteps were taken in total (exactly: timesteps are handed out under the lock), or
    the callback returns False. Arguments as ``Runner.run``. The agent is left open."""
    options = resolve_run_options(
        num_episodes=num_episodes, num_timesteps=num_timesteps, episodes=episodes,
        timesteps=timesteps, max_timesteps=max_timesteps,
        max_episode_timesteps=max_episode_timesteps, deterministic=deterministic,
        evaluation=evaluation, callback=callback, episode_finished=episode_finished,
        callback_episode_frequency=callback_episode_frequency, progress=progress,
        use_tqdm=use_tqdm)
    if self._closed:
      raise RuntimeError("run() on a closed ThreadedRunner; create a new one")
    if self._running:
      raise RuntimeError("ThreadedRunner.run() is already running (a callback may not call it)")
    check_streams(self.agent, self.num_parallel, training=not options.evaluation)
    limit = episode_limit(options, self.max_episode_timesteps, self.agent)
    self._prepare(options)
    bar = Progress(options.progress, options)
    self._running = True
    try:
      self._run_threads(options, limit, bar)
    finally:
      self._running = False
      bar.close(self)

  def close(self) -> None:
    """Closes the environments this runner built (ids); never the agent nor the caller's
    instances. Calling it again does nothing."""
    if not self._closed:
      self._closed = True
      self._close_slots()

  def __enter__(self) -> "ThreadedRunner":
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  # -- internals ------------------------------------------------------------------------

  def _close_slots(self) -> None:
    for slot in self._slots:
      if slot.owned:
        slot.env.close()

  def _prepare(self, options: RunOptions) -> None:
    self._reset_stats()
    if self._open_mode != options.mode:
      if options.mode == "training" and self._agent_dirty:
        self.agent.reset()
        self._agent_dirty = False
      for slot in self._slots:
        slot.needs_reset = True
      self._open_mode = options.mode
    self._agent_dirty = self._agent_dirty or not options.evaluation
    self._stop = False
    self._error: BaseException | None = None
    self._started = 0  # timesteps handed out (acts made) in this run
    self._active = self.num_parallel
    self._ahead = (StreamAheadError,)

  def _run_threads(self, options: RunOptions, limit: int | None, bar: Progress) -> None:
    call_back = callback_caller(options.callback)
    threads = [threading.Thread(target=self._thread, args=(i, options, limit, call_back),
                                name=f"batchrl-runner-env-{i}", daemon=True)
               for i in range(self.num_parallel)]
    try:
      for thread in threads:
        thread.start()
      for thread in threads:
        while thread.is_alive():
          thread.join(0.1)
          bar.update(self)
    except BaseException:  # Ctrl-C in the caller: stop the threads, keep nothing open
      with self._cond:
        self._stop = True
        self._cond.notify_all()
      for thread in threads:
        thread.join(1.0)
      self._open_mode, self._agent_dirty = None, True
      raise
    if self._error is not None:
      self._open_mode, self._agent_dirty = None, True
      raise self._error

  def _thread(self, i: int, options: RunOptions, limit: int | None, call_back) -> None:
    try:
      self._steps(i, options, limit, call_back)
    except BaseException as error:
      with self._cond:
        if self._error is None:
          error.add_note(f"raised in the thread of environment {i} (ThreadedRunner)")
          self._error = error
        self._stop = True
        self._cond.notify_all()
    finally:
      with self._cond:
        self._active -= 1
        self._cond.notify_all()

  def _steps(self, i: int, options: RunOptions, limit: int | None, call_back) -> None:
    slot, act, observe = self._slots[i], *self._agent_calls(i, options)
    if slot.needs_reset:
      slot.begin()
    slot.start = time.perf_counter()
    while True:
      with self._cond:
        action = self._agent_call(lambda: act(slot.state), lambda: self._done(options))
        if action is _GIVE_UP:
          return
        self._started += 1
      state, reward, terminated, truncated, _ = slot.env.step(action)
      slot.length += 1
      slot.reward += float(reward)
      cut = bool(limit) and not (terminated or truncated) and slot.length >= limit
      terminal = 1 if terminated else 2 if (truncated or cut) else 0
      with self._cond:
        if observe is not None and self._agent_call(
            lambda: observe(reward, terminal, state if terminal == 2 else None)) is _GIVE_UP:
          slot.needs_reset, self._agent_dirty = True, True  # an act was left unobserved
          return
        self.timestep += 1
        if terminal:
          self._end_episode(i, slot, options, call_back)
        self._cond.notify_all()  # a stream progressed: waiting streams may retry
      if terminal:
        slot.begin()
      else:
        slot.state = state

  def _agent_calls(self, i: int, options: RunOptions):
    agent, parallel = self.agent, [i]
    if options.evaluation:
      return (lambda state: tree_row(agent.act(tree_batch1(state), parallel=parallel,
                                               independent=True, deterministic=True), 0)), None

    def act(state):
      actions = agent.act(tree_batch1(state), parallel=parallel,
                          deterministic=options.deterministic)
      return tree_row(actions, 0)

    def observe(reward, terminal, next_state):
      agent.observe(reward=np.array([reward], np.float64), terminal=np.array([terminal]),
                    parallel=parallel,
                    next_states=None if next_state is None else tree_batch1(next_state))

    return act, observe

  def _agent_call(self, call, cancelled=lambda: False):
    """``call()`` under the lock; while the agent says this stream is too far ahead, waits
    for another stream to progress. ``_GIVE_UP`` when ``cancelled()`` (checked before each
    try) or when no other stream can progress."""
    while True:
      if cancelled():
        return _GIVE_UP
      try:
        return call()
      except self._ahead:
        if self._active <= 1:
          return _GIVE_UP
        self._cond.wait(timeout=1.0)

  def _done(self, options: RunOptions) -> bool:
    """Whether this run hands out no more timesteps (called under the lock)."""
    return self._stop or (options.num_timesteps is not None and
                          self._started >= options.num_timesteps)

  def _end_episode(self, i: int, slot: _Slot, options: RunOptions, call_back) -> None:
    self._record_episode(slot.reward, slot.length, time.perf_counter() - slot.start)
    if self._stop:  # an episode another thread was finishing: recorded, no more callbacks
      return
    if self.episode % options.callback_episode_frequency == 0 and not call_back(self, i):
      self._stop = True
    if options.num_episodes is not None and self.episode >= options.num_episodes:
      self._stop = True  # (the timestep limit is enforced when acts are handed out)
