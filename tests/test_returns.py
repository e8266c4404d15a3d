"""Discounted returns and GAE against plain numpy loops, with terminated/truncated cases."""
import jax
import numpy as np
import pytest

from batchrl.ops import discounted_returns, generalized_advantages

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
