"""Runner: drives a ``batchrl.Agent`` through one or several environments (TensorForce style).

    runner = Runner(agent, environment='CartPole-v1')                  # one env: a plain loop
    runner = Runner(agent, environment='CartPole-v1', num_parallel=8)  # 8 copies, one BatchEnv
    runner = Runner(agent, environments=[MyEnv(), MyEnv()])            # instances work too
    runner.run(num_episodes=300, max_episode_timesteps=200, callback=report)
    agent.save('ckpt')          # run() never closes the agent
    runner.close()              # closes the environments the runner built (not the agent)

With several environments the runner steps them as one ``BatchEnv`` (ids in worker
processes, instances in this process) and makes ONE batched ``agent.act`` and ONE batched
``agent.observe`` per step for all of them: the agent's per-call cost is paid once per step,
not once per environment. That is the fastest way to feed simulators. For environments that
block on the outside world (real time, a remote simulator, a robot), where one slow env must
not hold back the others, use ``ThreadedRunner`` (``batchrl.execution.threaded``).

Terminal codes given to ``agent.observe``: 0 running, 1 the episode ended (terminated), 2 it
was cut short (the env's time limit, or ``max_episode_timesteps`` reached, which the runner
enforces itself and then resets that env). For code 2 the runner passes the observation the
env reached as ``next_states`` so the agent can bootstrap exactly.

Names: the seed's (TensorForce 0.3) ``run(episodes, timesteps, max_timesteps,
episode_finished)`` and the later ``run(num_episodes, num_timesteps, max_episode_timesteps,
callback, callback_episode_frequency, evaluation, use_tqdm)`` both work.

Statistics (``episode``, ``timestep``, ``episode_rewards``, ``episode_timesteps``,
``episode_times``) count within the current ``run()``. Episodes left open when a run stops
continue in the next training run, so ``run(num_timesteps=100)`` twice steps the same
trajectory as ``run(num_timesteps=200)``. An evaluation run (``evaluation=True``: acts with
``independent=True, deterministic=True`` and learns nothing) starts fresh episodes. A
training run that starts fresh episodes (the first one, or after an evaluation run or an
error) calls ``agent.reset()`` first, so the agent's streams start new episodes with the envs.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import sys
import time
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

# Seed (TensorForce 0.3) names -> later names. Giving both with different values is an error.
_ALIASES = (("episodes", "num_episodes"), ("timesteps", "num_timesteps"),
            ("max_timesteps", "max_episode_timesteps"), ("episode_finished", "callback"),
            ("use_tqdm", "progress"))


# ---------------------------------------------------------------------------------------
# Options of one run() call, shared with ThreadedRunner.


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """What one ``run()`` call does (aliases already resolved).

  Attributes:
    num_episodes: stop once this many episodes ended in this run (None: no limit).
    num_timesteps: stop once this many timesteps were taken in this run (None: no limit).
    max_episode_timesteps: cut episodes at this length (terminal 2, env reset); None: the
      runner's, else the agent's ``max_episode_timesteps``, else no limit.
    deterministic: act without exploration or sampling.
    evaluation: act with ``independent=True, deterministic=True`` and never observe.
    callback: ``callback(runner)`` or ``callback(runner, parallel)``, called after every
      ``callback_episode_frequency``-th episode; returning False stops the run.
    callback_episode_frequency: see ``callback``.
    progress: show a progress bar on stderr (None: only when stderr is a terminal).
  """

  num_episodes: int | None = None
  num_timesteps: int | None = None
  max_episode_timesteps: int | None = None
  deterministic: bool = False
  evaluation: bool = False
  callback: Callable | None = None
  callback_episode_frequency: int = 1
  progress: bool | None = None

  @property
  def mode(self) -> str:
    return "evaluation" if self.evaluation else "training"


def resolve_run_options(**given) -> RunOptions:
  """``RunOptions`` from ``run()``'s keyword arguments, seed names and later names mixed."""
  for seed_name, name in _ALIASES:
    seed_value, value = given.pop(seed_name, None), given.get(name)
    if seed_value is not None and value is not None and seed_value is not value and (
        seed_value != value):
      raise ValueError(f"run() got {seed_name}={seed_value!r} and {name}={value!r}; they are "
                       f"the same option (the seed's and the later name): give one")
    if value is None:
      given[name] = seed_value
  for name in ("num_episodes", "num_timesteps", "max_episode_timesteps"):
    check_count(given.get(name), name)
  frequency = given.get("callback_episode_frequency")
  given["callback_episode_frequency"] = 1 if frequency is None else frequency
  check_count(given["callback_episode_frequency"], "callback_episode_frequency")
  callback = given.get("callback")
  if callback is not None and not callable(callback):
    raise TypeError(f"callback must be callable as callback(runner) or callback(runner, "
                    f"parallel), got {type(callback).__name__} {callback!r}")
  for name in ("deterministic", "evaluation"):
    given[name] = bool(given.get(name))
  return RunOptions(**given)


def check_count(value, name: str) -> None:
  """Raises ValueError unless ``value`` is None or an int >= 1."""
  if value is None:
    return
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
    raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")


def episode_limit(options: RunOptions, runner_limit: int | None, agent) -> int | None:
  """The episode length the runner enforces: run's, else the runner's, else the agent's."""
  agent_limit = getattr(agent, "max_episode_timesteps", None)
  limit = options.max_episode_timesteps
  if limit is None:
    limit = runner_limit if runner_limit is not None else agent_limit
  if limit is not None and agent_limit is not None and limit > agent_limit:
    raise ValueError(f"max_episode_timesteps={limit} exceeds the agent's "
                     f"max_episode_timesteps={agent_limit}: create the agent with "
                     f"max_episode_timesteps>={limit} or run shorter episodes")
  return None if limit is None else int(limit)


def callback_caller(callback: Callable | None) -> Callable[[Any, int], bool]:
  """A function (runner, parallel) -> keep going?, whatever the callback's arity."""
  if callback is None:
    return lambda runner, parallel: True
  try:
    parameters = [p for p in inspect.signature(callback).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_parallel = len(parameters) >= 2 or any(
        p.kind is p.VAR_POSITIONAL for p in inspect.signature(callback).parameters.values())
  except (TypeError, ValueError):
    takes_parallel = False
  if takes_parallel:
    return lambda runner, parallel: callback(runner, parallel) is not False
  return lambda runner, parallel: callback(runner) is not False


# ---------------------------------------------------------------------------------------
# Statistics of a run, shared with ThreadedRunner.


class RunStats:
  """``episode``, ``timestep`` and the per-episode lists, plus TensorForce 0.6's names."""

  def _reset_stats(self) -> None:
    self.episode = 0
    self.timestep = 0
    self.episode_rewards: list[float] = []
    self.episode_timesteps: list[int] = []
    self.episode_times: list[float] = []

  def _record_episode(self, reward: float, length: int, seconds: float) -> None:
    self.episode += 1
    self.episode_rewards.append(float(reward))
    self.episode_timesteps.append(int(length))
    self.episode_times.append(float(seconds))

  # TensorForce 0.6 spells these differently.
  @property
  def episodes(self) -> int:
    return self.episode

  @property
  def timesteps(self) -> int:
    return self.timestep

  @property
  def episode_returns(self) -> list[float]:
    return self.episode_rewards

  @property
  def episode_seconds(self) -> list[float]:
    return self.episode_times

  def mean_reward(self, last: int = 100) -> float:
    """Mean reward of the last ``last`` episodes of this run (nan before the first)."""
    recent = self.episode_rewards[-last:]
    return float(np.mean(recent)) if recent else math.nan


class Progress:
  """A rich progress bar on stderr, or nothing when disabled."""

  def __init__(self, enabled: bool | None, options: RunOptions):
    enabled = sys.stderr.isatty() if enabled is None else bool(enabled)
    self.bar = self.task = None
    if not enabled:
      return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress
    self.unit = "episodes" if options.num_episodes is not None else "timesteps"
    total = options.num_episodes if options.num_episodes is not None else options.num_timesteps
    self.bar = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TextColumn(self.unit),
                            TimeElapsedColumn(), TextColumn("{task.fields[mean]}"),
                            console=Console(stderr=True), transient=False)
    self.task = self.bar.add_task(options.mode, total=total, mean="")
    self.bar.start()

  def update(self, stats: RunStats) -> None:
    if self.bar is None:
      return
    done = stats.episode if self.unit == "episodes" else stats.timestep
    mean = stats.mean_reward()
    self.bar.update(self.task, completed=done,
                    mean="" if math.isnan(mean) else f"mean reward (last 100) {mean:.2f}")

  def close(self, stats: RunStats) -> None:
    if self.bar is not None:
      self.update(stats)
      self.bar.stop()
      self.bar = None


# ---------------------------------------------------------------------------------------
# Pytree helpers: states and actions are arrays, or dicts / tuples of them.


def tree_map(function: Callable, tree):
  if isinstance(tree, dict):
    return {key: tree_map(function, value) for key, value in tree.items()}
  if isinstance(tree, tuple):
    return tuple(tree_map(function, value) for value in tree)
  return function(tree)


def tree_row(tree, i: int):
  """Row ``i`` of a batched structure."""
  return tree_map(lambda x: x[i], tree)


def tree_batch1(tree):
  """A batch of one: a leading axis of size 1 on every array."""
  return tree_map(lambda x: np.asarray(x)[None], tree)


def _tree_set_row(tree, i: int, value) -> None:
  if isinstance(tree, dict):
    for key in tree:
      _tree_set_row(tree[key], i, value[key])
  elif isinstance(tree, tuple):
    for part, item in zip(tree, value):
      _tree_set_row(part, i, item)
  else:
    tree[i] = value


def env_seeds(seed: int | None, n: int) -> list[int | None]:
  """One reset seed per environment: ``seed`` itself for one env, else derived ones."""
  if seed is None:
    return [None] * n
  if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
    raise ValueError(f"seed must be an int >= 0 or None, got {seed!r}")
  if n == 1:
    return [int(seed)]
  return [int(child.generate_state(1, np.uint64)[0])
          for child in np.random.SeedSequence(int(seed)).spawn(n)]


# ---------------------------------------------------------------------------------------
# Environments: what the caller gave -> gym envs, and who closes them.


class _Borrowed(gym.Wrapper):
  """A caller's Gymnasium env; the runner must not close it."""

  def close(self) -> None:
    pass


def environment_sources(environment, environments, num_parallel) -> list:
  """The list of environments (ids, gym envs, ``Environment`` instances) to step."""
  if environment is not None and environments is not None:
    raise ValueError("give environment=... (with num_parallel=N for N copies of an id) or "
                     "environments=[...], not both")
  if environments is None and isinstance(environment, (list, tuple)):
    environment, environments = None, environment
  if environments is None:
    if environment is None:
      raise ValueError("no environment: pass environment=<Environment | gymnasium env | id> "
                       "or environments=[...]")
    check_count(num_parallel, "num_parallel")
    n = 1 if num_parallel is None else int(num_parallel)
    if n > 1 and not isinstance(environment, str):
      raise ValueError(
          f"num_parallel={n} needs N copies, and an environment instance "
          f"({type(environment).__name__}) cannot be copied: pass environments=[env_1, ..., "
          f"env_{n}] (one instance per parallel stream) or a Gymnasium id")
    return [environment] * n
  sources = list(environments)
  if not sources:
    raise ValueError("environments is empty; give at least one environment")
  if num_parallel is not None and num_parallel != len(sources):
    raise ValueError(f"num_parallel={num_parallel!r} but {len(sources)} environments were "
                     "given; leave num_parallel out with environments=[...]")
  seen: dict[int, int] = {}
  for i, source in enumerate(sources):
    if not isinstance(source, str):
      if id(source) in seen:
        raise ValueError(f"environments[{seen[id(source)]}] and environments[{i}] are the same "
                         "instance; each parallel stream needs its own environment")
      seen[id(source)] = i
  return sources


def borrowed_gym_env(source) -> tuple[gym.Env, bool]:
  """(a gym env for ``source``, whether the runner built it and so must close it)."""
  from batchrl.envs.core import Environment, EnvironmentAsGym, as_gym_env
  if isinstance(source, str):
    return as_gym_env(source), True
  if isinstance(source, Environment):
    return EnvironmentAsGym(source, close_environment=False), False
  if isinstance(source, gym.Env):
    return _Borrowed(source), False
  return as_gym_env(source), True  # raises the TypeError naming what is accepted


def check_streams(agent, num_envs: int, training: bool = False) -> None:
  """Each environment needs its own parallel stream of the agent; training needs them all.

  Why all: the agent learns from rows holding one step of every stream, so a stream that no
  environment feeds would hold back the updates of the others (StreamAheadError).
  """
  for method in ("act", "observe"):
    if not callable(getattr(agent, method, None)):
      raise TypeError(f"agent must have act() and observe() (a batchrl.Agent), got "
                      f"{type(agent).__name__}")
  streams = int(getattr(agent, "parallel_interactions", 1) or 1)
  if num_envs > streams or (training and num_envs != streams):
    raise ValueError(f"{num_envs} environment(s) feed {num_envs} parallel stream(s), but the "
                     f"agent has parallel_interactions={streams}: create it with "
                     f"Agent.create(..., parallel_interactions={num_envs})"
                     + (" (training needs every stream fed; evaluation runs may use fewer "
                        "environments)" if num_envs < streams else ""))


# ---------------------------------------------------------------------------------------
# Drivers: one environment (plain) or several (a BatchEnv), with the same step contract:
# step(actions) -> (states, rewards [N], terminated [N], truncated [N], reached), where an
# env whose episode ended is already reset (``states`` holds its new first state) and
# ``reached`` holds the observation each env reached in this step (for bootstrapping).


class _SingleDriver:
  num_envs = 1

  def __init__(self, env: gym.Env, owned: bool, seed: int | None):
    self.env, self.owned, self.seed = env, owned, seed

  def reset(self, indices: Sequence[int] | None = None):
    seed, self.seed = self.seed, None  # the seed applies to the first reset only
    return self.env.reset(seed=seed)[0]

  def step(self, action):
    state, reward, terminated, truncated, _ = self.env.step(action)
    reached = state
    if terminated or truncated:
      state = self.env.reset()[0]
    return (state, np.array([reward], np.float64), np.array([bool(terminated)]),
            np.array([bool(truncated)]), reached)

  def close(self) -> None:
    if self.owned:
      self.env.close()


class _BatchDriver:
  def __init__(self, sources: list, num_workers: int | None, seed: int | None):
    from batchrl.envs.batch import BatchEnv
    all_ids = all(isinstance(source, str) for source in sources)
    if num_workers is None:
      num_workers = min(len(sources), 2) if all_ids else 0
    elif num_workers > 0 and not all_ids:
      raise ValueError(f"num_workers={num_workers}: environment instances cannot be moved to "
                       "worker processes; pass Gymnasium ids to use workers, or num_workers=0")
    constructors = [source if isinstance(source, str) else _constant(borrowed_gym_env(source)[0])
                    for source in sources]
    self.env = BatchEnv(constructors, num_workers=num_workers, seed=seed)
    self.num_envs = len(sources)

  def reset(self, indices: Sequence[int] | None = None):
    return self.env.reset(indices=indices)[0]

  def step(self, actions):
    states, rewards, terminated, truncated, infos = self.env.step(actions)
    reached = states
    ended = infos.get("_final_obs")
    if ended is not None and ended.any():
      reached = tree_map(np.array, states)  # a copy: rows of ended envs are replaced
      final = infos["final_obs"]
      for i in np.flatnonzero(ended):
        _tree_set_row(reached, i, final[i])
    return states, rewards, terminated, truncated, reached

  def close(self) -> None:
    self.env.close()


def _constant(env: gym.Env) -> Callable[[], gym.Env]:
  return lambda: env


# ---------------------------------------------------------------------------------------
# The runner.


class Runner(RunStats):
  """Runs an agent in one environment, or in several as one batch.

  Args:
    agent: a ``batchrl.Agent`` (anything with ``act``/``observe`` of that API).
    environment: a ``batchrl.envs.Environment``, a Gymnasium env, or a Gymnasium id.
    environments: a list of those, one per parallel stream of the agent (instances are
      stepped in this process, ids in worker processes).
    num_parallel: with ``environment`` an id: build N copies.
    max_episode_timesteps: default episode length limit of ``run()`` (see ``RunOptions``).
    num_workers: worker processes for several envs built from ids (default ``min(N, 2)``;
      0 steps them in this process). Instances always run in this process.
    seed: seeds the environments' first reset (per-env seeds derived from it).

  Attributes (of the current or last ``run()``): ``episode``, ``timestep``,
  ``episode_rewards``, ``episode_timesteps``, ``episode_times`` (seconds), and ``agent``,
  ``environment`` (the gym env or ``BatchEnv`` being stepped), ``environments`` (what was
  given), ``num_parallel``.
  """

  def __init__(self, agent, environment=None, environments=None, num_parallel=None,
               max_episode_timesteps=None, num_workers=None, seed=None):
    sources = environment_sources(environment, environments, num_parallel)
    check_streams(agent, len(sources))
    check_count(max_episode_timesteps, "max_episode_timesteps")
    if num_workers is not None and (isinstance(num_workers, bool) or
                                    not isinstance(num_workers, int) or num_workers < 0):
      raise ValueError(f"num_workers must be an int >= 0 or None, got {num_workers!r}")
    env_seeds(seed, 1)  # validates
    self.agent = agent
    self.environments = tuple(sources)
    self.num_parallel = len(sources)
    self.max_episode_timesteps = max_episode_timesteps
    if len(sources) == 1:
      env, owned = borrowed_gym_env(sources[0])
      self._driver = _SingleDriver(env, owned, seed)
    else:
      self._driver = _BatchDriver(sources, num_workers, seed)
    self.environment = self._driver.env
    self._open_mode: str | None = None  # mode of the env episodes in progress, None: none
    # The agent's streams may be mid-episode (the caller drove it, a training run stepped
    # them, or a run was interrupted between act and observe): when the envs start new
    # episodes for training, the agent's streams must too (agent.reset()).
    self._agent_dirty = True
    self._closed = False
    self._reset_stats()

  # -- public ---------------------------------------------------------------------------

  def run(self, num_episodes=None, num_timesteps=None, *, episodes=None, timesteps=None,
          max_timesteps=None, max_episode_timesteps=None, deterministic=False,
          evaluation=False, callback=None, episode_finished=None,
          callback_episode_frequency=None, progress=None, use_tqdm=None) -> None:
    """Runs until ``num_episodes`` episodes ended or ``num_timesteps`` timesteps were taken
    (whichever first; neither: until the callback returns False).

    Seed names: ``episodes``, ``timesteps``, ``max_timesteps`` (episode length limit),
    ``episode_finished``; later names: ``num_episodes``, ``num_timesteps``,
    ``max_episode_timesteps``, ``callback``, ``use_tqdm``. With several environments the
    limits are checked after each batched step, so a run may end a few episodes (and up
    to N-1 timesteps) past them; every episode that ended is recorded. The agent is left
    open: save it afterwards.
    """
    options = resolve_run_options(
        num_episodes=num_episodes, num_timesteps=num_timesteps, episodes=episodes,
        timesteps=timesteps, max_timesteps=max_timesteps,
        max_episode_timesteps=max_episode_timesteps, deterministic=deterministic,
        evaluation=evaluation, callback=callback, episode_finished=episode_finished,
        callback_episode_frequency=callback_episode_frequency, progress=progress,
        use_tqdm=use_tqdm)
    if self._closed:
      raise RuntimeError("run() on a closed Runner; create a new one")
    check_streams(self.agent, self.num_parallel, training=not options.evaluation)
    limit = episode_limit(options, self.max_episode_timesteps, self.agent)
    self._reset_stats()
    self._start_episodes(options.mode)
    self._agent_dirty = self._agent_dirty or not options.evaluation
    bar = Progress(options.progress, options)
    try:
      self._loop(options, limit, callback_caller(options.callback), bar)
    except BaseException:
      # An act may be waiting for its observe and the envs may be mid-step: the next run
      # starts over on both sides.
      self._open_mode, self._agent_dirty = None, True
      raise
    finally:
      bar.close(self)

  def close(self) -> None:
    """Closes the environments this runner built (ids); never the agent nor instances the
    caller passed in. Calling it again does nothing."""
    if not self._closed:
      self._closed = True
      self._driver.close()

  def __enter__(self) -> "Runner":
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  def __repr__(self) -> str:
    return f"Runner(num_parallel={self.num_parallel}, environment={self.environment!r})"

  # -- internals ------------------------------------------------------------------------

  def _start_episodes(self, mode: str) -> None:
    """Continues the open episodes of a previous run of the same mode, else starts new."""
    if self._open_mode == mode:
      self._episode_start[:] = time.perf_counter()
      return
    if mode == "training" and self._agent_dirty:
      self.agent.reset()  # its streams are mid-episode: start them over with the envs
      self._agent_dirty = False
    self._states = self._driver.reset()
    n = self._driver.num_envs
    self._lengths = np.zeros(n, np.int64)
    self._returns = np.zeros(n, np.float64)
    self._episode_start = np.full(n, time.perf_counter())
    self._open_mode = mode

  def _loop(self, options: RunOptions, limit: int | None, call_back, bar: Progress) -> None:
    act, observe = self._agent_calls(options)
    driver, n = self._driver, self._driver.num_envs
    lengths, returns = self._lengths, self._returns
    while True:
      actions = act(self._states)
      states, rewards, terminated, truncated, reached = driver.step(actions)
      lengths += 1
      returns += rewards
      cut = ~(terminated | truncated) & (lengths >= limit) if limit else None
      terminals = np.where(terminated, 1, np.where(truncated, 2, 0)).astype(np.int64)
      if cut is not None and cut.any():
        terminals[cut] = 2
      if observe is not None:
        observe(rewards, terminals, reached if (terminals == 2).any() else None)
      if cut is not None and cut.any():
        states = driver.reset(np.flatnonzero(cut).tolist())
      self._states = states
      self.timestep += n
      keep_going = True
      if terminals.any():
        keep_going = self._end_episodes(np.flatnonzero(terminals), options, call_back)
        bar.update(self)
      elif self.timestep % 64 < n:
        bar.update(self)
      if not keep_going or _reached(self, options):
        return

  def _agent_calls(self, options: RunOptions):
    """(act(states) -> actions, observe(rewards, terminals, next_states) or None)."""
    agent = self.agent
    if self._driver.num_envs == 1:
      if options.evaluation:
        return lambda state: agent.act(state, independent=True, deterministic=True), None

      def observe_one(rewards, terminals, next_states):
        extra = {} if next_states is None else {"next_states": next_states}
        agent.observe(reward=float(rewards[0]), terminal=int(terminals[0]), **extra)

      return lambda state: agent.act(state, deterministic=options.deterministic), observe_one
    parallel = list(range(self._driver.num_envs))
    if options.evaluation:
      return (lambda states: agent.act(states, parallel=parallel, independent=True,
                                       deterministic=True)), None

    def observe_batch(rewards, terminals, next_states):
      agent.observe(reward=rewards, terminal=terminals, parallel=parallel,
                    next_states=next_states)

    return (lambda states: agent.act(states, parallel=parallel,
                                     deterministic=options.deterministic)), observe_batch

  def _end_episodes(self, ended: np.ndarray, options: RunOptions, call_back) -> bool:
    now, keep_going = time.perf_counter(), True
    for i in ended:
      self._record_episode(self._returns[i], self._lengths[i], now - self._episode_start[i])
      self._returns[i], self._lengths[i], self._episode_start[i] = 0.0, 0, now
      if keep_going and self.episode % options.callback_episode_frequency == 0:
        keep_going = call_back(self, int(i))
    return keep_going


def _reached(stats: RunStats, options: RunOptions) -> bool:
  return ((options.num_episodes is not None and stats.episode >= options.num_episodes) or
          (options.num_timesteps is not None and stats.timestep >= options.num_timesteps))
