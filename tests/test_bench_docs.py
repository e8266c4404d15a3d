"""The results tables of docs/benchmarks.md are what the kept records give
(``batchrl bench --write-docs``, batchrl/bench/docs.py)."""
from __future__ import annotations

import json
import math
import re
import shutil

import pytest

from batchrl.bench import docs, report
from batchrl.errors import UserInputError

ROOT = docs.ROOT


def test_the_benchmarks_page_holds_the_tables_the_records_give():
  stale = docs.stale()
  assert not stale, (f"{docs.PAGE}: the tables {', '.join(stale)} differ from what "
                     f"{docs.RECORDS} gives; run `batchrl bench --write-docs`")


def test_every_table_keeps_its_command_dates_and_machine_and_its_curves_exist():
  for name, text in docs.tables().items():
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    notes = [line for line in text.splitlines() if line.startswith("- (")]
    assert len(rows) > 1 and notes, name
    for note in notes:  # a command, a day, a machine
      assert re.search(r"`(batchrl train|python benchmarks/parity\.py) .+`", note), note
      assert re.search(r"20\d\d-\d\d-\d\d", note) and "not recorded" not in note, note
    for row in rows[1:]:
      letters = row.split(" | ")[-2].split(", ")
      assert all(f"- ({letter}) " in text for letter in letters), row
      (png,) = re.findall(r"\[png\]\(([^)]+)\)", row)
      assert (ROOT / docs.PAGE.parent / png).is_file(), f"{name}: {png} is missing"


@pytest.fixture
def clone(tmp_path):
  """A copy of the page beside the repository's records."""
  (tmp_path / docs.PAGE).parent.mkdir(parents=True)
  shutil.copy(ROOT / docs.PAGE, tmp_path / docs.PAGE)
  (tmp_path / docs.RECORDS).parent.mkdir(parents=True)
  (tmp_path / docs.RECORDS).symlink_to(ROOT / docs.RECORDS)
  return tmp_path


def test_a_table_edited_by_hand_is_named_and_written_again_from_the_records(clone):
  page = clone / docs.PAGE
  original = page.read_text()
  row = next(line for line in original.splitlines() if line.startswith("| ppo_mujoco | Hopper"))
  page.write_text(original.replace(row, row.replace(" | 3/3 | ", " | 3/3 | 9999 ± 1 | ", 1)))
  assert docs.stale(clone) == ["mujoco-1m"]
  assert docs.write(clone, curves=False) == ["mujoco-1m"]
  assert page.read_text() == original and docs.stale(clone) == []


def test_a_page_without_a_tables_markers_is_an_error_naming_it(clone):
  page = clone / docs.PAGE
  page.write_text(re.sub(r"<!-- /?bench-table parity -->\n?", "", page.read_text()))
  assert docs.stale(clone) == ["parity"]
  with pytest.raises(UserInputError, match="no markers for parity"):
    docs.write(clone, curves=False)


@pytest.mark.parametrize("values, text", [
    ([500.0, 500.0, 500.0], "500 ± 0"), ([270.9, 850.9], "560 ± 290"),
    ([5.866, 10.866], "8.4 ± 2.5"), ([1283.0, 1345.0], "1314 ± 31"),
    ([-413.2, -133.2], "-270 ± 140"), ([4671.2], "4671"), ([], "pending"),
    ([-0.2, 0.2], "0.00 ± 0.20")])
def test_mean_and_std_are_written_to_the_digits_the_spread_allows(values, text):
  assert report.mean_std(values) == text


def test_the_ratio_s_interval_widens_with_the_spread_and_fewer_seeds_and_needs_three():
  # the log ratio ± t(df) · sqrt(var1 / (n1 m1²) + var2 / (n2 m2²)), t at Welch's df
  lo, hi = report.ratio_interval([90.0, 100.0, 110.0], [100.0] * 3)  # df 2: t 2.920
  half = 2.920 * (100.0 / (3 * 100.0 ** 2)) ** 0.5
  assert (lo, hi) == pytest.approx((math.exp(-half), math.exp(half)))
  tight = report.ratio_interval([90.0, 100.0, 110.0] * 3, [100.0] * 9)
  assert lo < tight[0] < 1.0 < tight[1] < hi
  assert report.ratio_interval([5.0] * 3, [2.0] * 4) == (2.5, 2.5)
  assert report.ratio_interval([4671.0, 4000.0], [4000.0, 4100.0, 4200.0]) is None  # 2 seeds
  assert report.ratio_interval([-400.0, -300.0, -350.0], [-200.0] * 3) is None  # no ratio


def test_a_parity_row_whose_peer_has_not_run_says_pending():
  record = json.loads((ROOT / "benchmarks/records/parity/batchrl-crossq-HalfCheetah-v5-s0.json")
                      .read_text())
  row = docs._parity_row("crossq_mujoco", "HalfCheetah-v5", [record], [])
  assert "nan" not in row and row.count("pending") == 3, row  # best, final and wall


def test_runs_with_sbx_s_log_std_head_have_their_own_row_beside_sbx():
  """``parity.py --libraries batchrl-clip`` (sbx's clipped log-std head): a row of its own,
  compared with sbx's runs of the task, its seed count beside theirs where they differ."""
  records = docs._parity_results(ROOT / docs.RECORDS / "parity")
  clip, peer = records["batchrl-clip", "tqc", "HalfCheetah-v5"], records["sbx", "tqc",
                                                                        "HalfCheetah-v5"]
  seeds = str(len(clip)) if len(clip) == len(peer) else f"{len(clip)} / {len(peer)}"
  table = docs.tables()["parity"]
  row = next(line for line in table.splitlines()
             if line.startswith("| tqc_mujoco with sbx's clipped log-std head | HalfCheetah-v5"))
  assert f" | {seeds} | " in row and "pending" not in row, row
