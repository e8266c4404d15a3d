"""Disk and memory (RSS) a replay run's checkpoints take, for a given memory capacity.

Run by hand (not a test). Builds the named config's trainer (``sac_mujoco`` by default: one
HalfCheetah-v5 env, SAC, its replay memory at ``--capacity``), fills the memory with
synthetic transitions (random values of the stored shapes and dtypes, every row filled: what
a run has after ``capacity`` steps, without training that long), then writes ``--checkpoints``
checkpoints the way ``batchrl train`` does (``Trainer.save``: ``save_checkpoint``, the run's
``keep_checkpoints``), overwriting ``--rows-between`` memory rows with new synthetic ones
before each. After each save it prints the checkpoints' bytes on disk (and that over the
memory's bytes), the process RSS, the peak RSS during the save and the save's time; at the
end, the time and peak RSS of restoring the newest checkpoint into the trainer.

``--layout every`` writes what checkpoints held before the newest-only memory file: the
whole memory in each one (``checkpoint.save`` of the same state, no ``newest_only``), for
comparison. ``--layout both`` (the default) runs each layout in its own process::

    python benchmarks/checkpoint_disk.py                                  # sac_mujoco, 1M
    python benchmarks/checkpoint_disk.py --capacity 100000 --checkpoints 4
    python benchmarks/checkpoint_disk.py --config dqn_cartpole_fused --capacity 1000000
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax
import jax.numpy as jnp

from batchrl import checkpoint, configs
from batchrl.agents.core import without_scratch
from batchrl.agents.replay.updates import memory_of
from batchrl.train.local import LocalTrainer
from batchrl.train.rundir import restore_sim


def _status(field: str) -> int:
  """A ``/proc/self/status`` figure (VmRSS, VmHWM) in bytes."""
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1]) * 1024
  return 0


def _reset_peak() -> None:
  """VmHWM starts again from the current RSS (Linux >= 4.0)."""
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")
  except OSError:
    pass


def _disk(directory: Path) -> int:
  return sum(f.stat().st_blocks * 512 for f in directory.rglob("*") if f.is_file())


def _field(state, dotted: str):
  for name in dotted.split("."):
    state = getattr(state, name)
  return state


def _with_field(state, dotted: str, value):
  head, _, rest = dotted.partition(".")
  return state._replace(**{head: _with_field(getattr(state, head), rest, value)
                           if rest else value})


def _random_like(key, x):
  if jnp.issubdtype(x.dtype, jnp.floating):
    return jax.random.normal(key, x.shape, x.dtype)
  if x.dtype == jnp.bool_:
    return jax.random.bernoulli(key, 0.01, x.shape)
  return jax.random.randint(key, x.shape, 0, 2).astype(x.dtype)


def _synthetic_fill(mstate, key):
  """Every row holds random transitions; the next write goes to row 0 (a full memory)."""
  leaves, treedef = jax.tree.flatten(mstate.items)
  keys = jax.random.split(key, len(leaves))
  items = jax.tree.unflatten(treedef, [_random_like(k, x) for k, x in zip(keys, leaves)])
  rows = leaves[0].shape[0]
  return mstate._replace(items=items, head=jnp.int32(0), filled=jnp.int32(rows))


def _overwrite(memory, rows: int):
  """``rows`` new random rows written through the memory's own ``add_rows``."""
  def write(mstate, key):
    leaves, treedef = jax.tree.flatten(mstate.items)
    keys = jax.random.split(key, len(leaves))
    new = jax.tree.unflatten(treedef, [
        _random_like(k, jax.ShapeDtypeStruct((rows,) + x.shape[1:], x.dtype))
        for k, x in zip(keys, leaves)])
    return memory.add_rows(mstate, new)
  return jax.jit(write)


def run_layout(args) -> list[dict]:
  overrides = [f"memory_capacity={args.capacity}", f"keep_checkpoints={args.keep}",
               *args.set]
  exp = configs.apply_overrides(configs.get(args.config), overrides)
  root = Path(tempfile.mkdtemp(prefix="ckpt-disk-", dir=args.tmpdir))
  rows = []
  try:
    trainer = LocalTrainer(exp, root / "run")
    agent = trainer.agent
    if not agent.memory:
      raise SystemExit(f"{args.config}'s agent has no replay memory (Model.memory)")
    name = agent.memory[0]
    mstate = _field(trainer.sim.agent_state, name)
    memory = memory_of(exp.config, trainer.sim.agent_state.info)
    memory_bytes = sum(x.nbytes for x in jax.tree.leaves(mstate))
    fill = jax.jit(_synthetic_fill)
    write = _overwrite(memory, args.rows_between)
    key = jax.random.key(0)
    mstate = jax.block_until_ready(fill(mstate, key))
    ckpt_dir = root / "run" / "checkpoints"
    print(json.dumps({"layout": args.layout, "config": args.config,
                      "capacity": memory.num_items, "memory_bytes": memory_bytes,
                      "rss_after_fill": _status("VmRSS")}), flush=True)
    for i in range(1, args.checkpoints + 1):
      key, sub = jax.random.split(key)
      mstate = jax.block_until_ready(write(mstate, sub))
      trainer.sim = trainer.sim._replace(
          agent_state=_with_field(trainer.sim.agent_state, name, mstate))
      trainer.iteration = i * args.iterations_between
      _reset_peak()
      start = time.perf_counter()
      if args.layout == "newest-only":
        trainer.save()  # what `batchrl train` does
      else:  # before: the whole state, memory included, in every checkpoint
        kept = trainer.sim._replace(agent_state=without_scratch(agent,
                                                                trainer.sim.agent_state))
        checkpoint.save(ckpt_dir, trainer.step, kept, config=exp.to_dict(), keep=args.keep,
                        counters={"iteration": trainer.iteration, "steps": trainer.step})
      seconds = time.perf_counter() - start
      disk = _disk(ckpt_dir)
      row = {"checkpoint": i, "step": trainer.step,
             "kept": len(checkpoint.list_checkpoints(ckpt_dir)), "disk_bytes": disk,
             "disk_over_memory": disk / memory_bytes, "rss": _status("VmRSS"),
             "save_peak_rss": _status("VmHWM"), "save_seconds": seconds}
      rows.append(row)
      print(json.dumps(row), flush=True)
    _reset_peak()
    start = time.perf_counter()
    sim, manifest = restore_sim(ckpt_dir, trainer.sim, agent)
    jax.block_until_ready(sim)
    print(json.dumps({"restore_step": manifest["step"],
                      "restore_seconds": time.perf_counter() - start,
                      "restore_peak_rss": _status("VmHWM")}), flush=True)
  finally:
    shutil.rmtree(root, ignore_errors=True)
  return rows


def _mib(n: float) -> str:
  return f"{n / 2**20:8.1f}"


def _table(layout: str, lines: list[dict]) -> None:
  head = next(line for line in lines if "memory_bytes" in line)
  print(f"\n{layout}: {head['config']}, memory of {head['capacity']} transitions = "
        f"{_mib(head['memory_bytes']).strip()} MiB; RSS after filling it "
        f"{_mib(head['rss_after_fill']).strip()} MiB")
  print(" ckpt      step kept  disk MiB  disk/memory   RSS MiB  save peak RSS MiB  save s")
  for r in (line for line in lines if "checkpoint" in line):
    print(f"{r['checkpoint']:5d} {r['step']:9d} {r['kept']:4d}  {_mib(r['disk_bytes'])}"
          f"  {r['disk_over_memory']:11.2f}  {_mib(r['rss'])}  {_mib(r['save_peak_rss']):>17}"
          f"  {r['save_seconds']:6.2f}")
  for r in (line for line in lines if "restore_step" in line):
    print(f"restore of the newest (step {r['restore_step']}): {r['restore_seconds']:.2f} s, "
          f"peak RSS {_mib(r['restore_peak_rss']).strip()} MiB")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="sac_mujoco")
  parser.add_argument("--capacity", type=int, default=1_000_000)
  parser.add_argument("--checkpoints", type=int, default=8)
  parser.add_argument("--keep", type=int, default=5, help="run.keep_checkpoints")
  parser.add_argument("--rows-between", type=int, default=1000,
                      help="memory rows overwritten before each checkpoint")
  parser.add_argument("--iterations-between", type=int, default=100_000,
                      help="iterations counted between checkpoints (names the steps)")
  parser.add_argument("--layout", choices=("newest-only", "every", "both"), default="both")
  parser.add_argument("--set", action="append", default=[], help="config override")
  parser.add_argument("--tmpdir", default=None, help="where the run directory is written")
  args = parser.parse_args()
  if args.layout != "both":
    run_layout(args)
    return
  for layout in ("every", "newest-only"):
    argv = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--layout", layout]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    _table(layout, [json.loads(line) for line in out.splitlines() if line.startswith("{")])


if __name__ == "__main__":
  main()
