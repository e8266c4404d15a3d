"""Discounted returns, GAE and lambda-returns (PQN's Q(lambda) targets) against plain numpy
loops and hand-computed values, with terminated/truncated cases."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl.ops import discounted_returns, generalized_advantages
from batchrl.ops.returns import lambda_returns

T, B = 12, 5
GAMMA, LAMBDA = 0.9, 0.8


def returns_reference(rewards, terminated, truncated, next_values, gamma):
  out = np.zeros_like(rewards)
  for b in range(rewards.shape[1]):
    following = 0.0
    for t in reversed(range(rewards.shape[0])):
      if terminated[t, b]:
        following = rewards[t, b]
      elif truncated[t, b] or t == rewards.shape[0] - 1:
        following = rewards[t, b] + gamma * next_values[t, b]
      else:
        following = rewards[t, b] + gamma * following
      out[t, b] = following
  return out


def gae_reference(rewards, values, next_values, terminated, truncated, gamma, lam):
  out = np.zeros_like(rewards)
  for b in range(rewards.shape[1]):
    following = 0.0
    for t in reversed(range(rewards.shape[0])):
      bootstrap = 0.0 if terminated[t, b] else next_values[t, b]
      delta = rewards[t, b] + gamma * bootstrap - values[t, b]
      if terminated[t, b] or truncated[t, b]:
        following = 0.0
      following = delta + gamma * lam * following
      out[t, b] = following
  return out


@pytest.fixture(scope="module")
def data():
  rng = np.random.default_rng(0)
  rewards = rng.normal(size=(T, B)).astype(np.float32)
  values = rng.normal(size=(T, B)).astype(np.float32)
  next_values = rng.normal(size=(T, B)).astype(np.float32)
  terminated = rng.random((T, B)) < 0.15
  truncated = (rng.random((T, B)) < 0.15) & ~terminated
  terminated[-1, 0], truncated[-1, 1] = True, True  # ends on the rollout's last step
  terminated[3, 2], truncated[4, 2] = True, True  # back-to-back episode ends
  return rewards, values, next_values, terminated, truncated


def test_discounted_returns_match_numpy_loop(data):
  rewards, _, next_values, terminated, truncated = data
  got = jax.jit(discounted_returns, static_argnums=4)(rewards, terminated, truncated,
                                                      next_values, GAMMA)
  want = returns_reference(rewards, terminated, truncated, next_values, GAMMA)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gae_matches_numpy_loop(data):
  rewards, values, next_values, terminated, truncated = data
  got = generalized_advantages(rewards, values, next_values, terminated, truncated, GAMMA,
                               LAMBDA)
  want = gae_reference(rewards, values, next_values, terminated, truncated, GAMMA, LAMBDA)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gae_with_lambda_one_gives_the_discounted_returns(data):
  rewards, values, next_values, terminated, truncated = data
  # Within an episode next_values[t] must equal values[t + 1] for the identity to hold.
  done = terminated | truncated
  next_values = np.where(done, next_values, np.roll(values, -1, axis=0))
  advantages = generalized_advantages(rewards, values, next_values, terminated, truncated,
                                      GAMMA, 1.0)
  returns = discounted_returns(rewards, terminated, truncated, next_values, GAMMA)
  np.testing.assert_allclose(advantages + values, returns, rtol=1e-5, atol=1e-5)


def test_hand_computed_cases():
  rewards = np.ones((3, 3), np.float32)
  next_values = np.full((3, 3), 10.0, np.float32)
  terminated = np.array([[0, 0, 0], [1, 0, 0], [0, 0, 0]], bool)
  truncated = np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]], bool)
  got = np.asarray(discounted_returns(rewards, terminated, truncated, next_values, 0.5))
  # env 0: terminated at t=1 -> [1.5, 1, bootstrap 1 + 5]; env 1: truncated at t=1
  np.testing.assert_allclose(got[:, 0], [1.5, 1.0, 6.0])
  np.testing.assert_allclose(got[:, 1], [1 + 0.5 * 6, 6.0, 6.0])
  np.testing.assert_allclose(got[:, 2], [1 + 0.5 * (1 + 0.5 * 6), 1 + 0.5 * 6, 6.0])


# ------------------------------------------------------- lambda-returns (PQN's Q(lambda))


def test_lambda_returns_match_hand_computed_ones():
  """discount 0.5, lambda 0.5, rewards 1, 2, 3 and next values 10, 20, 30 over 3 steps; env
  0 runs on, env 1 terminates at step 1, env 2 is truncated at step 1 (its final
  observation's value 20 bootstraps), env 3 terminates at the last step."""
  rewards = jnp.tile(jnp.asarray([[1.0], [2.0], [3.0]]), (1, 4))
  values = jnp.tile(jnp.asarray([[10.0], [20.0], [30.0]]), (1, 4))
  terminated = jnp.zeros((3, 4), bool).at[1, 1].set(True).at[2, 3].set(True)
  truncated = jnp.zeros((3, 4), bool).at[1, 2].set(True)
  got = lambda_returns(rewards, terminated, truncated, values, 0.5, 0.5)
  # t=2: 3 + .5 * 30 = 18; t=1: 2 + .5 * (.5 * 20 + .5 * 18) = 11.5; t=0: 1 + .5 * (.5 * 10
  # + .5 * 11.5) = 6.375. Terminated at 1: 2, then 1 + .5 * (5 + 1) = 4. Truncated at 1:
  # 2 + .5 * 20 = 12, then 1 + .5 * (5 + 6) = 6.5. Terminated at 2: 3, then 2 + .5 * (10 +
  # 1.5) = 7.75, then 1 + .5 * (5 + 3.875) = 5.4375.
  want = [[6.375, 4.0, 6.5, 5.4375], [11.5, 2.0, 12.0, 7.75], [18.0, 18.0, 18.0, 3.0]]
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def forward_view(rewards, terminated, truncated, values, discount, lam):
  """The lambda-return as the weighted mean of n-step returns (NumPy, loops):
  ``(1 - lam) sum_n lam^(n-1) G(n) + lam^(m-1) G(m)`` with ``m`` steps to the first cut
  (an episode end or the rollout's last step), ``G(n)`` bootstrapping from ``values`` (the
  next observation's) and ``G(m)`` from nothing after a termination."""
  steps, envs = rewards.shape
  out = np.zeros((steps, envs))
  for b in range(envs):
    for t in range(steps):
      end = t
      while end < steps - 1 and not (terminated[end, b] or truncated[end, b]):
        end += 1
      m = end - t + 1
      returns = [_n_step(rewards[:, b], terminated[:, b], values[:, b], discount, t, n, m)
                 for n in range(1, m + 1)]
      out[t, b] = (1 - lam) * sum(lam ** (n - 1) * returns[n - 1] for n in range(1, m)) + (
          lam ** (m - 1) * returns[m - 1])
  return out


def _n_step(rewards, terminated, values, discount, t, n, m):
  """The n-step return from ``t`` of one env; the ``m``-step one ends at the cut."""
  total = sum(discount ** k * rewards[t + k] for k in range(n))
  last = t + n - 1
  alive = not (n == m and terminated[last])
  return total + (discount ** n * values[last] if alive else 0.0)


@pytest.mark.parametrize("lam", [0.0, 0.65, 0.95, 1.0])
def test_lambda_returns_equal_the_forward_view_and_its_limits(lam):
  rng = np.random.default_rng(1)
  steps, envs = 12, 6
  rewards = rng.normal(size=(steps, envs)).astype(np.float32)
  values = rng.normal(size=(steps, envs)).astype(np.float32)
  ends = rng.random((steps, envs))
  terminated, truncated = ends < 0.12, (ends >= 0.12) & (ends < 0.24)
  got = np.asarray(lambda_returns(jnp.asarray(rewards), jnp.asarray(terminated),
                                         jnp.asarray(truncated), jnp.asarray(values), 0.9,
                                         lam))
  np.testing.assert_allclose(got, forward_view(rewards, terminated, truncated, values, 0.9,
                                               lam), rtol=1e-5, atol=1e-5)
  if lam == 1.0:  # Monte-Carlo returns to the cut (batchrl.ops.returns)
    np.testing.assert_allclose(got, discounted_returns(rewards, terminated, truncated, values,
                                                       0.9), rtol=1e-5, atol=1e-5)
  if lam == 0.0:  # one-step Q-learning
    np.testing.assert_allclose(got, rewards + 0.9 * (1 - terminated) * values, rtol=1e-5,
                               atol=1e-6)


def test_lambda_returns_keep_the_action_element_axes():
  """``next_values [T, B, *S]`` (one value per action element): rewards broadcast."""
  values = jnp.arange(24.0).reshape(3, 4, 2)
  got = lambda_returns(jnp.ones((3, 4)), jnp.zeros((3, 4), bool),
                              jnp.zeros((3, 4), bool), values, 0.9, 0.5)
  assert got.shape == (3, 4, 2)
  for k in range(2):
    np.testing.assert_allclose(got[..., k], lambda_returns(
        jnp.ones((3, 4)), jnp.zeros((3, 4), bool), jnp.zeros((3, 4), bool), values[..., k],
        0.9, 0.5), rtol=1e-6)
