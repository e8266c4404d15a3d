"""``run.xla_threads``: XLA's CPU pool sized as the run starts JAX, nothing left pinned."""
import os
import subprocess
import sys
import textwrap

import jax
import pytest

from batchrl.configclass import ConfigError
from batchrl.configs import RunConfig
from batchrl.train.cpu_threads import backend_started, start_cpu_backend

LINUX_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


def test_nothing_changes_without_a_setting_or_once_jax_runs():
  assert start_cpu_backend(None) is False
  jax.devices()
  assert backend_started()
  assert start_cpu_backend(1) is False  # too late in this process: a no-op, not an error


@pytest.mark.skipif(LINUX_CPUS < 2 or not os.path.isdir("/proc/self/task"),
                    reason="needs Linux CPU affinity and at least 2 CPUs")
def test_one_thread_pool_in_a_fresh_process_and_every_thread_keeps_all_cpus():
  script = textwrap.dedent("""
      import os
      from batchrl.train.cpu_threads import start_cpu_backend
      cpus = os.sched_getaffinity(0)
      assert start_cpu_backend(1)
      import jax, jax.numpy as jnp
      assert int(jax.jit(lambda x: (x @ x).sum())(jnp.ones((64, 64)))) == 64 ** 3
      names = {}
      for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
          names[int(tid)] = f.read().strip()
        assert os.sched_getaffinity(int(tid)) == cpus, (names[int(tid)], cpus)
      print(sum(name.startswith("tf_XLAEigen") for name in names.values()))
  """)
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       check=False, timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert out.returncode == 0, out.stderr
  assert out.stdout.split()[-1] == "1"  # XLA's pool: one thread (the default: one per CPU)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_xla_threads_must_be_a_positive_int(bad):  # a clear error naming the key
  with pytest.raises(ConfigError, match="xla_threads"):
    RunConfig(xla_threads=bad)
