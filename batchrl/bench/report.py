"""``batchrl bench --report FILE.md``: a suite's table from the runs that exist, with the
machine, versions and date it ran on, the command of every row, published references, and
a learning-curve image per entry.

Scores are greedy evaluations (``mean_score`` of the runs' ``eval`` records). At each
budget: the final score is the last evaluation up to the end of the training phase that
reached it (runs evaluate at the ends of their training phases, so ``ppo_mujoco``, in
phases of 20,480 steps, reads its 100k score at 102,400 steps and its 1M score at
1,001,472), the best the highest up to there; a seed counts at a budget once its run has
reached it. Beside them, the training return: the mean return of the training episodes
that ended in the last tenth of the steps up to the budget (the figure CleanRL publishes,
and steadier than a few greedy episodes). Wall time is the sum of a run's sittings
(start-up, compilation and evaluations included; time stopped is not), steps/s its steps
over that time.
"""
from __future__ import annotations

import datetime
import os
from pathlib import Path

import numpy as np

from batchrl import plot
from batchrl.bench import runs as bench_runs
from batchrl.bench.machine import machine, versions
from batchrl.bench.suites import Suite, references, steps_text
from batchrl.configs import REGISTRY
from batchrl.errors import UserInputError
from batchrl.files import write_atomic

# ------------------------------------------------------------------ reading runs


def _records(logdir: Path, run: bench_runs.Run) -> list[dict]:
  directory = bench_runs.run_dir(logdir, run)
  if not (directory / plot.METRICS_FILE).is_file():
    return []
  return plot.read_records(directory)


def _key(metric: str, lane: int | None) -> str:
  """A metric of one seed: a lanes run (``--seeds``) logs ``seed<i>/<metric>`` per seed."""
  return metric if lane is None else f"seed{lane}/{metric}"


def _evaluations(records: list[dict], lane: int | None) -> list[tuple[int, float]]:
  key = _key("mean_score", lane)
  return [(int(r["step"]), float(r[key])) for r in records
          if r.get("phase") == "eval" and r.get(key) is not None]


def _training_reports(records: list[dict],
                      lane: int | None) -> list[tuple[int, float, float]]:
  score, episodes = _key("mean_score", lane), _key("episodes", lane)
  out = []
  for r in records:
    if r.get("phase") == "train":
      ended = r.get(score) is not None and bool(r.get(episodes))
      out.append((int(r["step"]), float(r[episodes]) if ended else 0.0,
                  float(r[score]) if ended else float("nan")))
  return out


def evaluations(logdir: Path, run: bench_runs.Run,
                lane: int | None = None) -> list[tuple[int, float]]:
  """``(step, mean greedy score)`` of every evaluation the run logged so far (of its seed
  ``lane`` for a lanes run)."""
  return _evaluations(_records(logdir, run), lane)


def at_budget(evals: list[tuple[int, float]], budget: int) -> tuple[float, float] | None:
  """``(final, best)`` at ``budget`` steps; None when the run has not reached it."""
  if not evals or max(step for step, _ in evals) < budget:
    return None
  upto = [score for step, score in evals if step <= budget]
  if not upto:
    return None
  return upto[-1], max(upto)


def reading_step(reports: list[tuple[int, float, float]], budget: int) -> int:
  """The step where a run's scores at ``budget`` are read: the end of its training phase
  that reached ``budget`` (the first training report at or past it), ``budget`` itself
  when no report got there yet."""
  return min((step for step, _, _ in reports if step >= budget), default=budget)


# the share of the steps up to a budget whose training episodes make its training return
TRAIN_WINDOW = 0.1


def training_reports(logdir: Path, run: bench_runs.Run,
                     lane: int | None = None) -> list[tuple[int, float, float]]:
  """``(step, episodes ended, their mean return)`` of every training report (0 episodes
  and a NaN return where none ended: the report still says how far the run got); of seed
  ``lane`` for a lanes run."""
  return _training_reports(_records(logdir, run), lane)


def seed_histories(logdir: Path, runs: list[bench_runs.Run]) -> tuple[list, list]:
  """Every seed of ``runs`` (a run of one seed once, a lanes run once per seed it trains):
  their ``evaluations`` and their ``training_reports``, each run's records read once."""
  evals, trained = [], []
  for run in runs:
    records = _records(logdir, run)
    for lane in run.lane_indices:
      evals.append(_evaluations(records, lane))
      trained.append(_training_reports(records, lane))
  return evals, trained


def train_return_at(reports: list[tuple[int, float, float]], budget: int) -> float | None:
  """The mean return of the training episodes that ended in the last ``TRAIN_WINDOW`` of
  the steps up to ``budget`` (each report weighted by its episodes); None when the run has
  not reached the budget or no episode ended in that stretch."""
  if not reports or max(step for step, _, _ in reports) < budget:
    return None
  start = budget - TRAIN_WINDOW * budget
  window = [(n, score) for step, n, score in reports if start < step <= budget and n > 0]
  if not window:
    return None
  episodes = sum(n for n, _ in window)
  return sum(n * score for n, score in window) / episodes


def wall_seconds(state: dict) -> float:
  return sum(s["seconds"] for s in state["sittings"])


# ------------------------------------------------------------------ the table


def rows(suite: Suite, logdir, seeds: int, lanes: bool = False) -> list[dict]:
  """One row per entry and budget (the suite's budgets below the entry's, then its end);
  ``lanes``: the suite was trained with each entry's seeds in one run."""
  logdir = Path(logdir)
  planned = bench_runs.plan(suite, seeds, lanes)
  out = []
  for entry in suite.entries:
    mine = [r for r in planned if r.entry == entry]
    first = mine[0]
    agent = REGISTRY.get(entry.config).agent
    evals, trained = seed_histories(logdir, mine)
    states = [bench_runs.read_state(logdir, r) for r in mine]
    walls = [wall_seconds(state) for state in states if state["finished"]]
    budgets = [b for b in suite.budgets if b < first.steps] + [first.steps]
    for budget in budgets:
      ends = [reading_step(reports, budget) for reports in trained]
      scores = [s for s in map(at_budget, evals, ends) if s is not None]
      out.append({
          "entry": entry, "config": entry.config + (f" ({entry.label})" if entry.label else ""),
          "agent": agent, "env": first.env, "budget": budget,
          "end": budget == first.steps, "seeds": len(scores), "planned": len(evals),
          "lanes": first.lanes, "final": [f for f, _ in scores],
          "best": [b for _, b in scores],
          "train": [t for t in map(train_return_at, trained, ends) if t is not None],
          "wall_s": walls if budget == first.steps else [],
          "steps_per_s": ([first.steps / w for w in walls if w > 0]
                          if budget == first.steps else []),
          "command": first.row_command(),
          "references": references(agent, first.env)})
  return out


def significant(value: float, digits: int) -> str:
  """``value`` to ``digits`` significant digits, written out in full (680, not 6.8e+02: a
  table's scores read as numbers); exponents only beyond a million or below 1e-4."""
  if value == 0 or not np.isfinite(value):
    return f"{value:g}"
  rounded = round(float(value), digits - 1 - int(np.floor(np.log10(abs(value)))))
  return f"{rounded:g}" if 1e-4 <= abs(rounded) < 1e6 else f"{rounded:.{digits - 1}e}"


def mean_std(values: list[float], missing: str = "pending") -> str:
  """The mean ± standard deviation of ``values``, the deviation to 2 significant digits and
  the mean to the same decimal place (680 ± 230, 8.4 ± 2.5, 1314 ± 31); one value alone to
  4 significant digits, and so a mean whose deviation is 0."""
  if not values:
    return missing
  mean, std = float(np.mean(values)), float(np.std(values))
  if len(values) == 1 or std == 0 or not np.isfinite(std):
    return significant(mean, 4) + ("" if len(values) == 1 else " ± 0")
  place = int(np.floor(np.log10(std))) - 1  # the decimal place of its second digit
  decimals = max(0, -place)
  mean, std = round(mean, -place) + 0.0, round(std, -place)  # + 0.0: no "-0"
  return f"{mean:.{decimals}f} ± {std:.{decimals}f}"


# Student's t at 0.95 (the half-width of a 90% two-sided interval) by degrees of freedom;
# a fractional df reads the row at or below it (a wider interval)
_T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860,
        9: 1.833, 10: 1.812, 12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697}


def ratio_interval(ours: list[float], peer: list[float]) -> tuple[float, float] | None:
  """A 90% interval of ``mean(ours) / mean(peer)`` over seeds: the log of the ratio ± t
  times its standard error (the delta method: each side's squared relative standard error,
  sample variances), t at Welch's degrees of freedom. None with fewer than three values on a
  side (two give one or two degrees of freedom: an interval spanning 0.1x to 10x, which says
  nothing) or a mean at or below 0 (the ratio of returns then reads nothing)."""
  if len(ours) < 3 or len(peer) < 3:
    return None
  means = float(np.mean(ours)), float(np.mean(peer))
  if min(means) <= 0:
    return None
  rel = [float(np.var(v, ddof=1)) / (len(v) * m * m) for v, m in ((ours, means[0]),
                                                                   (peer, means[1]))]
  if sum(rel) == 0:
    return means[0] / means[1], means[0] / means[1]
  df = sum(rel) ** 2 / sum(r * r / (len(v) - 1) for r, v in zip(rel, (ours, peer)))
  t = _T95[max([k for k in _T95 if k <= df] or [1])]
  half = t * float(np.sqrt(sum(rel)))
  ratio = means[0] / means[1]
  return ratio * float(np.exp(-half)), ratio * float(np.exp(half))


def duration(seconds: float) -> str:
  if seconds >= 3600:
    return f"{seconds / 3600:.1f} h"
  if seconds >= 60:
    return f"{seconds / 60:.1f} min"
  return f"{seconds:.0f} s"


def table(rows_: list[dict]) -> str:
  lines = ["| config | env | steps | seeds | final (mean ± std) | best (mean ± std) | "
           "train return | wall per run | steps/s | published | command |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows_:
    wall = duration(float(np.mean(r["wall_s"]))) if r["wall_s"] else ""
    rate = f"{np.mean(r['steps_per_s']):.0f}" if r["steps_per_s"] else ""
    published = "; ".join(ref.text() for ref in r["references"]) or "-"
    command = f"`{r['command']}`" if r["end"] else ""
    together = " in one run" if r["lanes"] else ""
    lines.append(f"| {r['config']} | {r['env']} | {steps_text(r['budget'])} | "
                 f"{r['seeds']}/{r['planned']}{together} | {mean_std(r['final'])} | "
                 f"{mean_std(r['best'])} | {mean_std(r['train'], '-')} | {wall} | "
                 f"{rate} | {published} | {command} |")
  return "\n".join(lines)


# ------------------------------------------------------------------ curves


def seed_curve(label: str, per_seed: list[list[tuple[int, float]]],
               phase: str = "eval") -> plot.Curve | None:
  """The scores of several seeds (``(step, score)`` each) as one curve: the mean at each
  step, and a band from the lowest to the highest seed."""
  by_step: dict[int, list[float]] = {}
  for evals in per_seed:
    for step, score in evals:
      by_step.setdefault(step, []).append(score)
  if not by_step:
    return None
  steps = sorted(by_step)
  values = [by_step[s] for s in steps]
  return plot.Curve(label, phase, np.array(steps), np.array([np.mean(v) for v in values]),
                    np.array([min(v) for v in values]), np.array([max(v) for v in values]))


def write_curves(suite: Suite, logdir, seeds: int, directory: Path,
                 lanes: bool = False) -> dict[str, Path]:
  """One PNG per entry with the greedy evaluations (seeds' mean and band), the training
  returns dashed (each report's episodes) and the published scores dotted: ``{run name
  without seed: path}``. Needs matplotlib (``batchrl[plot]``)."""
  logdir = Path(logdir)
  written = {}
  planned = bench_runs.plan(suite, seeds, lanes)
  for entry in suite.entries:
    mine = [r for r in planned if r.entry == entry]
    label = f"{entry.config} {entry.label or mine[0].env}"
    evals, reports = seed_histories(logdir, mine)
    per_seed = [e for e in evals if e]
    seeds_text = f"{len(per_seed)} seed{'s' if len(per_seed) != 1 else ''}"
    curve = seed_curve(f"{label} ({seeds_text})", per_seed)
    if curve is None:
      continue
    trained = [[(step, score) for step, n, score in seed if n > 0] for seed in reports]
    train_curve = seed_curve(curve.run, [t for t in trained if t], phase="train")
    refs = tuple((ref.text(), ref.score)
                 for ref in references(REGISTRY.get(entry.config).agent, mine[0].env))
    figure = plot.draw([curve] + ([train_curve] if train_curve else []), "return", "steps",
                       refs)
    path = directory / f"{entry.config}-{entry.label or mine[0].env}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    written[label] = path
  return written


# ------------------------------------------------------------------ the file


def write_report(suite: Suite, logdir, out, seeds: int, command: str,
                 lanes: bool = False) -> Path:
  """The report of ``suite`` as Markdown at ``out``, curves beside it in
  ``<out stem>-curves/``; returns the file written. ``lanes``: the suite was trained with
  each entry's seeds in one run (``batchrl bench --lanes``)."""
  out = Path(out)
  if out.suffix.lower() != ".md":
    raise UserInputError(f"--report writes Markdown: give a file ending in .md, got {out}.")
  rows_ = rows(suite, logdir, seeds, lanes)
  try:
    curves = write_curves(suite, logdir, seeds, out.parent / f"{out.stem}-curves", lanes)
    curve_lines = [f"![{label}]({os.path.relpath(path, out.parent)})"
                   for label, path in curves.items()]
  except UserInputError as e:  # matplotlib missing: the table without curves
    curve_lines = [f"(No curves: {e})"]
  now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
  text = "\n".join([
      f"# batchrl bench: {suite.name}", "",
      f"{suite.description}.", "",
      f"- Written {now} by `{command}`",
      f"- Machine: {machine()}",
      f"- Versions: {versions()}",
      f"- Seeds planned: {seeds}; runs in {Path(logdir).resolve()}", "",
      "Scores are greedy evaluations: final = the last one up to the end of the training "
      "phase that reached the steps shown (a run evaluates at the ends of its phases: "
      "ppo_mujoco, in phases of 20,480 steps, at 102,400 steps for 100k), best = the "
      "highest up to there, mean ± standard deviation over the seeds that got there. "
      "Train return = the mean return of the training episodes (exploring) that ended in "
      "the last tenth of those steps, the measure CleanRL publishes. Wall time is a whole "
      "run (start-up, compilation and evaluations included). Published figures are other "
      "code on other machines, with their settings named; the command trains one seed of "
      "the row (S = 0, 1, ...; with `--lanes`, all of them).", "",
      *(["Each row's seeds trained in one run (`--lanes`: `batchrl train --seeds`, their "
         "agents in one program, their environments stepped together): its command trains "
         "them all, its wall time is that run's, and steps/s each seed's steps over it.", ""]
        if lanes else []),
      table(rows_), "", *curve_lines, ""])
  return write_atomic(out, text)
