"""Runner and ThreadedRunner: episode bookkeeping, terminal codes, batching of agent calls,
truncation, callbacks, aliases, threads; with a fake agent that checks the Agent contract.
At the end: the real ``batchrl.Agent`` (PPO) through both runners."""
from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from batchrl.agent.errors import StreamAheadError
from batchrl.envs.core import Environment, EnvironmentAsGym, GymEnvironment, as_gym_env
from batchrl.execution import Runner, ThreadedRunner

# ---------------------------------------------------------------------------------------
# Test doubles.


class Corridor(Environment):
  """Walk right to ``length``: state [pos], reward = pos after the step, so an episode of
  L steps earns L(L+1)/2. ``cut_at``: execute returns terminal 2 at that step instead.
  ``delay``: seconds each step blocks (like a remote simulator)."""

  active = 0  # steps in progress across all instances (concurrency probe)
  max_active = 0
  probe = threading.Lock()

  def __init__(self, length=3, cut_at=None, delay=0.0, fail_at=None):
    super().__init__(states=dict(type="float", shape=(1,)),
                     actions=dict(type="int", num_values=2))
    self.length, self.cut_at, self.delay, self.fail_at = length, cut_at, delay, fail_at
    self.pos = self.t = 0
    self.seeds, self.closed, self.steps = [], 0, 0

  def reset(self, seed=None):
    self.seeds.append(seed)
    self.pos = self.t = 0
    return np.array([0.0], np.float32)

  def execute(self, actions):
    with Corridor.probe:
      Corridor.active += 1
      Corridor.max_active = max(Corridor.max_active, Corridor.active)
    try:
      if self.delay:
        time.sleep(self.delay)
      self.steps += 1
      if self.fail_at is not None and self.steps >= self.fail_at:
        raise RuntimeError("corridor broke")
      self.t += 1
      self.pos = self.pos + 1 if int(actions) == 1 else max(self.pos - 1, 0)
      terminal = 2 if self.cut_at is not None and self.t >= self.cut_at else int(
          self.pos >= self.length)
      return np.array([self.pos], np.float32), terminal, float(self.pos)
    finally:
      with Corridor.probe:
        Corridor.active -= 1

  def close(self):
    self.closed += 1


class NamedCorridor(Corridor):
  """The corridor with named states: dict(pos=[1], t=[]) ."""

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.states = dict(pos=dict(type="float", shape=(1,)), t=dict(type="int", num_values=100))

  def reset(self, seed=None):
    return dict(pos=super().reset(seed), t=0)

  def execute(self, actions):
    state, terminal, reward = super().execute(actions)
    return dict(pos=state, t=self.t), terminal, reward


class UsageError(ValueError):
  pass


class Ahead(StreamAheadError):
  """What a real agent raises when one stream runs too far ahead."""


class FakeAgent:
  """Follows the batchrl.Agent contract strictly: act/observe alternate per stream, indices in
  range, batched calls take [k, ...] arrays. Always moves right (action 1). Records calls.
  ``max_ahead``: act on a stream more than that many acts ahead of the slowest raises."""

  def __init__(self, parallel_interactions=1, max_episode_timesteps=None, max_ahead=None):
    self.parallel_interactions = parallel_interactions
    self.max_episode_timesteps = max_episode_timesteps
    self.max_ahead = max_ahead
    self.pending = [False] * parallel_interactions
    self.acts = [0] * parallel_interactions
    self.act_calls, self.observe_calls = [], []
    self.resets = self.closed = self.ahead_raised = self.max_spread = 0

  def act(self, states, parallel=None, deterministic=False, independent=False):
    batched = parallel is not None
    streams = list(parallel) if batched else [0]
    assert all(0 <= s < self.parallel_interactions for s in streams)
    leaves = list(states.values()) if isinstance(states, dict) else [states]
    if batched:
      assert all(np.shape(leaf)[0] == len(streams) for leaf in leaves)
    self.act_calls.append(dict(parallel=parallel, states=states, deterministic=deterministic,
                               independent=independent))
    if independent:
      return np.ones(len(streams), np.int64) if batched else 1
    for s in streams:
      if self.pending[s]:
        raise UsageError(f"act twice on stream {s} without observe")
    if self.max_ahead is not None:
      for s in streams:
        if self.acts[s] - min(self.acts) >= self.max_ahead:
          self.ahead_raised += 1
          raise Ahead(f"stream {s} is ahead")
    for s in streams:
      self.pending[s] = True
      self.acts[s] += 1
    self.max_spread = max(self.max_spread, max(self.acts) - min(self.acts))
    return np.ones(len(streams), np.int64) if batched else 1

  def observe(self, reward, terminal, parallel=None, next_states=None):
    streams = list(parallel) if parallel is not None else [0]
    for s in streams:
      if not self.pending[s]:
        raise UsageError(f"observe on stream {s} without act")
      self.pending[s] = False
    self.observe_calls.append(dict(parallel=parallel, reward=reward, terminal=terminal,
                                   next_states=next_states))
    return 0

  def reset(self):
    self.resets += 1
    self.pending = [False] * self.parallel_interactions

  def close(self):
    self.closed += 1

  def terminals(self):
    return [np.asarray(c["terminal"]).tolist() for c in self.observe_calls]


def tri(n):
  return n * (n + 1) / 2


# ---------------------------------------------------------------------------------------
# The adapter.


def test_environment_as_gym_splits_terminal_codes():
  env = EnvironmentAsGym(Corridor(length=2, cut_at=None))
  assert env.reset(seed=3) == (np.array([0.0], np.float32), {})
  assert env.environment.seeds == [3]
  assert env.step(1)[1:] == (1.0, False, False, {})
  assert env.step(1)[1:] == (2.0, True, False, {})
  cut = EnvironmentAsGym(Corridor(length=9, cut_at=1))
  cut.reset()
  assert cut.step(1)[2:4] == (False, True)
  assert isinstance(as_gym_env(Corridor()), EnvironmentAsGym)
  assert as_gym_env("CartPole-v1").spec.id == "CartPole-v1"
  with pytest.raises(TypeError, match="expected a batchrl.envs.Environment"):
    as_gym_env(42)


def test_environment_as_gym_refuses_bad_terminal_and_warns_on_seedless_reset():
  class Bad(Corridor):
    def execute(self, actions):
      return np.zeros(1, np.float32), 3, 0.0

  class Old(Corridor):
    def reset(self):  # TensorForce 0.3 style: no seed
      return np.zeros(1, np.float32)

  bad = EnvironmentAsGym(Bad())
  bad.reset()
  with pytest.raises(ValueError, match="terminal=3"):
    bad.step(0)
  with pytest.warns(RuntimeWarning, match="takes no seed"):
    EnvironmentAsGym(Old()).reset(seed=1)


def test_environment_as_gym_keeps_gym_environment_split_and_close_flag():
  wrapped = GymEnvironment(gym.wrappers.TimeLimit(gym.make("CartPole-v1").unwrapped, 2))
  env = EnvironmentAsGym(wrapped)
  env.reset(seed=0)
  env.step(0)
  assert env.step(0)[2:4] == (False, True)
  corridor = Corridor()
  EnvironmentAsGym(corridor, close_environment=False).close()
  assert corridor.closed == 0
  EnvironmentAsGym(corridor).close()
  assert corridor.closed == 1


# ---------------------------------------------------------------------------------------
# Runner, one environment.


def test_single_env_episodes_are_counted_exactly():
  agent, env = FakeAgent(), Corridor(length=3)
  runner = Runner(agent, environment=env)
  runner.run(num_episodes=4)
  assert runner.episode == 4 and runner.timestep == 12
  assert runner.episode_rewards == [tri(3)] * 4
  assert runner.episode_timesteps == [3] * 4
  assert len(runner.episode_times) == 4 and all(t >= 0 for t in runner.episode_times)
  assert agent.terminals() == [0, 0, 1] * 4
  assert all(c["parallel"] is None for c in agent.act_calls)  # plain, unbatched calls
  assert [float(c["states"][0]) for c in agent.act_calls[:4]] == [0.0, 1.0, 2.0, 0.0]
  assert runner.episodes == 4 and runner.episode_returns == runner.episode_rewards


def test_single_env_max_episode_timesteps_cuts_with_terminal_2_and_next_state():
  agent = FakeAgent()
  runner = Runner(agent, environment=Corridor(length=10), max_episode_timesteps=4)
  runner.run(num_episodes=2)
  assert runner.episode_timesteps == [4, 4] and runner.episode_rewards == [tri(4)] * 2
  assert agent.terminals() == [0, 0, 0, 2] * 2
  cut = agent.observe_calls[3]
  np.testing.assert_array_equal(cut["next_states"], [4.0])  # the state reached, not the reset
  assert all(c["next_states"] is None for c in agent.observe_calls[:3])
  np.testing.assert_array_equal(agent.act_calls[4]["states"], [0.0])  # the env was reset
  # run() overrides the runner's limit; the seed name max_timesteps is the same option
  runner.run(episodes=1, max_timesteps=2)
  assert runner.episode_timesteps == [2]


def test_env_truncation_is_terminal_2_and_termination_1():
  agent = FakeAgent()
  Runner(agent, environment=Corridor(length=10, cut_at=2)).run(num_timesteps=4)
  assert agent.terminals() == [0, 2, 0, 2]
  np.testing.assert_array_equal(agent.observe_calls[1]["next_states"], [2.0])


def test_agent_limit_applies_and_a_longer_run_limit_is_refused():
  agent = FakeAgent(max_episode_timesteps=5)
  runner = Runner(agent, environment=Corridor(length=100))
  runner.run(num_episodes=1)
  assert runner.episode_timesteps == [5]
  with pytest.raises(ValueError, match="exceeds the agent's max_episode_timesteps=5"):
    runner.run(num_episodes=1, max_episode_timesteps=6)


def test_callback_stops_and_receives_runner_or_parallel():
  agent = FakeAgent()
  seen = []

  def stop_after_two(r):
    seen.append(r.episode)
    return r.episode < 2

  runner = Runner(agent, environment=Corridor(length=2))
  runner.run(num_episodes=10, callback=stop_after_two)
  assert runner.episode == 2 and seen == [1, 2]
  seen.clear()
  runner.run(num_episodes=4, episode_finished=lambda r, parallel: seen.append(parallel))
  assert runner.episode == 4 and seen == [0] * 4  # None does not stop
  seen.clear()
  runner.run(num_episodes=5, callback=lambda r: seen.append(r.episode),
             callback_episode_frequency=2)
  assert seen == [2, 4]


def test_seed_and_later_names_conflict():
  runner = Runner(FakeAgent(), environment=Corridor())
  with pytest.raises(ValueError, match="episodes=3 and num_episodes=4"):
    runner.run(num_episodes=4, episodes=3)
  with pytest.raises(ValueError, match="max_timesteps=3 and max_episode_timesteps=4"):
    runner.run(num_episodes=1, max_timesteps=3, max_episode_timesteps=4)
  with pytest.raises(ValueError, match="num_timesteps must be an int >= 1"):
    runner.run(num_timesteps=0)
  runner.run(episodes=2, num_episodes=2, timesteps=None)  # the same value twice is fine
  assert runner.episode == 2


def test_run_never_closes_the_agent_and_close_closes_only_what_the_runner_built():
  agent, env = FakeAgent(), Corridor()
  with Runner(agent, environment=env) as runner:
    runner.run(num_episodes=1)
    assert agent.closed == 0
  assert agent.closed == 0 and env.closed == 0  # a caller's instance stays open
  runner = Runner(agent, environment="CartPole-v1", seed=0)
  closed = []
  runner.environment.close = lambda: closed.append(True)
  runner.run(num_timesteps=3)
  runner.close()
  runner.close()  # idempotent
  assert agent.closed == 0 and closed == [True]  # it built this env from an id
  with pytest.raises(RuntimeError, match="closed Runner"):
    runner.run(num_timesteps=1)


def test_episodes_left_open_continue_in_the_next_training_run():
  agent, env = FakeAgent(), Corridor(length=3)
  runner = Runner(agent, environment=env)
  runner.run(num_timesteps=2)
  assert runner.episode == 0
  runner.run(num_timesteps=2)
  assert runner.episode_timesteps == [3] and runner.episode_rewards == [tri(3)]
  assert env.seeds == [None, None] and agent.resets == 1  # the agent started over with the env
  # an evaluation run starts fresh episodes, acts independently, observes nothing
  observed = len(agent.observe_calls)
  runner.run(num_episodes=1, evaluation=True)
  assert len(agent.observe_calls) == observed
  assert agent.act_calls[-1]["independent"] and agent.act_calls[-1]["deterministic"]
  assert runner.episode_timesteps == [3]
  runner.run(num_episodes=1)  # back to training: the agent's streams start over too
  assert agent.resets == 2 and runner.episode_timesteps == [3]


def test_seed_reaches_the_first_reset_only():
  env = Corridor(length=2)
  Runner(FakeAgent(), environment=env, seed=7).run(num_episodes=2)
  assert env.seeds == [7, None, None]


def test_an_env_error_propagates_and_the_next_run_starts_over():
  agent, env = FakeAgent(), Corridor(length=5, fail_at=3)
  runner = Runner(agent, environment=env)
  with pytest.raises(RuntimeError, match="corridor broke"):
    runner.run(num_episodes=1)
  env.fail_at = None
  runner.run(num_episodes=1)  # no "act twice": the agent was reset
  assert agent.resets == 2 and runner.episode_timesteps == [5]


def test_bad_environment_arguments_are_clear_errors():
  agent = FakeAgent(parallel_interactions=4)
  with pytest.raises(ValueError, match="cannot be copied"):
    Runner(agent, environment=Corridor(), num_parallel=2)
  with pytest.raises(ValueError, match="parallel_interactions=4"):
    Runner(agent, environments=[Corridor() for _ in range(5)])
  env = Corridor()
  with pytest.raises(ValueError, match="same instance"):
    Runner(agent, environments=[env, env])
  with pytest.raises(ValueError, match="not both"):
    Runner(agent, environment=env, environments=[env])
  with pytest.raises(ValueError, match="num_workers=1"):
    Runner(agent, environments=[Corridor(), Corridor()], num_workers=1)
  with pytest.raises(ValueError, match="unknown environment id 'CartPol-v1'"):
    Runner(agent, environment="CartPol-v1")


# ---------------------------------------------------------------------------------------
# Runner, several environments: one batched act and observe per step.


def test_instances_in_a_list_step_as_one_batch():
  agent = FakeAgent(parallel_interactions=3)
  envs = [Corridor(length=3), Corridor(length=4), Corridor(length=5)]
  runner = Runner(agent, environments=envs)
  assert runner.environment.num_workers == 0
  runner.run(num_timesteps=12)
  assert runner.timestep == 12 and len(agent.act_calls) == 4 and len(agent.observe_calls) == 4
  assert all(c["parallel"] == [0, 1, 2] for c in agent.act_calls + agent.observe_calls)
  assert agent.terminals() == [[0, 0, 0], [0, 0, 0], [1, 0, 0], [0, 1, 0]]
  assert runner.episode_timesteps == [3, 4] and runner.episode_rewards == [tri(3), tri(4)]
  np.testing.assert_array_equal(agent.act_calls[3]["states"], [[0.0], [3.0], [3.0]])
  runner.close()
  assert all(env.closed == 0 for env in envs)


def test_batched_cut_gives_terminal_2_next_states_and_resets_that_env():
  agent = FakeAgent(parallel_interactions=2)
  runner = Runner(agent, environments=[Corridor(length=2), Corridor(length=10)], seed=1)
  runner.run(num_timesteps=8, max_episode_timesteps=3)
  assert agent.terminals() == [[0, 0], [1, 0], [0, 2], [1, 0]]
  cut = agent.observe_calls[2]
  np.testing.assert_array_equal(cut["next_states"], [[1.0], [3.0]])
  assert agent.observe_calls[1]["next_states"] is None  # only for terminal 2
  np.testing.assert_array_equal(agent.act_calls[3]["states"], [[1.0], [0.0]])
  assert runner.episode_timesteps == [2, 3, 2]


def test_batched_seeds_are_derived_per_env_and_reproducible():
  def first_seeds(seed):
    envs = [Corridor(), Corridor()]
    Runner(FakeAgent(parallel_interactions=2), environments=envs, seed=seed).run(num_timesteps=2)
    return [env.seeds[0] for env in envs]

  a, b = first_seeds(5), first_seeds(5)
  assert a == b and a[0] != a[1] and None not in a
  assert first_seeds(6) != a


def test_batched_named_states_and_env_truncation():
  agent = FakeAgent(parallel_interactions=2)
  runner = Runner(agent, environments=[NamedCorridor(length=9, cut_at=2),
                                       NamedCorridor(length=1)])
  runner.run(num_timesteps=4)
  assert agent.terminals() == [[0, 1], [2, 1]]
  next_states = agent.observe_calls[1]["next_states"]
  np.testing.assert_array_equal(next_states["pos"], [[2.0], [1.0]])
  np.testing.assert_array_equal(next_states["t"], [2, 1])
  np.testing.assert_array_equal(agent.act_calls[1]["states"]["pos"], [[1.0], [0.0]])


def test_copies_of_an_id_in_process_and_in_workers():
  agent = FakeAgent(parallel_interactions=2)
  with Runner(agent, environment="CartPole-v1", num_parallel=2, num_workers=0, seed=0) as r:
    r.run(num_episodes=3)
    # CartPole pays 1 per step and always-right ends episodes within a few dozen steps
    assert r.episode_rewards == [float(n) for n in r.episode_timesteps]
    assert r.episode >= 3 and all(8 <= n <= 40 for n in r.episode_timesteps)
  with Runner(agent, environment="CartPole-v1", num_parallel=2, seed=0) as r:
    assert r.environment.num_workers == 2  # ids go to worker processes by default
    r.run(num_timesteps=10)
    assert r.timestep == 10
  with pytest.raises(ValueError, match="num_parallel=3 but 2 environments"):
    Runner(agent, environments=["CartPole-v1"] * 2, num_parallel=3)


def test_gym_instances_and_ids_mix_in_process_and_instances_stay_open():
  agent = FakeAgent(parallel_interactions=3)
  closed = []
  envs = [gym.make("CartPole-v1"), gym.make("CartPole-v1")]
  for env in envs:
    env.close = lambda: closed.append(True)
  runner = Runner(agent, environments=[*envs, "CartPole-v1"], seed=0)
  assert runner.environment.num_workers == 0  # instances cannot move to workers
  runner.run(num_timesteps=30)
  runner.close()
  assert runner.timestep == 30 and closed == []


def test_evaluation_in_batch_acts_independently():
  agent = FakeAgent(parallel_interactions=2)
  runner = Runner(agent, environments=[Corridor(length=2), Corridor(length=2)])
  runner.run(num_episodes=2, evaluation=True)
  assert not agent.observe_calls and runner.episode == 2
  assert all(c["independent"] and c["parallel"] == [0, 1] for c in agent.act_calls)


# ---------------------------------------------------------------------------------------
# ThreadedRunner.


def test_threaded_runner_counts_exactly_and_uses_one_stream_per_thread():
  agent = FakeAgent(parallel_interactions=3)
  envs = [Corridor(length=2), Corridor(length=3), Corridor(length=4)]
  runner = ThreadedRunner(agent, environments=envs, seed=3)
  runner.run(num_timesteps=30)
  assert runner.timestep == 30 and sum(agent.acts) == 30
  assert all(len(c["parallel"]) == 1 for c in agent.act_calls)
  per_stream = {s: [float(c["reward"][0]) for c in agent.observe_calls if c["parallel"] == [s]]
                for s in range(3)}
  for s, length in enumerate((2, 3, 4)):  # each stream walks its own corridor
    steps = len(per_stream[s])
    assert per_stream[s] == [float(t % length + 1) for t in range(steps)]
  assert set(runner.episode_timesteps) <= {2, 3, 4}
  assert sum(runner.episode_rewards) == pytest.approx(
      sum(tri(n) for n in runner.episode_timesteps))
  assert len({env.seeds[0] for env in envs}) == 3
  runner.close()
  assert agent.closed == 0 and all(env.closed == 0 for env in envs)


def test_threaded_steps_overlap_and_ahead_streams_wait():
  Corridor.max_active = 0
  agent = FakeAgent(parallel_interactions=3, max_ahead=2)
  envs = [Corridor(length=5, delay=d) for d in (0.0, 0.002, 0.004)]
  runner = ThreadedRunner(agent, environments=envs)
  runner.run(num_timesteps=60)
  assert runner.timestep == 60
  assert Corridor.max_active >= 2  # env steps ran concurrently, outside the agent lock
  assert agent.ahead_raised > 0 and agent.max_spread <= 2  # the fast stream waited


def test_threaded_episode_limit_callback_and_truncation():
  agent = FakeAgent(parallel_interactions=2)
  runner = ThreadedRunner(agent, environments=[Corridor(length=9), Corridor(length=9)],
                          max_episode_timesteps=3)
  seen = []
  runner.run(episodes=4, episode_finished=lambda r, parallel: seen.append(parallel))
  # the other thread may finish the episode it was in the middle of: recorded too
  assert runner.episode in (4, 5) and set(runner.episode_timesteps) == {3}
  assert len(seen) == 4 and set(seen) <= {0, 1}
  cuts = [c for c in agent.observe_calls if c["terminal"][0] == 2]
  assert cuts and all(c["next_states"].shape == (1, 1) and c["next_states"][0, 0] == 3.0
                      for c in cuts)
  calls = []
  runner.run(num_episodes=10, callback=lambda r: calls.append(r.episode) or r.episode < 3)
  assert calls == [1, 2, 3] and runner.episode in (3, 4)


def test_threaded_error_stops_all_threads_and_is_reraised():
  agent, broken = FakeAgent(parallel_interactions=2), Corridor(length=4, fail_at=5)
  runner = ThreadedRunner(agent, environments=[Corridor(length=4, delay=0.001), broken])
  with pytest.raises(RuntimeError, match="corridor broke") as info:
    runner.run(num_timesteps=1000)
  assert any("thread of environment 1" in note for note in info.value.__notes__)
  assert runner.timestep < 1000
  broken.fail_at = None
  runner.run(num_timesteps=4)  # starts over: the agent's pending act was dropped
  assert agent.resets == 2 and runner.timestep == 4


def test_threaded_evaluation_and_instance_copy_error():
  agent = FakeAgent(parallel_interactions=2)
  runner = ThreadedRunner(agent, environments=[Corridor(length=2), Corridor(length=2)])
  runner.run(num_episodes=2, evaluation=True)
  assert not agent.observe_calls and all(c["independent"] for c in agent.act_calls)
  with pytest.raises(ValueError, match="cannot be copied"):
    ThreadedRunner(agent, environment=Corridor(), num_parallel=2)
  with pytest.raises(ValueError, match="parallel_interactions=2"):
    ThreadedRunner(agent, environments=[Corridor() for _ in range(3)])


def test_training_needs_every_stream_fed_evaluation_does_not():
  agent = FakeAgent(parallel_interactions=2)
  runner = Runner(agent, environment=Corridor(length=2))
  with pytest.raises(ValueError, match="training needs every stream fed"):
    runner.run(num_episodes=1)
  runner.run(num_episodes=1, evaluation=True)
  assert runner.episode == 1
  with pytest.raises(ValueError, match="parallel_interactions=2"):
    ThreadedRunner(agent, environments=[Corridor()]).run(num_episodes=1)


# ---------------------------------------------------------------------------------------
# The real batchrl.Agent (its compiled calls cost seconds: few agents, shared by tests).

CORRIDOR_SPECS = dict(states=dict(type="float", shape=(1,)),
                      actions=dict(type="int", num_values=2))


@pytest.fixture(scope="module")
def random_agents():
  from batchrl import Agent
  return {n: Agent.create("random", **CORRIDOR_SPECS, parallel_interactions=n, seed=0)
          for n in (1, 3)}


def test_real_agent_single_env_with_cuts(random_agents):
  agent = random_agents[1]
  before = agent.timesteps
  runner = Runner(agent, environment=Corridor(length=4), max_episode_timesteps=6, seed=0)
  runner.run(num_timesteps=200)
  assert agent.timesteps - before == runner.timestep == 200
  assert runner.episode >= 10 and set(runner.episode_timesteps) <= set(range(4, 7))
  # an episode shorter than the cut reached the goal: its last reward was 4
  assert all(n == 6 or r >= 4 for r, n in zip(runner.episode_rewards, runner.episode_timesteps))
  runner.run(num_episodes=3, evaluation=True)
  assert runner.episode == 3 and agent.timesteps - before == 200  # independent acts


def test_real_agent_batched_and_threaded_with_stream_ahead(random_agents, monkeypatch):
  from batchrl.agent import StreamAheadError as public
  assert public is StreamAheadError  # the name users catch is the one the runner waits on
  agent = random_agents[3]
  runner = Runner(agent, environments=[Corridor(length=3) for _ in range(3)],
                  max_episode_timesteps=5)
  runner.run(num_timesteps=60)
  assert runner.timestep == 60 and runner.episode > 0
  raised = []
  act = agent.act

  def spying_act(*args, **kwargs):
    try:
      return act(*args, **kwargs)
    except StreamAheadError:
      raised.append(kwargs.get("parallel"))
      raise

  monkeypatch.setattr(agent, "act", spying_act)
  envs = [Corridor(length=3, delay=d) for d in (0.0, 0.003, 0.003)]
  threaded_runner = ThreadedRunner(agent, environments=envs, max_episode_timesteps=5)
  threaded_runner.run(num_timesteps=90)
  assert threaded_runner.timestep == 90 and threaded_runner.episode > 0
  assert raised and [0] in raised  # the fast stream got ahead and waited


@pytest.fixture(scope="module")
def ppo_agent():
  from batchrl import Agent
  return Agent.create("ppo", **CORRIDOR_SPECS, parallel_interactions=2, batch_size=32,
                      optimizer_batch_size=16, epochs=1, network=[dict(type="dense", size=8)],
                      max_episode_timesteps=20, seed=0)


def test_real_ppo_learns_through_runner_and_saves_after_run(ppo_agent, tmp_path):
  from batchrl import Agent
  runner = Runner(ppo_agent, environments=[Corridor(length=3), Corridor(length=5)])
  runner.run(num_timesteps=300, max_episode_timesteps=10)
  assert runner.timestep == 300 and ppo_agent.timesteps == 300
  assert ppo_agent.updates >= 5  # a batch of 32 timesteps per update
  assert max(runner.episode_timesteps) <= 10
  path = ppo_agent.save(tmp_path / "ppo")  # run() left the agent usable
  loaded = Agent.load(tmp_path / "ppo")
  assert path.startswith(str(tmp_path)) and loaded.timesteps == 300
  runner.close()
