"""Compiled programs belong to the agents that use them: creating and closing agents in a
loop does not grow the process, and a runtime no agent holds goes once it leaves the small
cache of recent runtimes (``batchrl.agent.runtime.SHARED_RUNTIMES``)."""
import os
import subprocess
import sys
import weakref

import jax
import numpy as np
import pytest

from batchrl import Agent
from batchrl.agent import runtime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARTPOLE = dict(states=dict(type="float", shape=(4,)), actions=dict(type="int", num_values=2))

# Run in a fresh process, so that what other tests compiled does not blur the measure.
LOOP = """
import gc, sys
import numpy as np
from batchrl import Agent

def rss_mb():
  with open("/proc/self/status") as f:
    return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024

def one(seed):
  agent = Agent.create(agent="ppo", states=dict(type="float", shape=(4,)),
                       actions=dict(type="int", num_values=2), batch_size=64, seed=seed)
  rng = np.random.default_rng(seed)
  for t in range(300):
    agent.act(rng.normal(size=4).astype(np.float32))
    agent.observe(reward=1.0, terminal=int(t % 50 == 49))
  assert agent.updates >= 1
  agent.close()
  del agent
  gc.collect()

for seed in range(5):  # warm-up: the first agents compile
  one(seed)
start = rss_mb()
for seed in range(5, 45):
  one(seed)
print(rss_mb() - start)
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS from /proc")
def test_forty_agents_created_and_closed_in_a_loop_grow_the_process_by_at_most_150_mb():
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  proc = subprocess.run([sys.executable, "-c", LOOP], capture_output=True, text=True,
                        env=env, cwd=ROOT, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  growth_mb = float(proc.stdout.split()[-1])
  assert growth_mb <= 150, f"resident memory grew by {growth_mb:.0f} MB over 40 agents"


def small(size: int, seed: int = 0) -> Agent:
  return Agent.create("ppo", **CARTPOLE, network=[dict(type="dense", size=size)],
                      batch_size=8, optimizer_batch_size=8, seed=seed)


def test_agents_differing_only_in_seed_share_a_runtime_not_their_parameters():
  a, b = small(5, seed=1), small(5, seed=2)
  assert a._rt is b._rt  # each program compiles once for both
  # the seed is an argument of the programs, not a constant in them
  kernels = [jax.tree.leaves(agent._state.model.params)[-1] for agent in (a, b)]
  assert not np.array_equal(*kernels)
  assert small(5, seed=1)._rt is a._rt
  np.testing.assert_array_equal(jax.tree.leaves(small(5, seed=1)._state.model.params)[-1],
                                kernels[0])


def test_a_closed_agent_frees_its_programs_once_its_runtime_leaves_the_cache(monkeypatch):
  monkeypatch.setattr(runtime, "SHARED_RUNTIMES", 1)
  agent = small(3)
  for t in range(10):  # an update, fast-path acts and commits: most programs compile
    agent.act(np.zeros(4, np.float32))
    agent.observe(1.0, terminal=t % 4 == 3)
  agent.act(np.zeros(4, np.float32), independent=True)
  held = weakref.ref(agent._rt)
  programs = [weakref.ref(p) for p in agent._rt.programs.values() if callable(p)]
  assert len(programs) >= 5
  agent.close()
  del agent
  assert held() is not None  # kept for the next agent of this structure
  small(4)  # another structure takes its place in the cache
  # no reference cycle holds them: they go without waiting for the cycle collector
  assert held() is None
  assert not any(p() for p in programs)
