"""``host_call``: io_callback(ordered=True)'s results and order, without its per-call wrapping."""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import threading

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import jax_internals, simulation
from batchrl.agents.simple.model import random_agent
from batchrl.envs import host_call as host_call_module
from batchrl.envs.batch import BatchEnv
from batchrl.envs.host_call import host_call
from batchrl.envs.ingraph import InGraphBatchEnv

STRUCTS = {"x": jax.ShapeDtypeStruct((3,), np.float32), "n": jax.ShapeDtypeStruct((), np.int32)}


def test_the_lean_primitive_is_used_with_this_jax():
  assert jax_internals.lean_callback() is not None


def test_calls_run_in_program_order_with_numpy_arguments_and_pytree_results():
  seen = []

  def fn(value):
    seen.append((type(value), float(value)))
    return {"x": np.full(3, value * 2, np.float32), "n": np.int32(len(seen))}

  def body(carry, _):
    out = host_call(fn, STRUCTS, carry)
    return carry + 1.0, out

  _, outs = jax.jit(lambda c: jax.lax.scan(body, c, None, length=4))(jnp.float32(1.0))
  assert [v for _, v in seen] == [1.0, 2.0, 3.0, 4.0]
  assert all(kind is np.ndarray for kind, _ in seen)
  np.testing.assert_array_equal(outs["x"][:, 0], [2.0, 4.0, 6.0, 8.0])
  np.testing.assert_array_equal(outs["n"], [1, 2, 3, 4])


def test_an_unused_result_still_calls_and_outside_jit_it_is_a_plain_call():
  seen = []

  def fn(value):
    seen.append(int(value))
    return np.zeros((), np.float32)

  jax.jit(lambda v: (host_call(fn, jax.ShapeDtypeStruct((), np.float32), v), v)[1])(
      jnp.int32(7))
  host_call(fn, jax.ShapeDtypeStruct((), np.float32), jnp.int32(8))
  assert seen == [7, 8]


def test_the_callback_gets_a_copy_it_may_keep():
  kept = []

  def fn(value):
    kept.append(value)
    return np.zeros((), np.float32)

  def body(carry, _):
    host_call(fn, jax.ShapeDtypeStruct((), np.float32), carry)
    return carry + 1.0, None

  jax.jit(lambda c: jax.lax.scan(body, c, None, length=3))(jnp.zeros(2))
  assert [k.tolist() for k in kept] == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]


def test_errors_in_the_callback_and_wrong_results_reach_the_caller():
  def boom(value):
    raise RuntimeError("env 3 exploded")

  with pytest.raises(Exception, match="env 3 exploded"):
    jax.block_until_ready(jax.jit(lambda v: host_call(boom, jax.ShapeDtypeStruct(
        (), np.float32), v))(jnp.float32(0.0)))
  wrong = lambda value: np.zeros((2,), np.float32)
  with pytest.raises(Exception, match="shape"):
    jax.block_until_ready(jax.jit(lambda v: host_call(wrong, jax.ShapeDtypeStruct(
        (3,), np.float32), v))(jnp.float32(0.0)))


def _rollout(lean: bool, monkeypatch) -> tuple:
  monkeypatch.setattr(host_call_module, "LEAN", lean)
  fns = [functools.partial(gym.make, "Pendulum-v1", max_episode_steps=20)] * 2
  env = InGraphBatchEnv(BatchEnv(fns, seed=3))
  try:
    agent = random_agent(env.single_action_space)
    run = jax.jit(lambda key: simulation.simulate(
        env, agent, simulation.init(env, agent, key), 45, mode="track")[1])
    return jax.tree.map(np.asarray, run(jax.random.key(0)))
  finally:
    env.batch_env.close()


def test_an_ingraph_env_gives_io_callbacks_transitions_bit_for_bit(monkeypatch):
  lean, stock = _rollout(True, monkeypatch), _rollout(False, monkeypatch)
  assert lean.done.sum() == 4  # episodes of 20 steps ended: final observations included
  for a, b in zip(jax.tree.leaves(lean), jax.tree.leaves(stock)):
    np.testing.assert_array_equal(a, b)


def _thread_calls(local, seen):
  def fn(value):
    seen.append((threading.get_ident(), getattr(local, "calls", 0)))
    local.calls = getattr(local, "calls", 0) + 1
    return {"x": np.full(3, value, np.float32), "n": np.int32(0)}

  def body(carry, _):
    out = host_call(fn, STRUCTS, carry)
    return carry + 1.0, out["x"][0]

  return jax.jit(lambda c: jax.lax.scan(body, c, None, length=6))


def test_a_calling_thread_keeps_one_python_thread_state_across_calls():
  """Every thread that runs ``fn`` keeps its Python thread state between calls (XLA's own
  threads would otherwise get a fresh one per call): a ``threading.local`` value set in one
  call is there in the next call on the same thread, and results are unchanged. (Where XLA
  runs the program on the calling thread, that thread is the one kept.)"""
  local, seen = threading.local(), []
  _, xs = _thread_calls(local, seen)(jnp.float32(1.0))
  np.testing.assert_array_equal(xs, [1, 2, 3, 4, 5, 6])
  calls: dict[int, int] = {}
  for ident, before in seen:
    assert ident in host_call_module._KEPT
    assert before == calls.get(ident, before)  # what this thread's previous call left
    calls[ident] = before + 1
  kept = set(host_call_module._KEPT)
  host_call_module.keep_thread_state()  # idempotent: a thread state is kept once
  host_call_module.keep_thread_state()
  assert host_call_module._KEPT == kept | {threading.get_ident()}
  host_call_module.release_thread_state()  # on its own thread: given back
  host_call_module.release_thread_state()  # nothing left to give
  assert host_call_module._KEPT == kept - {threading.get_ident()}


# Run in a fresh process: XLA runs a program on its own threads (foreign to Python) when an
# input is not ready yet at dispatch, which needs JAX's default asynchronous CPU dispatch
# (other tests in this process may have turned it off, as ``batchrl.Agent`` does).
XLA_THREADS_SCRIPT = textwrap.dedent("""
    import threading
    import jax, jax.numpy as jnp, numpy as np
    from batchrl.envs import host_call as h

    class Counting:  # PyGILState_Ensure/Release counted per thread, then CPython's own
      def __init__(self, api):
        self.api, self.ensured, self.released = api, {}, {}
      def PyGILState_Ensure(self):
        i = threading.get_ident()
        self.ensured[i] = self.ensured.get(i, 0) + 1
        return self.api.PyGILState_Ensure()
      def PyGILState_Release(self, state):
        i = threading.get_ident()
        self.released[i] = self.released.get(i, 0) + 1
        return self.api.PyGILState_Release(state)

    counting = h.ctypes.pythonapi = Counting(h.ctypes.pythonapi)
    local, main, persisted = threading.local(), threading.get_ident(), []
    def fn(v):
      persisted.append((threading.get_ident(), getattr(local, "seen", False)))
      local.seen = True
      return np.float32(v + 1)
    body = lambda c, _: (c + h.host_call(fn, jax.ShapeDtypeStruct((), np.float32), c), None)
    program = jax.jit(lambda c, m: jax.lax.scan(body, c + 0 * m.sum(), None, length=8)[0])
    slow = jax.jit(lambda m: jnp.linalg.matrix_power(m, 30))  # the input not ready yet
    m = jnp.ones((500, 500)) / 500

    def run():
      assert float(program(jnp.float32(0), slow(m))) == 255.0

    for _ in range(20):  # until XLA ran a program on its own threads
      run()
      foreign = h._KEPT - {main}
      if foreign:
        break
    assert foreign, "XLA never ran the program on its own threads"
    # a foreign thread's later calls found what its earlier ones left: one thread state
    assert any(seen for ident, seen in persisted if ident in foreign), persisted
    h.KEEP_THREAD_STATES = False
    for _ in range(50):  # each kept thread gives its state back at its next callback
      run()
      if not foreign & h._KEPT:
        break
    assert not foreign & h._KEPT, "kept threads did not give their states back"
    assert all(counting.released.get(i) == counting.ensured[i] for i in foreign), (
        counting.ensured, counting.released)
    h.KEEP_THREAD_STATES = True
    for _ in range(20):  # kept again; then the process ends with them kept
      run()
      if h._KEPT - {main}:
        break
    print("foreign threads", len(foreign), "kept at exit", len(h._KEPT - {main}))
""")


def test_xla_threads_keep_their_states_give_them_back_and_the_process_exits_cleanly():
  """On XLA's own threads: a thread state is kept between calls; with ``KEEP_THREAD_STATES``
  off each kept thread releases, on itself at its next callback, exactly what it ensured;
  a process ending with states kept exits cleanly (CPython frees them at exit)."""
  out = subprocess.run([sys.executable, "-X", "dev", "-c", XLA_THREADS_SCRIPT],
                       check=False, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert out.returncode == 0, out.stderr
  assert out.stdout.startswith("foreign threads") and not out.stderr, out.stdout + out.stderr
