"""`batchrl visualize` as a user runs it: a process of its own, whose stderr is what they see."""
import json
import subprocess
import sys

import pytest

from batchrl import configs, experiment


@pytest.fixture(scope="module")
def visualized(tmp_path_factory):
  """``batchrl visualize`` of an untrained CartPole run, 2 episodes: (stderr, outdir).

  Run outside pytest, whose filterwarnings would hide warnings; an untrained policy is
  enough: what is checked is how it films, whatever the frames show.
  """
  tmp_path = tmp_path_factory.mktemp("visualize")
  exp = configs.apply_overrides(configs.get("cartpole_fused"), ["num_envs=8"])
  run_dir, out = tmp_path / "T-cartpole_fused", tmp_path / "videos"
  experiment.prepare_run(run_dir, exp, [])
  proc = subprocess.run(
      [sys.executable, "-m", "batchrl.cli", "visualize", str(run_dir),
       "--outdir", str(out), "--allow-untrained", "--num-episodes", "2"],
      capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr
  return proc.stderr, out


@pytest.mark.gymnax
def test_visualize_writes_videos_without_forking_a_jax_process(visualized):
  """ffmpeg starts without os.fork() (JAX's warning: "os.fork() was called ... deadlock")."""
  stderr, out = visualized
  assert "os.fork() was called" not in stderr
  assert "RuntimeWarning" not in stderr, stderr
  stats = json.loads((out / "episodes.json").read_text())
  for episode in stats["episodes"]:
    assert (out / f"episode-{episode['index']:03d}.mp4").stat().st_size > 1000


@pytest.mark.gymnax
def test_visualize_says_what_renders_and_how_far_it_is(visualized):
  """A slow renderer (MuJoCo on a CPU) is not silence for minutes: the renderer is named
  first, then the first frame, each episode's end and each video as it is written."""
  stderr, out = visualized
  lines = [line.split(" batchrl: ", 1)[-1] for line in stderr.splitlines()]
  expected = ["Rendering CartPole-v1 with Gymnasium's rgb_array mode.",
              "Filming: frame 1/500, 2 running, 0 of 2 episodes done",
              "Filming: episode 1/2 ended after ", "Filming: episode 2/2 ended after ",
              f"Writing {out / 'episode-000.mp4'} (", f"Writing {out / 'episode-001.mp4'} ("]
  found = [next((i for i, line in enumerate(lines) if line.startswith(text)), None)
           for text in expected]
  assert None not in found and found == sorted(found), stderr
