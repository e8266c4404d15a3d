"""Off-policy updates in blocks: K gradient steps after every K environment steps
(``--set update_frequency=K --set repeat_update=K``, SB3's ``train_freq=K,
gradient_steps=K``), the update-to-data ratio unchanged. Does learning suffer at the same
budget, and what does it buy in speed?

    python benchmarks/update_ratio.py                       # learning: K = 1, 8, 64, 3 seeds
    python benchmarks/update_ratio.py --ks 1 64 --seeds 2 --env Pendulum-v1 --steps 20000

Learning: ``batchrl train --config sac_mujoco`` (SAC with the published MuJoCo values: 2x256
networks, batch 256, Adam 3e-4) on ``--env`` for ``--steps`` steps with each K, learning
from ``--first-update`` on, several seeds, run as a ``batchrl bench`` suite under
``--logdir`` (resumable: the same command continues it; finished runs are skipped). The
table gives the final and best greedy evaluations over the seeds and each run's wall time.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from batchrl.bench import report, runs  # noqa: E402  (after the path tweak above)
from batchrl.bench.suites import Entry, Suite  # noqa: E402  (after the path tweak above)


def ratio_suite(env: str, steps: int, ks: list[int], first_update: int, eval_every: int,
                seeds: int) -> Suite:
  """``sac_mujoco`` on ``env`` once per K, the runs named by K."""
  entries = tuple(
      Entry("sac_mujoco", env=env, steps=steps, label=f"{env}-K{k}",
            sets=(f"update_frequency={k}", f"repeat_update={k}", f"first_update={first_update}",
                  f"eval_every={eval_every}", f"report_every={eval_every}",
                  f"checkpoint_every={eval_every}"))
      for k in ks)
  return Suite("update-ratio", f"SAC (sac_mujoco) on {env}, {steps} steps, K gradient steps "
               "after every K env steps", entries, seeds=seeds)


def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--ks", nargs="+", type=int, default=[1, 8, 64])
  p.add_argument("--env", default="Pendulum-v1")
  p.add_argument("--steps", type=int, default=20_000)
  p.add_argument("--first-update", type=int, default=1_000)
  p.add_argument("--eval-every", type=int, default=2_000)
  p.add_argument("--seeds", type=int, default=3)
  p.add_argument("--jobs", type=int, default=1)
  p.add_argument("--logdir", default=os.path.join(HERE, "results", "update-ratio"))
  p.add_argument("--table-only", action="store_true", help="print the table, train nothing")
  args = p.parse_args(argv)
  suite = ratio_suite(args.env, args.steps, args.ks, args.first_update, args.eval_every,
                      args.seeds)
  if not args.table_only:
    runs.run_suite(suite, args.logdir, seeds=args.seeds, jobs=args.jobs)
  print(f"{suite.description}; {args.seeds} seeds; {report.machine()}; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
  print(report.table(report.rows(suite, args.logdir, args.seeds)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
