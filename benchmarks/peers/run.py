"""Run one peer training job in the peers' own venv and read back what it measured.

The peers (rejax, Stable-Baselines3, sb3-contrib, envpool) are never batchrl's
dependencies: ``python benchmarks/peers/setup.py`` builds ``benchmarks/.peers-venv`` for
them (``$BATCHRL_PEERS_VENV`` moves it), and each job runs there in a subprocess, so a
benchmark can time a peer side by side with batchrl in the same run.

From a benchmark script in ``benchmarks/``::

    from peers.run import run_peer, recorded
    r = run_peer("rejax_ppo_cartpole", steps=500_000)   # dict, or None if not installed
    r = r or recorded("rejax_ppo_cartpole")             # the figures from peers.md

From a shell::

    python benchmarks/peers/run.py --list
    python benchmarks/peers/run.py sb3_dqn_cartpole --steps 5000

Peers (name: script and fixed arguments; defaults are the peer's published settings):

    rejax_ppo_cartpole   rejax_train.py --algo ppo --env CartPole-v1   (rejax config, 100k)
    rejax_ppo_pendulum   rejax_train.py --algo ppo --env Pendulum-v1   (rejax config, 150k)
    rejax_dqn_cartpole   rejax_train.py --algo dqn --env CartPole-v1   (rejax config, 100k)
    sb3_ppo_pendulum     sb3_train.py --algo ppo --env Pendulum-v1     (rl-zoo, gSDE, 100k)
    sb3_ppo_cartpole     sb3_train.py --algo ppo --env CartPole-v1     (rl-zoo, 100k)
    sb3_dqn_cartpole     sb3_train.py --algo dqn --env CartPole-v1     (rl-zoo, 50k)
    trpo_cartpole        sb3_train.py --algo trpo --env CartPole-v1    (sb3-contrib, rl-zoo, 100k)
    trpo_halfcheetah     sb3_train.py --algo trpo --env HalfCheetah-v5 (sb3-contrib, rl-zoo, 1M)
    sb3_sac_pendulum     sb3_train.py --algo sac --env Pendulum-v1     (rl-zoo, 20k)
    sb3_td3_pendulum     sb3_train.py --algo td3 --env Pendulum-v1     (rl-zoo, 20k)
    sb3_ddpg_pendulum    sb3_train.py --algo ddpg --env Pendulum-v1    (rl-zoo, 20k)
    sb3_a2c_cartpole     sb3_train.py --algo a2c --env CartPole-v1     (rl-zoo, 8 envs, 500k)
    rejax_sac_pendulum   rejax_train.py --algo sac --env Pendulum-v1   (rejax config, 10k)

Every script takes ``--steps N --seed S --episodes E --eval-every K --target T`` (run_peer
passes them as ``steps=``, ``seed=``, ``episodes=``, ``eval_every=``, ``target=``) and
prints one JSON line; ``run_peer`` returns it as a dict with ``subprocess_s`` added. The
SB3 scripts run torch with one thread (``--torch-threads``, default 1): torch's default of
one per core spins under contention and was 12x slower on this busy 2-core machine.
The result's fields:

    peer, library, algo, env, seed, settings   what ran (settings: the hyperparameters)
    steps             env steps actually trained (rounded up to whole updates)
    process_s         the peer process from its start to its result: interpreter start-up,
                      imports, env and model construction, compilation, training and
                      evaluation (cold: no compilation cache)
    subprocess_s      the same, timed from outside (process creation and exit included)
    setup_s           model and env construction
    compile_s         lowering + XLA compilation (rejax); None for SB3 (nothing compiled)
    train_s           training alone: rejax, the compiled run (its in-graph evaluations
                      included: train_includes_eval); SB3, model.learn less evaluation
    eval_every, eval_episodes, evals   [[step, mean return], ...] of deterministic
                      evaluations during training and after it (the last one)
    final_return, final_return_std, best_return
    target, steps_to_target   first evaluated step whose mean return >= target (or None)
    train_s_to_target (SB3)   training seconds up to that evaluation, evaluations excluded
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.environ.get("BATCHRL_PEERS_VENV", os.path.join(os.path.dirname(HERE), ".peers-venv"))
MANIFEST = "peers-manifest.json"
SETUP_HINT = "python benchmarks/peers/setup.py"

PEERS = {
    "rejax_ppo_cartpole": ("rejax_train.py", ["--algo", "ppo", "--env", "CartPole-v1"]),
    "rejax_ppo_pendulum": ("rejax_train.py", ["--algo", "ppo", "--env", "Pendulum-v1"]),
    "rejax_dqn_cartpole": ("rejax_train.py", ["--algo", "dqn", "--env", "CartPole-v1"]),
    "sb3_ppo_pendulum": ("sb3_train.py", ["--algo", "ppo", "--env", "Pendulum-v1"]),
    "sb3_ppo_cartpole": ("sb3_train.py", ["--algo", "ppo", "--env", "CartPole-v1"]),
    "sb3_dqn_cartpole": ("sb3_train.py", ["--algo", "dqn", "--env", "CartPole-v1"]),
    "trpo_cartpole": ("sb3_train.py", ["--algo", "trpo", "--env", "CartPole-v1"]),
    "trpo_halfcheetah": ("sb3_train.py", ["--algo", "trpo", "--env", "HalfCheetah-v5"]),
    "sb3_sac_pendulum": ("sb3_train.py", ["--algo", "sac", "--env", "Pendulum-v1"]),
    "sb3_td3_pendulum": ("sb3_train.py", ["--algo", "td3", "--env", "Pendulum-v1"]),
    "sb3_ddpg_pendulum": ("sb3_train.py", ["--algo", "ddpg", "--env", "Pendulum-v1"]),
    "sb3_a2c_cartpole": ("sb3_train.py", ["--algo", "a2c", "--env", "CartPole-v1"]),
    "rejax_sac_pendulum": ("rejax_train.py", ["--algo", "sac", "--env", "Pendulum-v1"]),
}
OPTIONS = ("steps", "seed", "episodes", "eval_every", "target")

# reference/peers.md, "Measured on a 2-core CPU machine" (another day: compare with care).
# rejax's figure is compile + train inside one process, not the whole process.
RECORDED = {
    "rejax_ppo_cartpole": dict(steps=500_000, compile_s=4.6, train_s=3.6, total_s=8.2,
                               final_return=500.0),
    "rejax_ppo_pendulum": dict(steps=750_000, total_s=15.0, final_return=-218.0),
    "sb3_ppo_cartpole": dict(steps=100_000, total_s=20.0, final_return=500.0),
    "sb3_ppo_pendulum": dict(steps=100_000, total_s=34.0, final_return=-131.0),
    "sb3_dqn_cartpole": dict(steps=50_000, final_return=500.0, published=True),
    "trpo_cartpole": dict(steps=100_000, final_return=500.0, published=True),
    "trpo_halfcheetah": dict(steps=1_000_000, final_return=1785.0, published=True),
    # peers.md, measured 2026-11-25 under load (whole process for SB3, compile + run for rejax)
    "sb3_sac_pendulum": dict(steps=20_000, total_s=554.0, final_return=-141.0),
    "rejax_sac_pendulum": dict(steps=10_000, compile_s=18.0, train_s=19.0, total_s=37.0,
                               final_return=-151.0),
}


class PeerError(RuntimeError):
  """A peer job failed or printed no result; the message carries its stderr's tail."""


def python_path(venv: str = VENV) -> str:
  return os.path.join(venv, "bin", "python")


def installed(venv: str = VENV) -> bool:
  """True when setup.py finished (its manifest exists) and the venv's python is there."""
  return os.path.exists(os.path.join(venv, MANIFEST)) and os.path.exists(python_path(venv))


def manifest(venv: str = VENV) -> dict | None:
  """What setup.py installed (versions, sizes), or None when not installed."""
  if not installed(venv):
    return None
  with open(os.path.join(venv, MANIFEST)) as f:
    return json.load(f)


def command(name: str, **args) -> list[str]:
  """The command line that runs peer ``name`` with options ``args`` (see ``OPTIONS``)."""
  if name not in PEERS:
    close = difflib.get_close_matches(name, PEERS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown peer {name!r}{hint} Valid: {', '.join(PEERS)}")
  unknown = sorted(set(args) - set(OPTIONS))
  if unknown:
    raise ValueError(f"unknown option(s) {', '.join(unknown)} for peer {name!r}; "
                     f"valid: {', '.join(OPTIONS)}")
  script, fixed = PEERS[name]
  cmd = [python_path(), os.path.join(HERE, script), *fixed]
  for key, value in args.items():
    if value is not None:
      cmd += [f"--{key.replace('_', '-')}", str(value)]
  return cmd


def parse_result(stdout: str) -> dict | None:
  """The last line of ``stdout`` that is a JSON object with a ``peer`` key."""
  for line in reversed(stdout.splitlines()):
    line = line.strip()
    if line.startswith("{"):
      try:
        value = json.loads(line)
      except json.JSONDecodeError:
        continue
      if isinstance(value, dict) and "peer" in value:
        return value
  return None


def peer_env() -> dict:
  """Our environment minus what would leak batchrl's venv into the peer's interpreter."""
  env = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__")}
  env.setdefault("JAX_PLATFORMS", "cpu")
  env.setdefault("MUJOCO_GL", "egl")
  return env


def run_peer(name: str, *, timeout: float | None = None, quiet: bool = False,
             **args) -> dict | None:
  """Run peer ``name`` once in the peers' venv; its result dict, or None if not installed.

  ``args``: ``steps``, ``seed``, ``episodes``, ``eval_every``, ``target`` (None = the
  peer's default). Raises ``PeerError`` when the job fails, ``ValueError`` for an unknown
  peer or option, ``subprocess.TimeoutExpired`` past ``timeout`` seconds.
  """
  cmd = command(name, **args)
  if not installed():
    if not quiet:
      print(f"peers not installed: run {SETUP_HINT}; falling back to the recorded figures "
            "from peers.md", file=sys.stderr, flush=True)
    return None
  start = time.perf_counter()
  proc = subprocess.run(cmd, capture_output=True, text=True, env=peer_env(),
                        timeout=timeout, cwd=HERE)
  elapsed = time.perf_counter() - start
  result = parse_result(proc.stdout)
  if proc.returncode != 0 or result is None:
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-25:])
    raise PeerError(f"peer {name} failed (exit code {proc.returncode}): "
                    f"{' '.join(cmd)}\n{tail}")
  result.update(subprocess_s=round(elapsed, 3), name=name)
  return result


def recorded(name: str) -> dict:
  """The figures peers.md recorded for ``name`` (another day, same kind of machine)."""
  if name not in RECORDED:
    raise ValueError(f"no recorded figures for {name!r}; have: {', '.join(RECORDED)}")
  return dict(RECORDED[name], name=name, recorded=True)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("name", nargs="?", help="peer to run (see --list)")
  parser.add_argument("--list", action="store_true", help="list the peers and exit")
  parser.add_argument("--timeout", type=float, default=None, help="seconds")
  for option in OPTIONS:
    parser.add_argument(f"--{option.replace('_', '-')}",
                        type=int if option != "target" else float)
  args = parser.parse_args(argv)
  if args.list or not args.name:
    for name, (script, fixed) in PEERS.items():
      print(f"{name:<20} {script} {' '.join(fixed)}")
    state = manifest()
    print(f"\nvenv {VENV}: " + ("installed" if state else f"not installed ({SETUP_HINT})"))
    return 0
  try:
    result = run_peer(args.name, timeout=args.timeout,
                      **{o: getattr(args, o) for o in OPTIONS})
  except (ValueError, PeerError) as e:
    print(f"run.py: error: {e}", file=sys.stderr)
    return 2
  print(json.dumps(result if result is not None else recorded(args.name), indent=1))
  return 0 if result is not None else 1


if __name__ == "__main__":
  sys.exit(main())
