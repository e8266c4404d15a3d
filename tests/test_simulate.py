"""In-graph environments, InGraphBatchEnv and the fused simulate() step."""
import functools
from typing import NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from batchrl import simulation as S
from batchrl.agents.core import Transition
from batchrl.agents.simple.model import fixed_agent, random_agent, sample_space
from batchrl.envs.ingraph import InGraphBatchEnv
from batchrl.envs.jax_env import BraxEnv, EnvStep, GymnaxEnv, VecEnv, make_vec
from batchrl.train import fused

DURATIONS = (1, 2, 3, 4)


class DurationEnv:
  """Batched in-graph mock: env i's episodes last DURATIONS[i] steps; obs = step in episode."""

  num_envs = len(DURATIONS)
  single_observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
  single_action_space = gym.spaces.Discrete(2)

  def reset(self, key):
    del key
    t = jnp.zeros((self.num_envs,), jnp.int32)
    return t[:, None].astype(jnp.float32), t

  def step(self, key, t, action):
    del key, action
    t = t + 1
    done = t >= jnp.asarray(DURATIONS)
    final = t[:, None].astype(jnp.float32)
    t = jnp.where(done, 0, t)
    reward = jnp.ones((self.num_envs,), jnp.float32)
    truncated = jnp.zeros_like(done)
    return EnvStep(t[:, None].astype(jnp.float32), t, reward, done, truncated, final, {})


class _Single(NamedTuple):
  t: jax.Array


class CountdownEnv:
  """Single JAX env (for VecEnv): ends after 3 steps, truncates at 5 if `limit`."""

  observation_space = gym.spaces.Box(-np.inf, np.inf, (), np.float32)
  action_space = gym.spaces.Discrete(2)

  def __init__(self, length=3, limit=None):
    self.length, self.limit = length, limit

  def reset(self, key):
    del key
    return jnp.float32(0), _Single(jnp.int32(0))

  def step(self, key, state, action):
    del key
    t = state.t + 1
    terminated = t >= self.length
    truncated = jnp.bool_(False) if self.limit is None else (t >= self.limit) & ~terminated
    return t.astype(jnp.float32), _Single(t), jnp.float32(action), terminated, truncated, {}


def zeros_policy(obs):
  return jnp.zeros((obs.shape[0],), jnp.int32)


ZERO = fixed_agent(zeros_policy)


def test_done_pattern_with_automatic_resets():
  env = DurationEnv()
  sim = S.init(env, ZERO, jax.random.key(0))
  sim, ro = jax.jit(functools.partial(S.simulate, env, ZERO, num_steps=12))(sim)
  done = np.asarray(ro.done)
  for i, d in enumerate(DURATIONS):
    expected = [(t + 1) % d == 0 for t in range(12)]
    assert done[:, i].tolist() == expected, f"env {i} with duration {d}"
  np.testing.assert_array_equal(np.asarray(ro.episode_length)[done],
                                np.asarray(ro.episode_return)[done])
  lengths = np.asarray(ro.episode_length)
  for i, d in enumerate(DURATIONS):
    assert set(lengths[done[:, i], i].tolist()) == {d}
  # final observation of a finished episode is its last one, not the reset one
  final = np.asarray(ro.transitions.next_obs)[..., 0]
  np.testing.assert_array_equal(final[done], lengths[done])


def test_done_pattern_with_forced_reset():
  env = DurationEnv()
  run = jax.jit(functools.partial(S.simulate, env, ZERO, num_steps=2))
  sim, ro = run(S.init(env, ZERO, jax.random.key(0)))
  sim = S.restart(env, sim)  # env 3 (duration 4) was half way; now starts over
  assert np.all(np.asarray(sim.episode_length) == 0)
  sim, ro = jax.jit(functools.partial(S.simulate, env, ZERO, num_steps=4))(sim)
  assert np.asarray(ro.done)[:, 3].tolist() == [False, False, False, True]
  assert np.asarray(ro.done)[:, 2].tolist() == [False, False, True, False]


def test_vecenv_autoreset_and_truncation():
  env = VecEnv(CountdownEnv(length=10, limit=4), 3)
  agent = fixed_agent(lambda obs: jnp.ones(obs.shape[0], jnp.int32))
  sim, ro = S.simulate(env, agent, S.init(env, agent, jax.random.key(1)), 9)
  truncated = np.asarray(ro.transitions.truncated)[:, 0]
  assert truncated.tolist() == [False, False, False, True, False, False, False, True, False]
  assert not np.asarray(ro.transitions.terminated).any()
  assert np.asarray(ro.transitions.next_obs)[3, 0] == 4.0  # final obs, not reset obs
  assert np.asarray(ro.transitions.obs)[4, 0] == 0.0  # next step starts a new episode
  assert np.asarray(ro.episode_return)[3].tolist() == [4.0, 4.0, 4.0]


def test_vecenv_rejects_bad_num_envs():
  with pytest.raises(ValueError, match="num_envs must be a positive int"):
    VecEnv(CountdownEnv(), 0)


def test_simulate_rejects_bad_mode_and_steps():
  env = DurationEnv()
  sim = S.init(env, ZERO, jax.random.key(0))
  with pytest.raises(ValueError, match="valid: observe, store, track"):
    S.simulate(env, ZERO, sim, 2, mode="learn")
  with pytest.raises(ValueError, match="num_steps must be a positive int"):
    S.simulate(env, ZERO, sim, 0)


@pytest.mark.gymnax
def test_unknown_gymnax_id_suggests_close_ids():
  with pytest.raises(ValueError, match="did you mean 'CartPole-v1'"):
    make_vec("CartPol-v1", 4)
  with pytest.raises(ValueError, match="valid: 'gymnax', 'brax'"):
    make_vec("CartPole-v1", 4, backend="mujoco")


@pytest.mark.gymnax
def test_gymnax_spaces_convert_to_gymnasium():
  env = make_vec("Pendulum-v1", 2)
  space = env.single_action_space
  assert isinstance(space, gym.spaces.Box) and space.shape == (1,)
  np.testing.assert_allclose(space.high, [2.0])
  assert env.single_observation_space.shape == (3,)
  assert make_vec("CartPole-v1", 2).single_action_space == gym.spaces.Discrete(2)


@pytest.mark.gymnax
def test_gymnax_in_simulate_matches_stepping_outside_jit():
  """simulate() inside jit gives exactly the trajectory of the env stepped by hand."""
  num_envs, steps = 4, 60
  env = make_vec("CartPole-v1", num_envs)
  agent = random_agent(env.single_action_space)
  sim0 = S.init(env, agent, jax.random.key(3))
  _, ro = jax.jit(functools.partial(S.simulate, env, agent, num_steps=steps))(sim0)

  single = GymnaxEnv.make("CartPole-v1")
  state, obs, key = sim0.env_state, sim0.obs, sim0.key
  for t in range(steps):
    key, act_key, env_key = jax.random.split(key, 3)
    action = sample_space(act_key, env.single_action_space, num_envs)
    step_key, reset_key = jax.random.split(env_key)
    step_keys = jax.random.split(step_key, num_envs)
    reset_keys = jax.random.split(reset_key, num_envs)
    for i in range(num_envs):
      sub = jax.tree.map(lambda x: x[i], state)
      o, s, r, term, trunc, _ = single.step(step_keys[i], sub, action[i])
      np.testing.assert_allclose(ro.transitions.next_obs[t, i], o, rtol=1e-5, atol=1e-6)
      assert float(ro.transitions.reward[t, i]) == float(r)
      assert bool(ro.done[t, i]) == bool(term | trunc)
    obs, state = _host_step(single, env, state, action, step_keys, reset_keys)
    np.testing.assert_allclose(ro.transitions.obs[t + 1] if t + 1 < steps else obs, obs,
                               rtol=1e-5, atol=1e-6)


def _host_step(single, env, state, action, step_keys, reset_keys):
  outs = [single.step(step_keys[i], jax.tree.map(lambda x: x[i], state), action[i])
          for i in range(env.num_envs)]
  new_obs, new_state = [], []
  for i, (o, s, _, term, trunc, _) in enumerate(outs):
    if bool(term | trunc):
      o, s = single.reset(reset_keys[i])
    new_obs.append(o)
    new_state.append(s)
  stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)
  return stack(new_obs), stack(new_state)


def test_random_agent_samples_inside_the_space():
  key = jax.random.key(0)
  for space in (gym.spaces.Discrete(3, start=1), gym.spaces.MultiDiscrete([2, 5]),
                gym.spaces.MultiBinary(3), gym.spaces.Box(-2, 3, (2,), np.float32)):
    x = np.asarray(sample_space(key, space, 64))
    assert all(space.contains(v.astype(space.dtype)) for v in x), space
  with pytest.raises(ValueError, match="random_agent was built for"):
    agent = random_agent(gym.spaces.Discrete(3))
    agent.init(key, S.env_spec(DurationEnv()))


def _host_cartpoles(n):
  return SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n)],
                       autoreset_mode=AutoresetMode.SAME_STEP)


def test_ingraph_batch_env_matches_host_env():
  """A host vector env through io_callback gives the trajectory of the same env stepped directly."""
  flip = fixed_agent(lambda obs: (obs[:, 2] > 0).astype(jnp.int32))  # push towards the lean
  env = InGraphBatchEnv(_host_cartpoles(3))
  sim = S.init(env, flip, jax.random.key(5))
  _, ro = jax.jit(functools.partial(S.simulate, env, flip, num_steps=80))(sim)
  assert np.asarray(ro.done).any()

  ref = _host_cartpoles(3)
  seed = int(jax.random.randint(jax.random.split(jax.random.key(5), 3)[0], (), 0,
                                np.iinfo(np.int32).max))
  obs, _ = ref.reset(seed=seed)
  for t in range(80):
    np.testing.assert_allclose(np.asarray(ro.transitions.obs[t]), obs, rtol=1e-6)
    obs, reward, term, trunc, infos = ref.step((obs[:, 2] > 0).astype(np.int64))
    np.testing.assert_array_equal(np.asarray(ro.done[t]), term | trunc)
    for i in np.flatnonzero(infos.get("_final_obs", [])):
      np.testing.assert_allclose(np.asarray(ro.transitions.next_obs[t, i]),
                                 infos["final_obs"][i], rtol=1e-6)


def test_ingraph_lanes_step_every_lane_in_one_host_call():
  """``lanes=2`` over 6 host CartPoles: two lanes of 3, stepped under ``vmap`` in one host
  call each step; lane l, env i is host env 3l + i, stepped as directly."""
  flip = fixed_agent(lambda obs: (obs[:, 2] > 0).astype(jnp.int32))
  host = _host_cartpoles(6)
  calls = []
  step = host.step
  host.step = lambda action: calls.append(np.shape(action)) or step(action)
  env = InGraphBatchEnv(host, lanes=2)
  assert env.num_envs == 3
  keys = jax.random.split(jax.random.key(5), 2)
  sims = jax.jit(jax.vmap(functools.partial(S.init, env, flip)))(keys)
  assert sims.obs.shape == (2, 3, 4)
  run = jax.vmap(functools.partial(S.simulate, env, flip, num_steps=60))
  _, ro = jax.jit(run)(sims)
  assert calls == [(6,)] * 60 and np.asarray(ro.done).any()

  ref = _host_cartpoles(6)  # reset from the first lane's key, as the lanes' host env is
  seed = int(jax.random.randint(jax.random.split(keys[0], 3)[0], (), 0,
                                np.iinfo(np.int32).max))
  obs, _ = ref.reset(seed=seed)
  for t in range(60):
    np.testing.assert_allclose(np.asarray(ro.transitions.obs[:, t]).reshape(6, 4), obs,
                               rtol=1e-6)
    obs, _, term, trunc, _ = ref.step((obs[:, 2] > 0).astype(np.int64))
    np.testing.assert_array_equal(np.asarray(ro.done[:, t]).reshape(6), term | trunc)


def test_ingraph_one_lane_steps_under_a_vmap_of_one():
  """``lanes=1`` (``--seeds 1``): the plain batch, stepped under a ``vmap`` of axis 1."""
  env = InGraphBatchEnv(_host_cartpoles(3), lanes=1)
  keys = jax.random.split(jax.random.key(0), 1)
  obs, state = jax.jit(jax.vmap(env.reset))(keys)
  out = jax.jit(jax.vmap(env.step))(keys, state, jnp.zeros((1, 3), jnp.int32))
  assert obs.shape == out.obs.shape == (1, 3, 4) and out.state.tolist() == [1]


def test_ingraph_lanes_refuse_a_wrong_split_and_a_step_outside_vmap():
  with pytest.raises(ValueError, match="lanes must be None or a positive int dividing the "
                     "host env's 3 envs, got 2"):
    InGraphBatchEnv(_host_cartpoles(3), lanes=2)
  env = InGraphBatchEnv(_host_cartpoles(4), lanes=2)
  with pytest.raises(Exception, match="holds 2 lanes of 2 envs: step and reset it under "
                     "jax.vmap over its lanes"):
    jax.block_until_ready(jax.jit(env.reset)(jax.random.key(0)))
  with pytest.raises(ValueError, match="runs under jax.vmap over its lanes, got an axis of 3"):
    jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), 3))


def test_lane_while_is_a_vmap_of_while_loop():
  """``fused.lane_while``: the loop outside the vmap, what ``vmap(while_loop)`` computes
  (lanes that are done keep their carry while the others go on)."""
  def cond(c):
    return c[0] < c[1]

  def body(c):
    return c[0] + 1, c[1], c[2] * 2.0

  carry = (jnp.array([0, 2, 0]), jnp.array([0, 5, 3]), jnp.ones((3, 2)))
  expected = jax.vmap(lambda c: jax.lax.while_loop(cond, body, c))(carry)
  got = jax.jit(functools.partial(fused.lane_while, cond, body))(carry)
  for a, b in zip(expected, got):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(got[0], [0, 5, 3])


def test_ingraph_rejects_nested_spaces():
  class Nested:
    num_envs = 2
    single_observation_space = gym.spaces.Dict({"a": gym.spaces.Tuple(
        [gym.spaces.Discrete(2)])})
    single_action_space = gym.spaces.Discrete(2)

  with pytest.raises(TypeError, match=r"or a Dict of them\), got Tuple.*FlattenObservation"):
    InGraphBatchEnv(Nested())

  class DictAction(Nested):
    single_observation_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})
    single_action_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})

  with pytest.raises(TypeError, match=r"action spaces \(Box, Discrete, MultiDiscrete, "
                     r"MultiBinary\), got Dict"):
    InGraphBatchEnv(DictAction())


class _FakeBraxState(NamedTuple):
  obs: jax.Array
  reward: jax.Array
  done: jax.Array
  x: jax.Array


class FakeBrax:
  """Duck-typed brax env: position x moves by the action, done when |x| > 2."""

  observation_size = 1
  action_size = 1

  def reset(self, rng):
    del rng
    z = jnp.zeros((1,))
    return _FakeBraxState(z, jnp.float32(0), jnp.float32(0), z)

  def step(self, state, action):
    x = state.x + action
    return _FakeBraxState(x, -jnp.abs(x[0]), (jnp.abs(x[0]) > 2).astype(jnp.float32), x)


def test_brax_adapter_terminates_and_truncates():
  env = VecEnv(BraxEnv.make(FakeBrax(), episode_length=3), 2)
  push = fixed_agent(lambda obs: jnp.stack([jnp.full((1,), 1.0), jnp.full((1,), 0.1)]))
  _, ro = S.simulate(env, push, S.init(env, push, jax.random.key(0)), 6)
  term = np.asarray(ro.transitions.terminated)
  trunc = np.asarray(ro.transitions.truncated)
  assert term[:, 0].tolist() == [False, False, True, False, False, True]
  assert trunc[:, 1].tolist() == [False, False, True, False, False, True]
  assert not trunc[:, 0].any() and not term[:, 1].any()
  assert env.single_action_space.shape == (1,)


def test_observe_mode_reports_zero_metrics_without_update():
  env = DurationEnv()
  _, ro = S.simulate(env, ZERO, S.init(env, ZERO, jax.random.key(0)), 3)
  assert np.asarray(ro.metrics["updated"]).tolist() == [0.0, 0.0, 0.0]


def test_transition_done_property():
  tr = Transition(0, 0, 0.0, jnp.array([True, False]), jnp.array([False, True]), 0, {})
  assert np.asarray(tr.done).tolist() == [True, True]
