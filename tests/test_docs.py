"""Every fenced code block of README.md and docs/*.md does what the page says.

- ``python`` blocks compile, and (marked slow) run, each in a fresh process whose working directory
  is an empty temporary folder holding a link to ``examples/`` (as a clone would have it); a block
  that uses an optional extra which is not installed is skipped, naming the extra.
- ``bash`` blocks are read command by command. ``batchrl`` commands are parsed by the CLI's
  own parser and checked without training: the named config exists, every ``--set`` and
  ``--search`` is a valid key with a valid value, the environment can be built. The cheap
  ones (``batchrl configs``, ``--help``) run for real. ``pip install`` lines must name
  extras that exist; scripts and test files must exist and take the flags given.
- ``json`` blocks parse, ``diff`` blocks show lines that are in the file they name.
- The site builds with ``mkdocs build --strict`` (any warning fails it).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from batchrl import programs

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEST_COMMAND = 'pip install -e ".[test]" && python -m pytest -q -n 2'  # .ci/run runs it
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
             ["optional-dependencies"])
MUJOCO_IDS = r"\b(HalfCheetah|Hopper|Walker2d|Ant|Humanoid|Reacher|Swimmer|Inverted\w*)-v\d"

# What a python block uses -> the module it needs and the extra that brings it.
NEEDS = (
    (r"make_vec\(|GymnaxEnv|_fused\b|gymnax", "gymnax", "gymnax"),
    (r"onnxruntime|\.export\(", "onnxruntime", "export"),
    (MUJOCO_IDS, "mujoco", "mujoco"),
    (r"ALE/|NoFrameskip", "ale_py", "atari"),
    (r"import ray|batchrl\.distributed", "ray", "ray"),
    (r"batchrl\.tune|import optuna", "optuna", "tune"),
    (r"matplotlib|batchrl\.plot", "matplotlib", "plot"),
    (r"envpool", "envpool", "envpool"),
)


@dataclasses.dataclass(frozen=True)
class Block:
  page: Path
  line: int
  lang: str
  code: str

  def __str__(self) -> str:
    return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
  text = page.read_text()
  return [Block(page, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2))
          for m in FENCE.finditer(text)]


ALL = [b for page in PAGES for b in blocks(page)]


def of(*langs: str) -> list:
  return [pytest.param(b, id=str(b)) for b in ALL if b.lang in langs]


def missing_extra(code: str) -> str | None:
  """Why this code cannot run here: the first extra it needs that is not installed."""
  for pattern, module, extra in NEEDS:
    if re.search(pattern, code) and importlib.util.find_spec(module) is None:
      return f"needs batchrl[{extra}] ({module} is not installed)"
  return None


def test_every_block_has_a_language_this_file_checks():
  unchecked = [f"{b} ({b.lang or 'no language'})" for b in ALL
               if b.lang not in ("python", "bash", "json", "diff")]
  assert not unchecked, f"blocks nothing checks: {unchecked}"
  for page in PAGES:  # a fence this file does not see (indented, say) would go unchecked
    assert page.read_text().count("```") == 2 * len(blocks(page)), f"{page}: odd fences"


# ------------------------------------------------------------------------------ python


@pytest.mark.parametrize("block", of("python"))
def test_python_block_compiles(block: Block):
  compile(block.code, str(block), "exec")


@pytest.mark.slow  # each block trains or steps environments: seconds to a minute
@pytest.mark.parametrize("block", of("python"))
def test_python_block_runs(block: Block, tmp_path):
  reason = missing_extra(block.code)
  if reason:
    pytest.skip(reason)
  (tmp_path / "examples").symlink_to(ROOT / "examples")
  script = tmp_path / "snippet.py"  # a file: worker processes started by spawn import it
  script.write_text(block.code)
  # Compiled without XLA's LLVM optimization, as the tests not marked slow (conftest): a
  # block proves the page's code runs as written; the optimized programs' numerics are the
  # learning tests' to prove. Measured cold, the 25 blocks: 121 -> 96 s of CPU.
  env = {programs.FAST_COMPILE_ENV: "all", **os.environ}
  done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                        cwd=tmp_path, timeout=300, env=env)
  assert done.returncode == 0, f"{block} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


# -------------------------------------------------------------------------------- shell


def commands(code: str) -> list[list[str]]:
  """The commands of a shell block: continuation lines joined, comments dropped, split
  at ``&&``, ``;`` and ``|``, leading ``VAR=value`` assignments removed."""
  found = []
  for line in code.replace("\\\n", " ").splitlines():
    words = shlex.split(line, comments=True)
    command: list[str] = []
    for word in words + ["&&"]:
      if word in ("&&", ";", "|", "||"):
        while command and re.fullmatch(r"[A-Z_]+=.*", command[0]):
          command.pop(0)
        if command:
          found.append(command)
        command = []
      else:
        command.append(word)
  return found


def check_pip(argv: list[str]) -> str | None:
  assert argv[1] == "install", f"unexpected pip command {argv}"
  for word in argv[2:]:
    if word.startswith("-"):
      continue
    match = re.fullmatch(r"(?:\.|batchrl)(?:\[([\w,-]+)\])?", word)
    if match is None:  # another package (jax[cuda12] ...): nothing of ours to check
      continue
    for extra in (match.group(1) or "").split(","):
      assert not extra or extra in EXTRAS, f"{word}: no extra {extra!r} in pyproject.toml"
  return "not run: installs packages"


def check_python(argv: list[str]) -> str | None:
  if argv[1:3] == ["-m", "pytest"]:
    paths = [w for w in argv[3:] if not w.startswith("-") and w.startswith("tests")]
    for path in paths:
      assert (ROOT / path.split("::")[0]).exists(), f"no test file {path}"
    return "not run: a test run"
  if argv[1] == "-c":
    done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return None
  script = ROOT / argv[1]
  assert script.is_file(), f"no script {argv[1]}"
  text = script.read_text()
  for flag in (w.split("=")[0] for w in argv[2:] if w.startswith("--")):
    assert f'"{flag}"' in text, f"{argv[1]} takes no {flag}"
  return f"not run: {argv[1]} (a benchmark)"


def check_ruff(argv: list[str]) -> str | None:
  """``ruff check .``: the tree is clean (where ruff, of the test extra, is installed)."""
  assert argv[1:] == ["check", "."], f"unexpected ruff command {argv}"
  if importlib.util.find_spec("ruff") is None:
    return "not run: ruff is not installed (the test extra brings it)"
  done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], capture_output=True,
                        text=True, cwd=ROOT)
  assert done.returncode == 0, done.stdout + done.stderr
  return None


def check_batchrl(argv: list[str]) -> str | None:
  from batchrl import cli
  if "--help" in argv or "-h" in argv or argv[1] == "configs":
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      try:
        code = cli.main(argv[1:])
      except SystemExit as e:
        code = e.code
    assert code == 0 and out.getvalue(), f"{shlex.join(argv)} failed"
    return None
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    try:
      args = cli._parser().parse_args(argv[1:])
    except SystemExit:
      pytest.fail(f"{shlex.join(argv)}: {err.getvalue()}")
  check = {"train": check_train, "tune": check_tune, "run": check_run}.get(args.command)
  return check(args) if check else f"not run: {args.command} of a run that does not exist"


def experiment(config: str):
  """The config a command names, or None for a file a previous command writes."""
  from batchrl import configs
  if config.endswith((".yaml", ".yml")):
    assert config.startswith("runs/"), f"{config}: a config file outside runs/"
    return None
  return configs.load(config)


def check_train(args) -> str | None:
  from batchrl import configs
  from batchrl.errors import UserInputError
  from batchrl.train import build, local
  exp = experiment(args.config)
  if exp is None:
    return "config file written by an earlier command"
  seed = [f"run.seed={args.seed}"] if args.seed is not None else []
  exp = configs.apply_overrides(exp, list(args.overrides) + seed)
  local.check_seeds(exp, args.seeds)
  try:
    build.check_env(exp.run, exp)
  except UserInputError as e:  # acceptable only where that extra is really missing
    extra = re.search(r"batchrl\[([\w-]+)\]", str(e))
    module = {m_extra: module for _, module, m_extra in NEEDS}.get(extra and extra.group(1))
    if module is None or importlib.util.find_spec(module) is not None:
      raise
    return f"environment not built: {e}"
  return None


def check_tune(args) -> str | None:
  from batchrl import configs
  from batchrl.tune import space
  exp = experiment(args.config)
  params = space.parse_space(args.search)
  space.check_space(exp, params, list(args.overrides), seed=args.seed)
  configs.apply_overrides(exp, list(args.overrides))
  return None


def check_run(args) -> str | None:
  import gymnasium as gym
  for path in (args.agent, args.network):
    if path and path.endswith(".json"):
      json.loads((ROOT / path).read_text())
  gym.spec(args.env_id)
  return None


UNRUN = {  # commands checked by hand, and why they do not run here
    "tensorboard": "starts a web server",
    "ray": "starts a Ray cluster",
    "export": "sets a secret for a Ray cluster",
    "optuna-dashboard": "starts a web server",
}


@pytest.mark.parametrize("block", of("bash"))
def test_shell_block_is_valid(block: Block):
  notes = []
  for argv in commands(block.code):
    if argv[0] in UNRUN:
      assert argv[0] != "tensorboard" or shutil.which("tensorboard"), "tensorboard missing"
      notes.append(f"{argv[0]}: {UNRUN[argv[0]]}")
      continue
    check = {"pip": check_pip, "python": check_python, "batchrl": check_batchrl,
             "ruff": check_ruff}.get(argv[0])
    assert check, f"{block}: no rule checks {shlex.join(argv)}; add one to tests/test_docs.py"
    note = check(argv)
    if note:
      notes.append(f"{shlex.join(argv[:3])}: {note}")
  if notes and len(notes) == len(commands(block.code)):
    pytest.skip("; ".join(notes))


def test_the_readme_holds_the_test_command_ci_runs():
  readme = (ROOT / "README.md").read_text()
  assert f"```bash\n{TEST_COMMAND}\n```" in readme
  assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text()


# ------------------------------------------------------------------------- other blocks


@pytest.mark.parametrize("block", of("json"))
def test_json_block_parses(block: Block):
  json.loads(block.code)


@pytest.mark.parametrize("block", of("diff"))
def test_diff_block_shows_the_file(block: Block):
  """The diff's result (context and added lines) is a run of lines in the file it names."""
  lines = block.code.splitlines()
  target = next(line[len("+++ b/"):] for line in lines if line.startswith("+++ b/"))
  after = [line[1:] for line in lines
           if line[:1] in (" ", "+") and not line.startswith("+++")]
  text = (ROOT / target).read_text()
  assert "\n".join(after) in text, f"{block}: these lines are not in {target}"


# ------------------------------------------------------------------------- pages, site


def test_readme_links_point_at_files():
  readme = (ROOT / "README.md").read_text()
  for link in re.findall(r"\]\(([^)#]+)", readme):
    if not link.startswith(("http://", "https://")):
      assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_the_agent_table_lists_every_family_with_its_agents_and_named_configs():
  """docs/choosing-an-agent.md's table is written by hand: one row per family, naming each of
  its ``Agent.create`` names and each of its named configs; a family, name or config it misses
  is named here."""
  from batchrl import configs
  from batchrl.agents import families
  page = (ROOT / "docs" / "choosing-an-agent.md").read_text()
  rows = [r.split("|")[1:-1] for r in page.splitlines()
          if r.startswith("| `") and r.count("|") > 3]
  listed = {}
  for row in rows:
    agents = re.findall(r"`(\w+)`", row[0])
    listed[families.family_of_type(agents[0]).name] = (agents, re.findall(r"`(\w+)`", row[-1]))
  missing = [f.name for f in families.FAMILIES if f.name not in listed]
  assert not missing, f"docs/choosing-an-agent.md has no row for the families {missing}"
  named: dict[str, list[str]] = {}
  for name in configs.names():
    named.setdefault(configs.get(name).agent, []).append(name)
  for family in families.FAMILIES:
    agents, names = listed[family.name]
    offered = [t.name for t in family.api_types]
    assert sorted(agents) == sorted(offered), (
        f"docs/choosing-an-agent.md: the {family.name} row names the agents {agents}, the "
        f"family offers {offered}")
    has = named.get(family.name, [])
    assert sorted(names) == sorted(has), (
        f"docs/choosing-an-agent.md: the {family.name} row lacks the named configs "
        f"{[n for n in has if n not in names]} and lists {[n for n in names if n not in has]}, "
        "which are not its family's")


def test_what_examples_write_is_ignored():
  ignored = (ROOT / ".gitignore").read_text().split()
  assert "saved/" in ignored and "runs/" in ignored


def test_the_site_builds_strictly(tmp_path):
  try:
    import mkdocs  # noqa: F401  (only whether it is installed)
    import mkdocstrings  # noqa: F401  (only whether it is installed)
  except ImportError:
    pytest.skip('mkdocs is not installed (pip install -e ".[docs]")')
  done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                         str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT,
                        timeout=300, env={**os.environ, "NO_COLOR": "1"})
  assert done.returncode == 0, done.stderr
  assert "WARNING" not in done.stderr, done.stderr
