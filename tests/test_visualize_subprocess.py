"""`batchrl visualize` as a user runs it: a process of its own, whose stderr is what they see."""
import json
import subprocess
import sys

import pytest

from batchrl import configs, experiment


@pytest.mark.gymnax
def test_visualize_writes_videos_without_forking_a_jax_process(tmp_path):
  """ffmpeg starts without os.fork() (JAX's warning: "os.fork() was called ... deadlock").

  Run outside pytest, whose filterwarnings would hide the warning; an untrained policy is
  enough: the warning came from starting ffmpeg, whatever the frames show.
  """
  exp = configs.apply_overrides(configs.get("cartpole_fused"), ["num_envs=8"])
  run_dir, out = tmp_path / "T-cartpole_fused", tmp_path / "videos"
  experiment.prepare_run(run_dir, exp, [])
  proc = subprocess.run(
      [sys.executable, "-m", "batchrl.cli", "visualize", str(run_dir),
       "--outdir", str(out), "--allow-untrained", "--num-episodes", "2"],
      capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr
  assert "os.fork() was called" not in proc.stderr
  assert "RuntimeWarning" not in proc.stderr, proc.stderr
  stats = json.loads((out / "episodes.json").read_text())
  for episode in stats["episodes"]:
    assert (out / f"episode-{episode['index']:03d}.mp4").stat().st_size > 1000
