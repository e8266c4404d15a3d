"""What the README shows a new user works on the base install, and the repository ignores
what its examples write."""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
MUJOCO_IDS = re.compile(r"\b(HalfCheetah|Hopper|Walker2d|Ant|Humanoid|Reacher|Swimmer)"
                        r"(Standup)?-v\d")


def _python_block_after(heading: str) -> str:
  start = README.index(heading)
  body = README.index("```python\n", start) + len("```python\n")
  return README[body:README.index("```", body)]


def test_the_environment_layer_snippet_runs_on_the_base_install(tmp_path):
  code = _python_block_after("## The environment layer")
  assert not MUJOCO_IDS.search(code), "the first environment snippet needs batchrl[mujoco]"
  script = tmp_path / "snippet.py"  # a file: its worker processes import it again
  script.write_text(code)
  done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                        cwd=tmp_path, timeout=300)
  assert done.returncode == 0, done.stderr


def test_the_readme_says_which_extra_a_snippet_needs():
  section = README[README.index("## The environment layer"):]
  note = section[:section.index("```python")]
  for extra in ("mujoco", "plot", "ray", "tune", "export"):
    assert f"batchrl[{extra}]" in note


def test_what_examples_write_is_ignored():
  ignored = (ROOT / ".gitignore").read_text().split()
  assert "saved/" in ignored and "runs/" in ignored
