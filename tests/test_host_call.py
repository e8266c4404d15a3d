"""``host_call``: io_callback(ordered=True)'s results and order, without its per-call wrapping."""
from __future__ import annotations

import functools
import threading

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import simulation
from batchrl.agents.simple import random_agent
from batchrl.envs import host_call as host_call_module
from batchrl.envs.batch import BatchEnv
from batchrl.envs.host_call import host_call
from batchrl.envs.ingraph import InGraphBatchEnv

STRUCTS = {"x": jax.ShapeDtypeStruct((3,), np.float32), "n": jax.ShapeDtypeStruct((), np.int32)}


def test_the_lean_primitive_is_used_with_this_jax():
  assert host_call_module._primitive() is not None


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
  wrong = lambda value: np.zeros((2,), np.float32)  # noqa: E731
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


def test_a_calling_thread_keeps_one_python_thread_state_across_calls():
  """Every thread that runs ``fn`` keeps its Python thread state between calls (XLA's own
  threads would otherwise get a fresh one per call): a ``threading.local`` value set in one
  call is there in the next call on the same thread, and results are unchanged. (Where XLA
  runs the program on the calling thread, that thread is the one kept.)"""
  local = threading.local()
  seen = []

  def fn(value):
    seen.append((threading.get_ident(), getattr(local, "calls", 0)))
    local.calls = getattr(local, "calls", 0) + 1
    return {"x": np.full(3, value, np.float32), "n": np.int32(0)}

  def body(carry, _):
    out = host_call(fn, STRUCTS, carry)
    return carry + 1.0, out["x"][0]

  _, xs = jax.jit(lambda c: jax.lax.scan(body, c, None, length=6))(jnp.float32(1.0))
  np.testing.assert_array_equal(xs, [1, 2, 3, 4, 5, 6])
  calls: dict[int, int] = {}
  for ident, before in seen:
    assert ident in host_call_module._KEPT
    assert before == calls.get(ident, before)  # what this thread's previous call left
    calls[ident] = before + 1
  kept = set(host_call_module._KEPT)
  host_call_module.keep_thread_state()  # idempotent: a thread is kept once
  host_call_module.keep_thread_state()
  assert host_call_module._KEPT == kept | {threading.get_ident()}
