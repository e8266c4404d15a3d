"""The results tables of ``docs/benchmarks.md``, written from the records kept in
``benchmarks/records/`` (``batchrl bench --write-docs``), so the page never says what the
records do not.

Each table sits in the page between two marker comments::

    <!-- bench-table mujoco-1m -->
    ...written here...
    <!-- /bench-table mujoco-1m -->

``write`` rewrites what is between them (and the curves the tables link to); ``stale``
names the tables whose text differs from what the records give, which a test checks. A
table is one row per agent and task at the suite's budget: the greedy evaluations' mean ±
standard deviation over the seeds, the published results with their sources, the wall time,
and a letter pointing to a line under the table with the row's command, dates and machine.

Runs recorded before ``batchrl bench`` stored the machine with each sitting (and
``benchmarks/parity.py`` results without a date) take it from the folder's ``about.json``:
``{"machine": TEXT, "runs": {RUN NAME: TEXT}, "date": YYYY-MM-DD}``, each key optional.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import re
from pathlib import Path

from batchrl import configs, plot
from batchrl.bench import report
from batchrl.bench import runs as bench_runs
from batchrl.bench.suites import references, steps_text, suite
from batchrl.errors import UserInputError
from batchrl.files import write_atomic

ROOT = Path(__file__).resolve().parents[2]
PAGE = Path("docs") / "benchmarks.md"
CURVES = Path("docs") / "benchmarks-curves"  # beside the page, in git
RECORDS = Path("benchmarks") / "records"
MARKER = re.compile(r"<!-- bench-table (?P<name>[\w.-]+) -->\n(?P<body>.*?)"
                    r"<!-- /bench-table (?P=name) -->", re.S)


@dataclasses.dataclass(frozen=True)
class SuiteTable:
  """A ``batchrl bench`` suite's table from its kept records, at each entry's budget."""

  name: str  # the marker's name and the folder under benchmarks/records
  suite: str
  seeds: int


@dataclasses.dataclass(frozen=True)
class ParityTable:
  """``benchmarks/parity.py``'s runs: ours beside sbx's, same values, budget and seeds."""

  name: str


TABLES = (SuiteTable("mujoco-1m", "mujoco-1m", 3), SuiteTable("mujoco-300k", "mujoco-300k", 3),
          ParityTable("parity"))


# ------------------------------------------------------------------ where and when


def _about(records: Path) -> dict:
  path = records / "about.json"
  return json.loads(path.read_text()) if path.is_file() else {}


def _machine(sittings: list[dict], about: dict, run: str) -> str:
  stored = [s["machine"] for s in sittings if s.get("machine")]
  return stored[-1] if stored else about.get("runs", {}).get(run, about.get("machine",
                                                                            "not recorded"))


def _day(seconds: float) -> str:
  return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d")


def _dates(sittings: list[dict]) -> str:
  """The first sitting's day, to the last one's end."""
  first = _day(sittings[0]["start"])
  last = _day(sittings[-1]["start"] + sittings[-1]["seconds"])
  return first if first == last else f"{first} to {last}"


def _seeds_text(seeds: list[int]) -> str:
  return ", ".join(map(str, seeds))


class _Notes:
  """The lines under a table: one per (command, dates, machine), a letter each."""

  def __init__(self):
    self.lines: list[str] = []

  def letter(self, line: str) -> str:
    if line not in self.lines:
      self.lines.append(line)
    return "abcdefghijklmnopqrstuvwxyz"[self.lines.index(line)]

  def text(self) -> list[str]:
    return [f"- ({'abcdefghijklmnopqrstuvwxyz'[i]}) {line}" for i, line in
            enumerate(self.lines)]


# ------------------------------------------------------------------ a bench suite


def suite_table(spec: SuiteTable, root: Path, curves: bool = False) -> str:
  """The table of ``spec``'s records; ``curves``: also draw the PNGs it links to."""
  records = root / RECORDS / spec.name
  found = suite(spec.suite)
  if curves:
    report.write_curves(found, records, spec.seeds, root / CURVES / spec.name)
  planned = bench_runs.plan(found, spec.seeds)
  notes, missing = _Notes(), []
  lines = ["| agent | task | steps | seeds | final (mean ± std) | best (mean ± std) | "
           "train return | published | wall per run | steps/s | ran | curve |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for row in report.rows(found, records, spec.seeds):
    if not row["end"]:  # the summary: each entry at its own budget
      continue
    states = [(r, bench_runs.read_state(records, r)) for r in planned
              if r.entry == row["entry"]]
    done = [(r, state) for r, state in states if state["finished"]]
    if not done:
      missing.append((row["config"], row["env"]))
      continue
    letters = _ran(done, row["env"], _about(records), notes)
    entry = row["entry"]
    png = root / CURVES / spec.name / f"{entry.config}-{entry.label or row['env']}.png"
    lines.append(" | ".join([
        f"| {row['config']}", row["env"], steps_text(row["budget"]),
        f"{row['seeds']}/{row['planned']}", report.mean_std(row["final"]),
        report.mean_std(row["best"]), report.mean_std(row["train"], "-"),
        "; ".join(ref.text() for ref in row["references"]) or "-",
        report.duration(_mean(row["wall_s"])) if row["wall_s"] else "",
        f"{_mean(row['steps_per_s']):.0f}" if row["steps_per_s"] else "", letters,
        f"{_link(png, root)} |"]))
  out = lines + ["", *notes.text()]
  if missing:
    out += ["", f"Not in the records yet: {_grouped(missing)}."]
  return "\n".join(out) + "\n"


def _ran(done: list, env: str, about: dict, notes: _Notes) -> str:
  """The letters of the notes saying how a row's finished runs ran: its command, and per
  day and machine the seeds run so."""
  command = done[0][0].row_command().replace(f"env={env}", "env=ENV")
  seeds: dict[tuple[str, str], list[int]] = {}
  for run, state in done:
    where = (_dates(state["sittings"]), _machine(state["sittings"], about, run.name))
    seeds.setdefault(where, []).append(run.seed)
  return ", ".join(sorted({notes.letter(f"`{command}`, S = {_seeds_text(these)}, ENV the "
                                        f"row's task; {dates}; {machine}")
                           for (dates, machine), these in seeds.items()}))


def _link(png: Path, root: Path) -> str:
  return f"[png]({png.relative_to(root / PAGE.parent).as_posix()})"


def _grouped(missing: list[tuple[str, str]]) -> str:
  """``sac_mujoco on HalfCheetah-v5, Hopper-v5; ppo_mujoco on Ant-v5``."""
  by_config: dict[str, list[str]] = {}
  for config, env in missing:
    by_config.setdefault(config, []).append(env)
  return "; ".join(f"`{config}` on {', '.join(envs)}" for config, envs in by_config.items())


# ------------------------------------------------------------------ parity with sbx

# (library as the result files name it, its label: {algo} is the agent, 'sac' to 'crossq')
_LIBRARIES = (("batchrl", "{algo}_mujoco"), ("sbx", "sbx {algo}"),
              ("batchrl-sbx", "{algo}_mujoco with sbx's two TD3 choices"),
              ("batchrl-clip", "{algo}_mujoco with sbx's clipped log-std head"),
              ("sbx-tanh", "sbx {algo} with batchrl's tanh log-std head"))
_TASKS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5")  # the order of the rows


def _parity_results(records: Path) -> dict[tuple[str, str, str], list[dict]]:
  """``{(library, algo, env): results in seed order}``."""
  found: dict[tuple[str, str, str], list[dict]] = {}
  for path in sorted(records.glob("*.json")):
    result = json.loads(path.read_text())
    if "library" not in result:  # about.json
      continue
    library = path.name.split(f"-{result['algo']}-")[0]  # batchrl-sbx keeps its variant
    found.setdefault((library, result["algo"], result["env"]), []).append(result)
  return {k: sorted(v, key=lambda r: r["seed"]) for k, v in found.items()}


def learned_best(result: dict) -> float:
  """The best evaluation after the first gradient step (before it both libraries evaluate
  an untrained network, which on Ant-v5 scores ~840 standing still)."""
  start = configs.get(f"{result['algo']}_mujoco").config.first_update
  learned = [score for step, score in result["evals"] if step > start]
  return max(learned) if learned else result["best_return"]


def _wall(result: dict) -> float:
  """A run's time over all its sittings: ours from its reports (``run_s``; records made
  before it was kept: the last sitting), the peer's training and evaluation (its last
  process, where those were not kept)."""
  if "run_s" in result or "sitting_s" in result:
    return result.get("run_s") or result["sitting_s"]
  if "train_s" in result:
    return result["train_s"] + result.get("eval_s", 0.0)
  return result.get("process_s") or 0.0


def parity_table(spec: ParityTable, root: Path, curves: bool = False) -> str:
  """One row per agent and task: our runs' best evaluations beside sbx's on the same seeds
  (``curves``: also draw the PNGs it links to, one per task with every library)."""
  records = root / RECORDS / spec.name
  results = _parity_results(records)
  notes = _Notes()
  lines = ["| agent | task | steps | seeds | batchrl best (mean ± std) | sbx best "
           "(mean ± std) | batchrl / sbx (90% interval) | final, batchrl / sbx | wall per "
           "run, batchrl / sbx | ran | curve |", "|---|---|---|---|---|---|---|---|---|---|---|"]
  tasks = sorted({(algo, env) for _, algo, env in results},
                 key=lambda t: (t[0], _TASKS.index(t[1]) if t[1] in _TASKS else 99, t[1]))
  for algo, env in tasks:
    png = root / CURVES / spec.name / f"{algo}-{env}.png"
    if curves:
      _draw_parity(results, algo, env, png)
    letter = notes.letter(_parity_note(results, algo, env, _about(records)))
    peer = results.get(("sbx", algo, env), [])
    for library, label in _LIBRARIES:
      if library != "sbx" and (library, algo, env) in results:
        lines.append(_parity_row(label.format(algo=algo), env, results[library, algo, env],
                                 peer) + f" | {letter} | {_link(png, root)} |")
  return "\n".join(lines + ["", *notes.text()]) + "\n"


def _parity_note(results: dict, algo: str, env: str, about: dict) -> str:
  """The command that trains (or resumes) a task's runs, their days and machines."""
  libraries = [lib for lib, _ in _LIBRARIES if (lib, algo, env) in results]
  ran = [r for lib in libraries for r in results[lib, algo, env]]
  seeds = sorted({r["seed"] for r in ran})
  dates = sorted({r.get("date", about.get("date", "date not recorded")) for r in ran})
  machines = sorted({r.get("machine", about.get("machine", "not recorded")) for r in ran})
  return (f"`python benchmarks/parity.py --algos {algo} --envs {env} --seeds "
          f"{' '.join(map(str, seeds))} --libraries {' '.join(libraries)}`; "
          f"{', '.join(dates)}; {'; '.join(machines)}")


def _parity_row(label: str, env: str, ours: list[dict], peer: list[dict]) -> str:
  best, peer_best = [learned_best(r) for r in ours], [learned_best(r) for r in peer]
  ratio = f"{_mean(best) / _mean(peer_best):.2f}x" if peer_best else "-"
  interval = report.ratio_interval(best, peer_best)
  ratio += f" ({interval[0]:.2f}-{interval[1]:.2f})" if interval else ""
  # a side with no finished run yet (the peer's still to run) reads "pending"
  finals = [report.significant(_mean([r["final_return"] for r in runs]), 3) if runs
            else "pending" for runs in (ours, peer)]
  walls = [report.duration(_mean([_wall(r) for r in runs])) if runs else "pending"
           for runs in (ours, peer)]
  seeds = str(len(ours)) if len(ours) == len(peer) else f"{len(ours)} / {len(peer)}"
  return " | ".join([f"| {label}", env, steps_text(ours[0]["steps"]), seeds,
                     report.mean_std(best), report.mean_std(peer_best), ratio,
                     " / ".join(finals), " / ".join(walls)])


def _mean(values: list[float]) -> float:
  return sum(values) / len(values) if values else float("nan")


def _draw_parity(results: dict, algo: str, env: str, path: Path) -> None:
  drawn = []
  for lib, label in _LIBRARIES:
    runs = results.get((lib, algo, env), [])
    curve = report.seed_curve(f"{label.format(algo=algo)} ({len(runs)} seeds)",
                              [r["evals"] for r in runs])
    if curve is not None:
      drawn.append(curve)
  refs = tuple((ref.text(), ref.score) for ref in references(algo, env))
  figure = plot.draw(drawn, "return", "steps", refs)
  path.parent.mkdir(parents=True, exist_ok=True)
  figure.savefig(path, dpi=110, bbox_inches="tight")


# ------------------------------------------------------------------ the page


def tables(root: Path = ROOT, curves: bool = False) -> dict[str, str]:
  """``{table name: its text}`` from the records under ``root``."""
  if not (root / RECORDS).is_dir():
    raise UserInputError(f"no {RECORDS} under {root}: --write-docs runs in a clone of "
                         "batchrl's repository")
  out = {}
  for spec in TABLES:
    write = suite_table if isinstance(spec, SuiteTable) else parity_table
    out[spec.name] = write(spec, root, curves)
  return out


def stale(root: Path = ROOT) -> list[str]:
  """The tables whose text in the page differs from what the records give (or that the
  page lacks)."""
  text = (root / PAGE).read_text()
  held = {m["name"]: m["body"] for m in MARKER.finditer(text)}
  return [name for name, body in tables(root).items() if held.get(name) != body]


def write(root: Path = ROOT, curves: bool = True) -> list[str]:
  """Rewrites every table of the page (and with ``curves`` the images they link to);
  returns the tables that changed."""
  page = root / PAGE
  text = page.read_text()
  written = tables(root, curves)
  missing = [name for name in written if f"<!-- bench-table {name} -->" not in text]
  if missing:
    raise UserInputError(f"{PAGE} has no markers for {', '.join(missing)}: add "
                         f"'<!-- bench-table NAME -->' and '<!-- /bench-table NAME -->' lines")
  changed = [m["name"] for m in MARKER.finditer(text) if written.get(m["name"]) != m["body"]]
  text = MARKER.sub(lambda m: (f"<!-- bench-table {m['name']} -->\n"
                               f"{written.get(m['name'], m['body'])}"
                               f"<!-- /bench-table {m['name']} -->"), text)
  write_atomic(page, text)
  return changed
