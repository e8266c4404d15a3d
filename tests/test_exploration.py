"""Explorations: schedules vs closed forms, epsilon-random ints/bools, OU statistics, errors."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl.exploration import (
  Exploration,
  ExplorationSpecError,
  build_exploration,
  build_explorations,
)


@functools.lru_cache(maxsize=None)
def jitted_apply(exploration, kind):
  return jax.jit(functools.partial(exploration.apply, kind=kind))


STEPS = np.array([0, 50, 100, 350, 600, 1100, 5000])


@pytest.mark.parametrize("spec", [
    {"type": "linear_decay", "initial_value": 0.8, "final_value": 0.2, "timesteps": 1000,
     "start_after": 100},
    {"type": "epsilon_anneal", "initial_epsilon": 0.8, "final_epsilon": 0.2, "timesteps": 1000,
     "start_timestep": 100},
])
def test_linear_schedules(spec):
  exploration = build_exploration(spec)
  expected = [0.8, 0.8, 0.8, 0.8 - 0.6 * 0.25, 0.8 - 0.6 * 0.5, 0.2, 0.2]
  np.testing.assert_allclose(jax.vmap(exploration.value)(STEPS), expected, rtol=1e-6)


def test_epsilon_decay_formula_and_defaults():
  exploration = build_exploration({"type": "epsilon_decay", "timesteps": 1000, "half_lives": 4,
                                   "start_after": 100})
  t = np.maximum(STEPS - 100, 0)
  expected = 0.1 + 0.9 * 0.5 ** (4 * t / 1000)
  np.testing.assert_allclose(jax.jit(jax.vmap(exploration.value))(STEPS), expected, rtol=1e-5)
  assert float(exploration.value(350)) == pytest.approx(0.1 + 0.9 * 0.5)  # one half life
  defaults = build_exploration("epsilon_anneal")
  assert (defaults.initial, defaults.final, defaults.timesteps, defaults.start_after) == (
      1.0, 0.1, 10000, 0)
  assert float(build_exploration(0.25).value(123)) == 0.25
  assert build_exploration(None) is None and build_exploration(0) is None


def test_int_epsilon_one_draws_uniformly_among_allowed():
  exploration = build_exploration(1.0)
  num = 10000
  mask = np.zeros((num, 5), bool)
  mask[:, [0, 2, 3]] = True
  mask[:10] = [False, False, False, False, True]  # a few streams with one allowed value
  actions = np.ones(num, np.int32)
  _, explored = jitted_apply(exploration, "int")((), jax.random.key(0), actions, 0,
                                                 num_values=5, mask=mask)
  explored = np.asarray(explored)
  assert explored.dtype == np.int32
  assert np.all(mask[np.arange(num), explored])  # masked values never appear
  counts = np.bincount(explored[10:], minlength=5)
  assert counts[1] == counts[4] == 0
  np.testing.assert_allclose(counts[[0, 2, 3]] / (num - 10), 1 / 3, atol=0.02)


def test_int_epsilon_zero_and_partial():
  actions = np.tile(np.arange(4, dtype=np.int32), (2000, 1))  # [N, 4], MultiDiscrete-like
  still = build_exploration({"type": "constant", "value": 0.0})
  _, same = jitted_apply(still, "int")((), jax.random.key(1), actions, 0, num_values=6)
  np.testing.assert_array_equal(same, actions)
  some = build_exploration({"type": "constant", "value": 0.3})
  _, explored = jitted_apply(some, "int")((), jax.random.key(2), actions, 0, num_values=6,
                                          low=10)
  changed = np.asarray(explored) != actions
  assert set(np.unique(np.asarray(explored)[changed])) <= set(range(10, 16))
  # P(changed) = epsilon: every random value (10..15) differs from the policy's (0..3).
  assert abs(changed.mean() - 0.3) < 0.02


def test_int_range_without_num_values_and_bool():
  exploration = build_exploration(1.0)
  actions = np.zeros((4000,), np.int32)
  apply = jitted_apply(exploration, "int")
  _, explored = apply((), jax.random.key(3), actions, 0, low=-2, high=2)
  assert set(np.unique(np.asarray(explored))) == {-2, -1, 0, 1, 2}
  _, flipped = jitted_apply(exploration, "bool")((), jax.random.key(4),
                                                 np.zeros((4000, 2), bool), 0)
  assert flipped.dtype == jnp.bool_ and abs(float(flipped.mean()) - 0.5) < 0.03


def test_schedule_drives_epsilon_under_jit():
  exploration = build_exploration({"type": "epsilon_anneal", "timesteps": 100})
  apply = jitted_apply(exploration, "int")
  actions = np.zeros((4000,), np.int32)
  for t, epsilon in [(0, 1.0), (50, 0.55), (100, 0.1)]:
    _, explored = apply((), jax.random.key(t), actions, jnp.int32(t), num_values=2)
    assert abs(float((np.asarray(explored) != 0).mean()) - epsilon / 2) < 0.03


def test_ornstein_uhlenbeck_stationary_variance_and_reset():
  exploration = build_exploration({"type": "ornstein_uhlenbeck"})  # sigma .3, theta .15
  num = 400
  actions = jnp.zeros((num, 2), jnp.float32)

  def step(state, key):
    state, noisy = exploration.apply(state, key, actions, 0, kind="float")
    return state, noisy

  state, noise = jax.jit(lambda s, k: jax.lax.scan(step, s, jax.random.split(k, 200)))(
      exploration.init(num, (2,)), jax.random.key(5))
  tail = np.asarray(noise[100:])  # well past the mixing time (~1/theta steps)
  stationary = 0.3 ** 2 / (1 - (1 - 0.15) ** 2)
  assert abs(tail.mean()) < 0.05
  assert abs(tail.var() / stationary - 1) < 0.1
  np.testing.assert_array_equal(noise[-1], state)  # the noise added is the new OU state
  reset = exploration.reset(state, jnp.arange(num) == 3)
  assert np.all(np.asarray(reset[3]) == 0) and np.all(np.asarray(reset[4]) == state[4])


def test_ornstein_uhlenbeck_reverts_to_mu_and_respects_active():
  exploration = build_exploration({"type": "ornstein_uhlenbeck", "sigma": 0.0, "mu": 1.0,
                                   "theta": 0.2})
  state, apply = jnp.full((2, 3), 5.0), jitted_apply(exploration, "float")
  for k in range(1, 6):
    state, _ = apply(state, jax.random.key(k), jnp.zeros((2, 3)), 0,
                     active=jnp.array([True, False]))
    np.testing.assert_allclose(state[0], 1.0 + 4.0 * 0.8 ** k, rtol=1e-5)
    np.testing.assert_array_equal(state[1], 5.0)


def test_float_noise_scale_and_clipping():
  actions = jnp.full((20000,), 0.9)
  gaussian = build_exploration({"type": "gaussian", "sigma": 0.5})
  _, noisy = jitted_apply(gaussian, "float")((), jax.random.key(6), actions, 0)
  assert abs(float(jnp.std(noisy)) - 0.5) < 0.02 and noisy.dtype == jnp.float32
  _, clipped = jitted_apply(gaussian, "float")((), jax.random.key(6), actions, 0,
                                               low=-1.0, high=1.0)
  assert float(clipped.min()) >= -1.0 and float(clipped.max()) <= 1.0
  np.testing.assert_allclose(clipped, np.clip(noisy, -1, 1))
  assert abs(float((clipped == 1.0).mean()) - 0.42) < 0.02  # P(N(0.9, 0.5) > 1) ~ 0.42
  anneal = build_exploration({"type": "linear_decay", "timesteps": 10})
  _, late = jitted_apply(anneal, "float")((), jax.random.key(7), actions, 10)
  assert abs(float(jnp.std(late)) - 0.1) < 0.005  # sigma = value(t)


def test_explorations_per_action():
  built = build_explorations({"move": 0.1, "turn": {"type": "gaussian"}}, ["move", "turn", "x"],
                             kinds={"move": "int", "turn": "float", "x": "bool"})
  assert built["x"] is None and built["move"].initial == 0.1 and built["turn"].type == "gaussian"
  shared = build_explorations({"type": "epsilon_decay"}, ["a", "b"])
  assert shared["a"] is shared["b"]
  assert isinstance(build_explorations(0.2, None, kinds="int"), Exploration)


@pytest.mark.parametrize("spec,match", [
    ({"type": "epsilon_anneel"}, r"unknown exploration type 'epsilon_anneel' \(did you mean "
                                 r"'epsilon_anneal'\?\)"),
    ({"type": "epsilon_decay", "half_life": 3}, r"\(epsilon_decay\): unknown key 'half_life' "
                                                r"\(did you mean 'half_lives'\?\)"),
    ({"type": "linear_decay", "timesteps": 0}, r"timesteps must be a positive int"),
    ({"type": "gaussian", "sigma": -1.0}, r"\(gaussian\): sigma must be a non-negative number"),
    ({"type": "ornstein_uhlenbeck", "theta": 1.5}, r"theta .* must be in \[0, 1\]"),
    ({"type": "epsilon_anneal", "initial_epsilon": 1.0, "initial_value": 0.5},
     r"sets initial a second time"),
    (True, r"expected None, a number or a dict"),
    ([0.1], r"expected None, a number or a dict"),
])
def test_build_errors(spec, match):
  with pytest.raises(ExplorationSpecError, match=match):
    build_exploration(spec)


def test_kind_errors():
  ou = build_exploration("ornstein_uhlenbeck")
  with pytest.raises(ExplorationSpecError, match=r"'ornstein_uhlenbeck' .* cannot explore a int"):
    ou.apply(ou.init(2), jax.random.key(0), np.zeros(2, np.int32), 0, kind="int", num_values=3)
  with pytest.raises(ExplorationSpecError, match=r"must stay in \[0, 1\]"):
    build_exploration(2.0).apply((), jax.random.key(0), np.zeros(2, np.int32), 0, kind="int",
                                 num_values=3)
  with pytest.raises(ExplorationSpecError, match=r"did you mean 'float'"):
    build_exploration(0.1).apply((), jax.random.key(0), np.zeros(2), 0, kind="flaot")
  with pytest.raises(ExplorationSpecError, match=r"masks apply to int actions only"):
    build_exploration(0.1).apply((), jax.random.key(0), np.zeros(2, bool), 0, kind="bool",
                                 mask=np.ones((2, 2), bool))
  with pytest.raises(ExplorationSpecError, match=r"no action named 'mvoe' \(did you mean "
                                                 r"'move'\?\)"):
    build_explorations({"mvoe": 0.1}, ["move"])
  with pytest.raises(ExplorationSpecError, match=r"exploration\['move'\]: .*gaussian"):
    build_explorations({"type": "gaussian"}, ["move"], kinds="int")
  with pytest.raises(ValueError, match=r"mask must be \[N, \*shape, num_values\]"):
    build_exploration(0.1).apply((), jax.random.key(0), np.zeros(2, np.int32), 0, kind="int",
                                 mask=np.ones((3, 2), bool))
