"""``batchrl.programs``: XLA options per kind of program, compiling ahead."""
from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchrl import programs

# values compared across compilations or with recorded digests: XLA's optimized programs
pytestmark = pytest.mark.optimized

CPU = jax.default_backend() == "cpu"


def test_compile_ahead_leaves_the_program_compiled_for_its_first_call(caplog):
  program = jax.jit(lambda x: jnp.tanh(x) * 3.0)
  x = jnp.ones((5,))
  with jax.log_compiles():
    programs.compile_ahead(lambda: program.lower(x)).join()
    caplog.clear()
    np.testing.assert_allclose(program(x), np.tanh(1.0) * 3.0, rtol=1e-6)
  assert not [r for r in caplog.records if "Compiling" in r.getMessage()]  # no second time
  # a failure costs only the head start
  programs.compile_ahead(lambda: program.lower("not an array")).join()
  np.testing.assert_allclose(program(x), np.tanh(1.0) * 3.0, rtol=1e-6)


def test_a_process_that_ends_while_a_program_compiles_ahead_exits_cleanly(tmp_path):
  """The interpreter waits for the compiling thread: killed inside XLA at exit (as a daemon
  thread is), it aborted the process (exit code 134) about two times in three when a resumed
  run was already complete."""
  script = tmp_path / "ends_early.py"
  script.write_text(
      "import jax, jax.numpy as jnp\n"
      "from batchrl import programs\n"
      "f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())\n"
      "for n in range(4):\n"
      "  programs.compile_ahead(lambda n=n: f.lower(jnp.ones((64 + n, 64))))\n")
  for _ in range(3):
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def _conv(x, w):
  return jax.lax.conv_general_dilated(x, w, (2, 2), "VALID",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))


@pytest.mark.skipif(not CPU, reason="the options are CPU ones")
def test_convolutions_leave_ynnpack_and_give_the_same_values():
  """On the CPU a program's convolutions run on XLA's own kernels (``_YNN``), not as YNNPACK
  fusions; the values are those of a plain ``jax.jit`` up to float rounding."""
  x = jax.random.normal(jax.random.key(0), (4, 12, 12, 3))
  w = jax.random.normal(jax.random.key(1), (4, 4, 3, 8))
  ours = programs.jit(_conv, "loop")
  assert "xla_cpu_experimental_ynn_fusion_type" in programs.compiler_options("loop")
  assert "__ynn_fusion" not in ours.lower(x, w).compile().as_text()
  np.testing.assert_allclose(ours(x, w), jax.jit(_conv)(x, w), rtol=1e-5, atol=1e-5)


def test_long_programs_keep_xlas_fusion_emitters_and_give_the_same_values():
  x = jax.random.normal(jax.random.key(0), (16, 8))
  fun = lambda x: jnp.tanh(x @ x.T).sum(axis=1)
  if CPU and "xla_cpu_use_fusion_emitters" in programs.compiler_options("loop"):
    assert programs.compiler_options("long")["xla_cpu_use_fusion_emitters"] is True
    assert programs.compiler_options("loop")["xla_cpu_use_fusion_emitters"] is False
  np.testing.assert_allclose(programs.jit(fun, "long")(x), jax.jit(fun)(x), rtol=1e-5)


def test_fast_compile_all_compiles_every_kind_as_once_and_only_while_it_is_set(monkeypatch):
  """``BATCHRL_FAST_COMPILE=all`` (the named-config tests): every kind gets ``"once"``'s
  options; a program called under it and again without it is jitted each way, so the
  setting never outlives the calls made under it."""
  seen = []
  real_jit = jax.jit

  def spy(fun, **kwargs):
    seen.append(kwargs.get("compiler_options"))
    return real_jit(fun, **kwargs)

  monkeypatch.setattr(jax, "jit", spy)
  x = jnp.arange(6.0)
  program = programs.jit(lambda x: jnp.sin(x) * 2.0, "loop")
  expected = np.sin(np.arange(6.0)) * 2.0
  np.testing.assert_allclose(program(x), expected, rtol=1e-6)
  monkeypatch.setenv(programs.FAST_COMPILE_ENV, "all")
  for kind in ("loop", "long", "once"):
    assert programs.compiler_options(kind) == programs.compiler_options("once")
  np.testing.assert_allclose(program(x), expected, rtol=1e-6)
  monkeypatch.delenv(programs.FAST_COMPILE_ENV)
  np.testing.assert_allclose(program(x), expected, rtol=1e-6)
  loop, once = programs.compiler_options("loop") or None, programs.compiler_options("once") or None
  # jitted once per set of options (plus the plain twin for nested calls), never again
  expected_options = [loop] + ([once] if once != loop else [])
  assert [o for o in seen if o is not None] == [o for o in expected_options if o is not None]


def test_an_option_this_jaxlib_does_not_know_is_left_out_alone(monkeypatch):
  options = {"loop": {"xla_cpu_use_fusion_emitters": False,
                      "xla_no_such_option_anywhere": True}, "once": {}}
  monkeypatch.setattr(programs, "_CPU_OPTIONS", options)
  programs._known_options.cache_clear()
  try:
    real = {"xla_cpu_use_fusion_emitters": False}  # newer jaxlibs dropped it: then left out
    expected = real if CPU and programs._compiles(real) else {}
    assert programs.compiler_options("loop") == expected
  finally:
    programs._known_options.cache_clear()


def test_an_unknown_kind_is_refused_with_the_valid_ones():
  with pytest.raises(ValueError, match="valid: loop, once, long"):
    programs.compiler_options("often")


def test_defining_programs_at_import_leaves_the_backend_unstarted():
  """``run.xla_threads`` needs the backend unstarted until the trainer starts it."""
  import subprocess
  import sys
  code = ("from batchrl import programs, cli; import batchrl.agents.ppo.model; "
          "programs.jit(lambda x: x, 'loop'); "
          "from batchrl.train.cpu_threads import backend_started; print(backend_started())")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert out.stdout.strip() == "False"
