"""PPO's update is bit-for-bit what it was, in both of its forms: the model's own update (its
pieces composed in one scan) and the same pieces run from the host as the drivers run them
(``batchrl.train.host_update``, what ``ppo_atari`` runs on the CPU). A rollout of random
7x7x2 images (two envs, a tiny CNN; ``tests/test_ppo_host_update.py``) and two updates, the
second under jit, end in a state and metrics whose SHA-256 equals the digest recorded here,
recorded before PPO's host update moved from ``batchrl.agents.ppo.model`` to
``batchrl.train.host_update`` (issue 53). Two usable cores, whatever the machine: the host
update cuts each minibatch's gradient into shares by the core count, and other shares round
differently.

As in ``tests/test_offpolicy_update_hashes.py``: the digests hold on the CPU with the
versions in ``RECORDED_WITH``; with others the test is skipped, and ``python
tests/test_ppo_update_hashes.py`` prints the digests to record."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest

from batchrl import parts
from tests.test_offpolicy_update_hashes import RECORDED_WITH, digest, versions
from tests.test_ppo_host_update import _config, _filled_state

# values compared across compilations or with recorded digests: XLA's optimized programs
pytestmark = pytest.mark.optimized

CORES = 2
CASES = {
    "scan": dict(update_loop="scan"),
    # each minibatch's gradient in 2 shares over 2 threads, averaged
    "host": dict(update_loop="host"),
    # whole minibatches (one program per step)
    "host_kl_penalty": dict(update_loop="host", policy_objective="kl_penalty"),
}

DIGESTS = {
    "host": "891e5ad39139661f862a014e6041493bfdd341721d49dc1f922f7be81d5cb1e0",
    "host_kl_penalty": "1b0598fb89d14f3563ec04cba554df2cdf828ea31c54df20bdde11a4df37bafb",
    "scan": "f97dc9a9eb3ae6e5ea459f9c3d36bed47df4cbba778f6477e3836139e63c5841",
}


def train(name: str):
  """Two updates of a filled rollout, the second under jit: ``(state, (metrics, metrics))``
  (a metric the eager scan leaves a Python float, the constant learning rate, as an array)."""
  agent, state = _filled_state(_config(**CASES[name]))
  state, first = agent.update(state)
  state, second = jax.jit(agent.update)(state)
  return state, jax.tree.map(jnp.asarray, (first, second))


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_updates_from_a_fixed_seed_end_in_the_recorded_state(monkeypatch, name):
  if versions() != RECORDED_WITH:
    pytest.skip(f"digests recorded with {RECORDED_WITH}, running {versions()}")
  monkeypatch.setattr(parts, "usable_cpus", lambda: CORES)
  assert digest(train(name)) == DIGESTS[name], (
      f"{name}: PPO's update changed (run this file as a script to see the digests)")


if __name__ == "__main__":
  parts.usable_cpus = lambda: CORES
  print(json.dumps(versions()))
  for name in sorted(CASES):
    print(f'    "{name}": "{digest(train(name))}",')
