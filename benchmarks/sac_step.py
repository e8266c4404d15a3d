"""Time per learning step of SAC (or TD3, TQC) with the published MuJoCo values, side by
side with sbx.

    python benchmarks/sac_step.py                 # 2000 timed steps each side
    python benchmarks/sac_step.py --steps 500 --sb3 --parts
    python benchmarks/sac_step.py --blocks 1 8 64 --skip-peers   # updates in blocks of K
    python benchmarks/sac_step.py --algo td3                      # TD3 instead
    python benchmarks/sac_step.py --algo tqc                      # TQC (sb3-contrib's: --sb3)
    python benchmarks/sac_step.py --algo crossq                   # CrossQ (1024-wide critics)
    python benchmarks/sac_step.py --algo simbav2                  # SimbaV2 (ours alone)

One learning step = one env step of HalfCheetah-v5 (1 env) + one gradient step of batch 256
on 2x256 ReLU MLPs (batchrl's ``mujoco_sac`` recipe, or ``mujoco_td3`` with ``--algo td3``,
whose actor steps on every second gradient step, or ``mujoco_tqc`` with ``--algo tqc``: 2
critics of 25 quantiles; sbx and SB3 / sb3-contrib with the same values, as
``benchmarks/peers/sbx_train.py`` builds them). Each side learns from step
``--learning-starts`` on, runs ``--warmup`` learning steps (compilation, caches), then
``--steps`` learning steps are timed: wall time / steps, and the process's CPU time / steps.

- batchrl: ``batchrl train --config sac_mujoco``'s (``td3_mujoco``'s) host loop
  (``LocalTrainer``: the env stepped in this process through a host callback inside the
  compiled chunk, called as the CLI calls it: in compiled calls of about half a second),
  with ``first_update`` set to ``--learning-starts``; the evaluation program compiling
  ahead is waited for before the timing.
- sbx (JAX) and, with ``--sb3``, SB3 (torch, 1 thread): ``model.learn`` over the same number
  of steps after a warm-up ``learn`` (``reset_num_timesteps=False``), in the peers' venv
  (``python benchmarks/peers/setup.py``) as a subprocess of this run
  (``benchmarks/peers/sbx_step.py``).

``--parts``: where batchrl's step goes: the agent's update program alone on a filled memory
(jitted, state donated), its act alone, and the whole compiled chunk per step; the update's
FLOPs (XLA's cost analysis) and this machine's speed at the critics' widest product, whose
ratio is the least time any implementation of that arithmetic takes here; and sbx's update
programs by the same analysis (its average gradient step and the one with the actor's step),
so both sides' arithmetic stands side by side.

The sides run one after the other on a possibly shared machine: compare ratios within one
run (the load average is printed with the table).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from batchrl import configs  # noqa: E402  (after the path tweak above)
from batchrl.train.local import LocalTrainer  # noqa: E402  (after the path tweak above)
from peers import run as peers  # noqa: E402  (after the path tweak above)

ENV = "HalfCheetah-v5"
BATCH = 256  # the *_mujoco recipes' batch size (checked in ``ours``)


def ours(steps: int, learning_starts: int, warmup: int, parts: bool, seed: int = 0,
         block: int = 1, algo: str = "sac") -> dict:
  """``<algo>_mujoco``'s host loop: ms per learning step (wall, CPU); with ``parts`` also
  the update and act programs alone. ``block``: ``block`` gradient steps after every
  ``block`` env steps (``update_frequency`` = ``repeat_update`` = block; the same work per
  step)."""
  named = configs.get(f"{algo}_mujoco")
  config = dataclasses.replace(named.config, first_update=learning_starts,
                               update_frequency=block, repeat_update=block)
  if config.batch_size != BATCH:
    raise SystemExit(f"{algo}_mujoco's batch is {config.batch_size}, this script times {BATCH}")
  exp = dataclasses.replace(named, config=config,
                            run=dataclasses.replace(named.run, env=ENV, seed=seed))
  with tempfile.TemporaryDirectory() as run_dir:
    trainer = LocalTrainer(exp, run_dir)
    try:
      # as `batchrl train` calls it: with a stop test, so in calls of about
      # schedule.CALL_SECONDS each (Ctrl-C is heard between them)
      # an iteration is one update's worth of env steps (``block`` of them: 1 env); the
      # first phase compiles, fills the memory and learns a little
      trainer.train_phase(-(-(learning_starts + warmup) // block), stop=never)
      trainer._eval_compiling.join()  # it would compile during the timing
      iterations = max(1, steps // block)
      steps = iterations * block
      start, cpu = time.perf_counter(), time.process_time()
      trainer.train_phase(iterations, stop=never)
      wall, cpu = time.perf_counter() - start, time.process_time() - cpu
      result = {"step_ms": wall / steps * 1e3, "cpu_ms": cpu / steps * 1e3}
      if parts:
        result.update(program_parts(trainer, steps, max(config.critic_layers)))
    finally:
      trainer.close()
  return result


def never() -> bool:
  return False


def timed(fn, arg, calls: int) -> float:
  """ms per call of ``arg = fn(arg)`` (the output fed back), after two untimed calls."""
  for _ in range(2):
    arg = fn(arg)
  jax.block_until_ready(arg)
  start = time.perf_counter()
  for _ in range(calls):
    arg = fn(arg)
  jax.block_until_ready(arg)
  return (time.perf_counter() - start) / calls * 1e3


def program_parts(trainer: LocalTrainer, calls: int, width: int) -> dict:
  """The agent's update (one gradient step, state donated) and act programs alone, on the
  trainer's state (its memory filled by the run); the update's FLOPs by XLA's cost analysis
  and this machine's speed at the critics' largest product (``width``), whose ratio is the
  floor no implementation of the same arithmetic goes below."""
  agent, obs = trainer.agent, trainer.sim.obs
  # compiled once: the program timed is the one whose FLOPs are counted
  update = jax.jit(lambda s: agent.update(s)[0], donate_argnums=0).lower(
      trainer.sim.agent_state).compile()
  flops = program_flops(update)
  update_ms = timed(update, jax.tree.map(jnp.copy, trainer.sim.agent_state), calls)
  state = trainer.sim.agent_state
  act = jax.jit(lambda s, key: (agent.act(s, obs, key)[0], jax.random.fold_in(key, 1)))
  act_ms = timed(lambda out: act(state, out[1]), act(state, jax.random.key(0)), calls)
  return {"update_ms": update_ms, "act_ms": act_ms, "update_gflop": flops / 1e9,
          "matmul_gflops": matmul_gflops(BATCH, width, calls)}


def program_flops(compiled) -> float:
  """Floating-point operations of one call of a ``compiled`` program by XLA's cost analysis
  (NaN when this jaxlib gives none). XLA counts a branch at its larger side (checked with a
  ``lax.cond`` of a product and a scaling): TD3's and CrossQ's updates count their actor's
  step, which runs on every ``policy_delay``-th gradient step only."""
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float((cost or {}).get("flops", float("nan")))


def matmul_gflops(batch: int, width: int, calls: int) -> float:
  """GFLOP/s of a ``batch x width`` by ``width x width`` float32 product on this machine (all
  its cores, as XLA runs the update): the speed of an MLP layer of that width."""
  weights = jax.random.normal(jax.random.key(0), (width, width)) / width ** 0.5
  layer = jax.jit(lambda x: x @ weights)
  ms = timed(layer, jax.random.normal(jax.random.key(1), (batch, width)), calls)
  return 2 * batch * width * width / (ms * 1e-3) / 1e9


def peer(library: str, steps: int, learning_starts: int, warmup: int,
         algo: str = "sac") -> dict | None:
  """``benchmarks/peers/sbx_step.py`` in the peers' venv (None, with why, if it cannot)."""
  if not peers.installed():
    print(f"{library}: peers not installed ({peers.SETUP_HINT})", flush=True)
    return None
  cmd = [peers.python_path(), os.path.join(HERE, "peers", "sbx_step.py"), "--library",
         library, "--algo", algo, "--env", ENV, "--steps", str(steps), "--learning-starts",
         str(learning_starts), "--warmup", str(warmup)]
  proc = subprocess.run(cmd, capture_output=True, text=True, env=peers.peer_env(),
                        cwd=os.path.join(HERE, "peers"))
  result = peers.parse_result(proc.stdout)
  if proc.returncode or result is None:
    print(f"{library} failed:\n{proc.stderr[-2000:]}", flush=True)
    return None
  return result


# algorithms no released peer ships: timed on our side alone
NO_PEER = {"simbav2": "sbx has SimbaV2 only on a branch"}


def floor_line(mine: dict, width: int) -> str:
  """The update's arithmetic against this machine's speed: the floor of any implementation
  of the same arithmetic."""
  gflop, speed = mine["update_gflop"], mine["matmul_gflops"]
  floor_ms = gflop / speed * 1e3
  return (f"update: {gflop * 1e3:.0f} MFLOP a gradient step (XLA's cost analysis, which counts "
          f"a branch at its larger side: with the actor's step where policy_delay holds it on "
          f"some steps); this machine multiplies {BATCH}x{width} by {width}x{width} at "
          f"{speed:.0f} GFLOP/s, so that much arithmetic takes at least {floor_ms:.2f} ms with "
          f"every product at that speed; the update program alone ran at "
          f"{gflop / mine['update_ms'] * 1e3:.0f} GFLOP/s "
          f"({100 * floor_ms / mine['update_ms']:.0f}% of that speed)")


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--steps", type=int, default=2_000, help="timed learning steps per side")
  p.add_argument("--learning-starts", type=int, default=300)
  p.add_argument("--warmup", type=int, default=200)
  p.add_argument("--sb3", action="store_true", help="SB3 (torch) too")
  p.add_argument("--parts", action="store_true", help="batchrl's update and act alone")
  p.add_argument("--skip-peers", action="store_true")
  p.add_argument("--algo", choices=("sac", "td3", "tqc", "crossq", "simbav2"), default="sac")
  p.add_argument("--blocks", nargs="+", type=int, default=[1], metavar="K",
                 help="also time batchrl with K gradient steps after every K env steps "
                 "(update_frequency=K, repeat_update=K), e.g. --blocks 1 8 64")
  args = p.parse_args()
  os.environ.setdefault("MUJOCO_GL", "egl")
  command = "python " + " ".join([os.path.relpath(__file__), *sys.argv[1:]])
  when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

  rows = []
  algo, name = args.algo, args.algo.upper()
  print(f"timing batchrl ({algo}_mujoco host loop) ...", flush=True)
  mine = ours(args.steps, args.learning_starts, args.warmup, args.parts, algo=algo)
  rows.append((f"batchrl {algo}_mujoco (LocalTrainer)", mine))
  for block in (k for k in args.blocks if k != 1):
    print(f"timing batchrl with blocks of {block} ...", flush=True)
    rows.append((f"batchrl, {block} gradient steps every {block} env steps",
                 ours(args.steps, args.learning_starts, args.warmup, False, block=block,
                      algo=algo)))
  sbx = None
  if algo in NO_PEER:
    print(f"no peer times {name}: {NO_PEER[algo]}", flush=True)
  elif not args.skip_peers:
    print("timing sbx ...", flush=True)
    sbx = peer("sbx", args.steps, args.learning_starts, args.warmup, algo)
    if sbx is not None:
      rows.append((f"{sbx['library']} {name}", sbx))
    if args.sb3:
      print("timing SB3 ...", flush=True)
      sb3 = peer("sb3", args.steps, args.learning_starts, args.warmup, algo)
      if sb3 is not None:
        rows.append((f"{sb3['library']} {name} (torch, 1 thread)", sb3))

  load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
  config = configs.get(f"{algo}_mujoco").config
  widths = f"actor {config.actor_layers}, critics {config.critic_layers}"
  print(f"\n{name} learning step, {ENV}, 1 env, {widths}, batch 256, one gradient step per "
        f"env step; {args.steps} timed steps each\n{when}; {os.cpu_count()} CPUs, load "
        f"average {load:.2f}; jax {jax.__version__}\ncommand: {command}\n")
  print(f"{'':44s} {'ms/step':>9s} {'CPU ms/step':>12s} {'/ sbx':>7s}")
  for name, r in rows:
    ratio = f"{r['step_ms'] / sbx['step_ms']:.2f}x" if sbx else "-"
    print(f"{name:44s} {r['step_ms']:9.2f} {r['cpu_ms']:12.2f} {ratio:>7s}")
  if args.parts:
    print(f"\nbatchrl parts: update program alone {mine['update_ms']:.2f} ms, act alone "
          f"{mine['act_ms']:.3f} ms, whole step {mine['step_ms']:.2f} ms")
    print(floor_line(mine, max(config.critic_layers)))
  if sbx and "update_gflop" in sbx:
    print(f"sbx's update programs by the same analysis: {sbx['update_gflop'] * 1e3:.0f} MFLOP "
          f"an average gradient step, {sbx['update_gflop_max'] * 1e3:.0f} with the actor's "
          f"step (one program per place in its policy delay)")


if __name__ == "__main__":
  main()
