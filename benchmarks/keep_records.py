"""Keep what a benchmark table is made of in git: the records of a ``batchrl bench`` suite or
of ``benchmarks/parity.py``, copied from ``benchmarks/results/`` (ignored by git, and gone
with the machine) into ``benchmarks/records/`` (tracked), without checkpoints or event
files, so the table can be written again from a fresh clone.

    python benchmarks/keep_records.py benchmarks/results/mujoco-300k
    python benchmarks/keep_records.py benchmarks/results/parity

A bench suite's directory keeps each finished run's ``metrics.jsonl`` and ``config.yaml``
and its sittings (``state/*.json``, less the process that was training it), which is all
``batchrl bench --report-only`` reads. A run not yet finished is left out: its checkpoint
is not kept, so its records could never be completed (``--unfinished`` keeps them too)::

    batchrl bench --suite mujoco-300k --logdir benchmarks/records/mujoco-300k --seeds 1 \\
        --report table.md --report-only

A parity directory keeps its finished runs' results (``*.json``: every evaluation, the
command): ``python benchmarks/parity.py --table-only --results benchmarks/records/parity``.
Copying again replaces what an earlier copy kept of the same runs; a folder's
``about.json`` (where runs ran that were recorded before their sittings stored it) is left
as it is. ``batchrl bench --write-docs`` then writes the tables of docs/benchmarks.md again
from ``benchmarks/records/`` (the folders it reads are ``TABLES`` in batchrl/bench/docs.py).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN_FILES = ("metrics.jsonl", "config.yaml")


def keep(source: Path, into: Path, *, unfinished: bool = False) -> list[Path]:
  """Copies ``source``'s records into ``into``; returns the files written. A bench suite's
  runs that have not finished are left out unless ``unfinished``."""
  if (source / "runs").is_dir():
    return _keep_suite(source, into, unfinished)
  results = sorted(source.glob("*.json"))
  if not results:
    raise SystemExit(f"{source} holds neither a bench suite (runs/) nor parity results "
                     f"(*.json): nothing to keep")
  into.mkdir(parents=True, exist_ok=True)
  return [Path(shutil.copyfile(path, into / path.name)) for path in results]


def _keep_suite(source: Path, into: Path, unfinished: bool) -> list[Path]:
  written = []
  for path in sorted((source / "state").glob("*.json")):
    state = json.loads(path.read_text())
    if not (unfinished or state.get("finished")):
      continue
    run = source / "runs" / path.stem
    for name in RUN_FILES:
      if (run / name).is_file():
        (into / "runs" / run.name).mkdir(parents=True, exist_ok=True)
        written.append(Path(shutil.copyfile(run / name, into / "runs" / run.name / name)))
    state.pop("running", None)  # a process of this machine: meaningless elsewhere
    (into / "state").mkdir(parents=True, exist_ok=True)
    target = into / "state" / path.name
    target.write_text(json.dumps(state, indent=1))
    written.append(target)
  return written


def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("source", type=Path, help="a bench --logdir or a parity --results folder")
  p.add_argument("--into", type=Path, help="default: benchmarks/records/<source's name>")
  p.add_argument("--unfinished", action="store_true",
                 help="keep the records of a suite's unfinished runs too")
  args = p.parse_args(argv)
  into = args.into or HERE / "records" / args.source.resolve().name
  written = keep(args.source, into, unfinished=args.unfinished)
  print(f"kept {len(written)} files in {os.path.relpath(into)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
