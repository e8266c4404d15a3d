"""``batchrl.jax_internals``: each hook gives its public path's results, and a hook that
cannot be installed or fails at lowering falls back to that path with one warning."""
from __future__ import annotations

import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import jax_internals
from batchrl.envs import host_call as host_call_module
from batchrl.envs.host_call import host_call

HOOKS = (jax_internals.LEAN_CALLBACK, jax_internals.UNROLLED_THREEFRY)


@pytest.fixture
def fresh_hooks(monkeypatch):
  """Hooks not installed yet and no warning given yet; as they were afterwards."""
  monkeypatch.setattr(jax_internals, "_WARNED", set())
  saved = [(hook.value, hook.error) for hook in HOOKS]
  for hook in HOOKS:
    hook.reset()
  yield
  for hook, (value, error) in zip(HOOKS, saved):
    hook.value, hook.error = value, error


def _internals_warnings(caught) -> list[str]:
  return [str(w.message) for w in caught if issubclass(w.category, jax_internals.InternalsWarning)]


# ---------------------------------------------------------------- backends_started


def test_backends_started_says_true_once_jax_runs_and_none_when_it_cannot_tell(
    fresh_hooks, monkeypatch):
  jax.devices()
  assert jax_internals.backends_started() is True
  monkeypatch.setattr(jax_internals, "_xla_bridge", types.SimpleNamespace())
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert jax_internals.backends_started() is None
    assert jax_internals.backends_started() is None
  [message] = _internals_warnings(caught)
  assert "backends_started" in message and "backends_are_initialized" in message


# ---------------------------------------------------------------- host_call

STRUCTS = {"x": jax.ShapeDtypeStruct((2,), np.float32), "n": jax.ShapeDtypeStruct((), np.int32)}


def _ordered_run(lean: bool, monkeypatch, length: int = 5):
  """A jitted scan of host calls with side effects: what the callback saw, in order, and
  the program's outputs."""
  monkeypatch.setattr(host_call_module, "LEAN", lean)
  seen = []

  def fn(value, step):
    seen.append((float(value), int(step)))
    return {"x": np.array([value, -value], np.float32), "n": np.int32(len(seen))}

  def body(carry, step):
    out = host_call(fn, STRUCTS, carry, step)
    return carry * 2.0 + out["x"][1], out

  program = jax.jit(lambda c: jax.lax.scan(body, c, jnp.arange(length)))
  last, outs = program(jnp.float32(1.5))
  return seen, jax.tree.map(np.asarray, (last, outs)), program


def test_the_lean_hook_installs_on_this_jax():
  assert jax_internals.lean_callback() is not None


def test_host_call_gives_io_callbacks_calls_and_results(monkeypatch):
  lean_seen, lean_out, lean_program = _ordered_run(True, monkeypatch)
  stock_seen, stock_out, stock_program = _ordered_run(False, monkeypatch)
  assert lean_seen == stock_seen == [(1.5, 0), (1.5, 1), (1.5, 2), (1.5, 3), (1.5, 4)]
  for a, b in zip(jax.tree.leaves(lean_out), jax.tree.leaves(stock_out)):
    np.testing.assert_array_equal(a, b)
  assert "io_callback" in str(jax.make_jaxpr(stock_program)(jnp.float32(0)))
  assert "io_callback" not in str(jax.make_jaxpr(lean_program)(jnp.float32(0)))


def _raise_arity(*args, **kwargs):
  raise TypeError("_callback_op_sharding() takes 2 positional arguments but 3 were given")


def _changed_arity_callback_module():
  """``jax._src.callback`` as a JAX whose ``_callback_op_sharding`` takes two arguments
  would have it (a copy of the module's names: the real one, which io_callback uses, is
  left alone)."""
  module = types.SimpleNamespace(**vars(jax_internals._callback))
  module._callback_op_sharding = lambda axis_context, sharding: None
  return module


BROKEN_AT_LOWERING = {
    "the emitter raises": lambda mp: mp.setattr(jax_internals, "_emit_lean_callback",
                                                _raise_arity),
    "a changed arity": lambda mp: mp.setattr(jax_internals, "_callback",
                                             _changed_arity_callback_module()),
}
NOT_INSTALLABLE = {
    "an attribute gone": lambda mp: mp.setattr(jax_internals, "_callback",
                                               types.SimpleNamespace()),
    "a module gone": lambda mp: mp.setattr(
        jax_internals, "_core", ImportError("No module named 'jax._src.core'")),
}


@pytest.mark.parametrize("breakage", list(BROKEN_AT_LOWERING) + list(NOT_INSTALLABLE))
def test_a_broken_lean_hook_falls_back_to_io_callback_with_one_warning(
    breakage, fresh_hooks, monkeypatch):
  stock_seen, stock_out, _ = _ordered_run(False, monkeypatch)
  {**BROKEN_AT_LOWERING, **NOT_INSTALLABLE}[breakage](monkeypatch)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    seen, out, program = _ordered_run(True, monkeypatch)
    again, _, _ = _ordered_run(True, monkeypatch, length=3)  # a second program: no warning
  [message] = _internals_warnings(caught)
  assert "lean_callback" in message and "io_callback" in message
  if breakage in BROKEN_AT_LOWERING:
    assert "takes 2 positional arguments" in message
  assert jax_internals.lean_callback() is None
  assert "io_callback" in str(jax.make_jaxpr(program)(jnp.float32(0)))
  assert seen == stock_seen and again == stock_seen[:3]
  for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(stock_out)):
    np.testing.assert_array_equal(a, b)


def test_the_hook_is_probed_while_a_program_is_traced(fresh_hooks, monkeypatch):
  """First use inside a trace (where host_call is called): the probe runs there and then
  the traced program holds the lean primitive."""
  seen, out, program = _ordered_run(True, monkeypatch)
  assert jax_internals.lean_callback() is not None
  assert "io_callback" not in str(jax.make_jaxpr(program)(jnp.float32(0)))
  assert [s for s, _ in seen] == [1.5] * 5 and out[1]["n"].tolist() == [1, 2, 3, 4, 5]


# ---------------------------------------------------------------- unrolled threefry


def _act(key):
  """Random bits as an act draws them: a split, categorical actions, Gaussian noise."""
  k1, k2 = jax.random.split(key)
  logits = jnp.arange(8, dtype=jnp.float32).reshape(2, 4) / 3.0
  return (jax.random.categorical(k1, logits), jax.random.normal(k2, (3,)),
          jax.random.bits(k1, (5,)))


def _same_bits(a, b):
  for x, y in zip(a, b):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _act_program():
  return jax.jit(lambda key: _act(key))  # a new function: nothing of it cached yet


def test_the_threefry_hook_installs_on_this_jax():
  assert jax_internals.UNROLLED_THREEFRY.get() is not None


def test_an_act_lowered_unrolled_draws_the_same_bits_and_its_call_reuses_that_lowering(
    monkeypatch):
  """Same bits as JAX's own lowering; the call after ``lower_unrolled`` lowers nothing
  again (the rolled CPU rule is not used), so the unrolled program is the one that runs;
  the rule table is as before afterwards."""
  key = jax.random.key(7)
  table, prim, _ = jax_internals.UNROLLED_THREEFRY.get()
  rolled, used = table[prim], []

  def counting(*args, **kwargs):
    used.append(1)
    return rolled.rule(*args, **kwargs)

  monkeypatch.setitem(table, prim, type(rolled)(counting, rolled.inline))
  plain = _act_program()(key)
  assert used  # JAX's own lowering uses the rolled CPU rule
  used.clear()
  program = jax_internals.lower_unrolled(_act_program(), key)
  _same_bits(program(key), plain)
  assert not used
  assert table[prim].rule is counting  # restored
  with jax_internals.unrolled_threefry():
    assert table[prim].rule is not counting
  assert table[prim].rule is counting


def _broken_threefry_module():
  module = types.SimpleNamespace(**vars(jax_internals._threefry))
  module._threefry2x32_lowering_rule = _raise_arity
  return module


@pytest.mark.parametrize("breakage", ["a rule failing at lowering", "a table gone"])
def test_a_broken_threefry_hook_keeps_jaxs_lowering_with_one_warning(
    breakage, fresh_hooks, monkeypatch):
  key = jax.random.key(3)
  plain = _act_program()(key)
  if breakage == "a table gone":
    monkeypatch.setattr(jax_internals, "_mlir", types.SimpleNamespace(LoweringRuleEntry=tuple))
  else:
    monkeypatch.setattr(jax_internals, "_threefry", _broken_threefry_module())
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = jax_internals.lower_unrolled(_act_program(), key)
    second = jax_internals.lower_unrolled(_act_program(), key)
  [message] = _internals_warnings(caught)
  assert "unrolled_threefry" in message
  assert jax_internals.UNROLLED_THREEFRY.get() is None
  _same_bits(first(key), plain)
  _same_bits(second(key), plain)


def test_a_program_failing_to_lower_raises_its_own_error_and_keeps_the_hook(fresh_hooks):
  def bad(key):
    return jax.random.normal(key, (2,)) @ jnp.ones((3,))  # shapes do not match

  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with pytest.raises(TypeError, match="dot_general"):
      jax_internals.lower_unrolled(jax.jit(bad), jax.random.key(0))
  assert not _internals_warnings(caught)
  assert jax_internals.UNROLLED_THREEFRY.get() is not None
