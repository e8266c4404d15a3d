"""What a benchmark ran on: the CPU model and usable cores, the GPUs, the package versions.
``batchrl bench`` stores the first two with every sitting of a run, so a table written
again from kept records still says where each row ran."""
from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess

from batchrl.cpus import usable_cpus

PACKAGES = ("batchrl", "jax", "jaxlib", "gymnasium", "gymnax", "mujoco", "envpool", "ale-py")


def machine() -> str:
  """The CPU model and the cores this process may use, and the GPUs when any."""
  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    cpu = names[0] if names else cpu
  except OSError:
    pass
  text = f"{cpu}, {usable_cpus()} cores usable"
  return f"{text}; GPU: {gpus() or 'none'}"


def gpus() -> str:
  if shutil.which("nvidia-smi") is None:
    return ""
  try:
    found = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.SubprocessError):
    return ""
  return "; ".join(line.split(" (UUID")[0] for line in found.stdout.splitlines() if line)


def versions() -> str:
  found = []
  for name in PACKAGES:
    try:
      found.append(f"{name} {importlib.metadata.version(name)}")
    except importlib.metadata.PackageNotFoundError:
      continue
  return f"Python {platform.python_version()}, " + ", ".join(found)
