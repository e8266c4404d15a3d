"""Build the peers' own virtualenv, ``benchmarks/.peers-venv`` (never batchrl's dependencies).

    python benchmarks/peers/setup.py             # build it (a few minutes; ~1-2 GB on disk)
    python benchmarks/peers/setup.py --force     # delete and build again
    python benchmarks/peers/setup.py --check     # say what is installed, build nothing

The benchmarks run each peer (rejax, Stable-Baselines3, sb3-contrib, sbx, envpool) in a
subprocess with this venv's Python, so ratios are taken side by side in one run while
batchrl's own environment never sees these packages. The JAX stack is pinned to the
versions batchrl's venv uses, so compile-time ratios compare like with like.

Torch is the CPU build when one can be had: a ``torch-*+cpu`` wheel in a pip
``find-links`` folder, else the PyTorch CPU index when it is reachable, else plain PyPI
torch (the CUDA build: several GB of ``nvidia-*`` wheels, said loudly). envpool is
optional: if it does not install, the rest still does and the manifest says so.

When everything imports, ``<venv>/peers-manifest.json`` is written (versions, sizes);
``benchmarks/peers/run.py`` treats a venv without it as not installed.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_VENV = os.path.join(os.path.dirname(HERE), ".peers-venv")
MANIFEST = "peers-manifest.json"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# Same JAX stack as batchrl's venv (pyproject + DESIGN.md version notes), except gymnax:
# rejax 0.1.3 unpacks gymnax's old 5-tuple step, which gymnax 1.x (terminated/truncated)
# breaks ("too many values to unpack"), so the peers get 0.0.9, the gymnax rejax was
# written against (same CartPole/Pendulum dynamics).
JAX_STACK = ["jax==0.10.2", "jaxlib==0.10.2", "flax==0.12.8", "optax==0.2.8",
             "gymnax==0.0.9", "gymnasium[mujoco]==1.3.0", "numpy<2.5"]
PEERS = ["rejax==0.1.3", "stable-baselines3==2.9.2", "sb3-contrib==2.9.2", "sbx-rl==0.28.0",
         "pyyaml"]
OPTIONAL = {"envpool": "envpool==1.2.5"}
# import name -> distribution whose version the manifest records
CHECKS = {"rejax": "rejax", "stable_baselines3": "stable-baselines3",
          "sb3_contrib": "sb3-contrib", "sbx": "sbx-rl", "torch": "torch", "jax": "jax",
          "gymnax": "gymnax",
          "gymnasium": "gymnasium", "mujoco": "mujoco", "envpool": "envpool"}


def venv_python(venv: str) -> str:
  return os.path.join(venv, "bin", "python")


def pip(venv: str, *args: str) -> None:
  cmd = [venv_python(venv), "-m", "pip", "install", "--disable-pip-version-check", *args]
  print("+", " ".join(cmd), flush=True)
  subprocess.run(cmd, check=True)


def find_links_dirs(venv: str) -> list[str]:
  """The local folders pip searches for wheels (``find-links`` in config or environment)."""
  out = subprocess.run([venv_python(venv), "-m", "pip", "config", "list"],
                       capture_output=True, text=True).stdout
  values = [line.split("=", 1)[1].strip().strip("'\"") for line in out.splitlines()
            if "find-links" in line.split("=", 1)[0]]
  values.append(os.environ.get("PIP_FIND_LINKS", ""))
  return [d for value in values for d in value.split() if os.path.isdir(d)]


def torch_requirement(venv: str) -> tuple[list[str], str]:
  """pip arguments that install torch, and which build they give ('cpu' or 'pypi')."""
  tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
  for folder in find_links_dirs(venv):
    wheels = sorted(glob.glob(os.path.join(folder, f"torch-*+cpu-{tag}-*.whl")))
    if wheels:
      version = os.path.basename(wheels[-1]).split("-")[1]
      return [f"torch=={version}"], f"cpu (local wheel {os.path.basename(wheels[-1])})"
  try:
    urllib.request.urlopen(CPU_INDEX + "/torch/", timeout=5).close()
    return ["torch", "--index-url", CPU_INDEX, "--extra-index-url",
            "https://pypi.org/simple"], "cpu (PyTorch CPU index)"
  except OSError:
    print("!! no CPU-only torch wheel and the PyTorch CPU index is unreachable: installing "
          "PyPI torch, the CUDA build (several GB of nvidia-* wheels).", flush=True)
    return ["torch"], "pypi (CUDA build)"


def folder_mb(path: str) -> float:
  total = 0
  for root, _, files in os.walk(path):
    for name in files:
      full = os.path.join(root, name)
      if not os.path.islink(full):
        total += os.path.getsize(full)
  return total / 2**20


def installed(venv: str) -> dict:
  """Import each package in the venv; version or None per distribution, plus sizes."""
  code = ("import importlib, importlib.metadata as m, json, sys\n"
          f"checks = {CHECKS!r}\nout = {{}}\n"
          "for mod, dist in checks.items():\n"
          "  try:\n    importlib.import_module(mod); out[dist] = m.version(dist)\n"
          "  except Exception as e:\n    out[dist] = None\n"
          "out['python'] = sys.version.split()[0]\n"
          "print(json.dumps(out))\n")
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  proc = subprocess.run([venv_python(venv), "-c", code], capture_output=True, text=True,
                        env=env)
  if proc.returncode != 0:
    raise SystemExit(f"importing the peers failed:\n{proc.stderr[-2000:]}")
  versions = json.loads(proc.stdout.strip().splitlines()[-1])
  python = versions.pop("python")
  site = glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))
  sizes = {}
  for dist in ("torch", "jaxlib", "envpool", "mujoco"):
    for folder in glob.glob(os.path.join(site[0], dist)) if site else []:
      sizes[dist] = round(folder_mb(folder))
  return {"versions": versions, "python": python, "sizes_mb": sizes,
          "venv_mb": round(folder_mb(venv))}


def check_python(python: str) -> None:
  proc = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                        capture_output=True, text=True)
  if proc.stdout.strip() != "True":
    raise SystemExit(f"--python {python}: need Python >= 3.11 (envpool and rejax ask for it)")


def build(venv: str, python: str, with_envpool: bool) -> dict:
  start = time.perf_counter()
  check_python(python)
  subprocess.run([python, "-m", "venv", venv], check=True)
  pip(venv, "--upgrade", "pip", "wheel")
  torch_args, torch_build = torch_requirement(venv)
  # One resolver call, so a later requirement cannot swap the torch build chosen above.
  pip(venv, *torch_args, *JAX_STACK, *PEERS)
  missing = []
  for name, requirement in OPTIONAL.items():
    if not with_envpool:
      missing.append(f"{name} (skipped: --no-envpool)")
      continue
    try:
      pip(venv, requirement, *JAX_STACK)
    except subprocess.CalledProcessError as e:
      missing.append(f"{name} (pip failed with exit code {e.returncode})")
      print(f"!! {name} did not install; the other peers are fine.", flush=True)
  info = installed(venv)
  broken = [d for d, v in info["versions"].items() if v is None and d not in OPTIONAL]
  if broken:
    raise SystemExit(f"installed but not importable: {', '.join(broken)}; see the pip "
                     "output above, then run again with --force.")
  info.update(torch_build=torch_build, missing=missing, platform=sysconfig.get_platform(),
              build_s=round(time.perf_counter() - start),
              built=time.strftime("%Y-%m-%d %H:%M:%S"))
  with open(os.path.join(venv, MANIFEST), "w") as f:
    json.dump(info, f, indent=2)
  return info


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--venv", default=os.environ.get("BATCHRL_PEERS_VENV", DEFAULT_VENV),
                      help="where to build it (default benchmarks/.peers-venv, or "
                           "$BATCHRL_PEERS_VENV)")
  parser.add_argument("--python", default=sys.executable,
                      help="interpreter for the venv (Python >= 3.11; default: this one)")
  parser.add_argument("--force", action="store_true", help="delete an existing venv first")
  parser.add_argument("--no-envpool", action="store_true", help="leave envpool out")
  parser.add_argument("--check", action="store_true", help="report only, build nothing")
  args = parser.parse_args(argv)
  manifest = os.path.join(args.venv, MANIFEST)
  if args.check or (os.path.exists(manifest) and not args.force):
    if not os.path.exists(manifest):
      print(f"peers not installed at {args.venv}: run python benchmarks/peers/setup.py")
      return 1
    print(f"peers installed at {args.venv} (use --force to rebuild):")
    with open(manifest) as f:
      print(f.read())
    return 0
  if os.path.exists(args.venv):
    shutil.rmtree(args.venv)
  info = build(args.venv, args.python, with_envpool=not args.no_envpool)
  print(f"peers installed at {args.venv}:\n{json.dumps(info, indent=2)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
