"""``batchrl visualize`` says what it is doing while it films: which renderer (MuJoCo on a
CPU is slow), the frame reached every few seconds with the time left, each episode's end;
more episodes than the policy's batch are filmed a batch at a time."""
from __future__ import annotations

import logging
import types

import numpy as np
import pytest

from batchrl import configs, experiment, visualize


class _Clock:
  def __init__(self):
    self.now = 100.0

  def __call__(self) -> float:
    return self.now


def _messages(caplog) -> list[str]:
  return [r.getMessage() for r in caplog.records if r.name == "batchrl"]


def test_progress_lines_come_at_once_then_every_few_seconds_with_the_time_left(caplog):
  caplog.set_level(logging.INFO, logger="batchrl")
  clock = _Clock()
  progress = visualize.FrameProgress(3, 1000, every_s=10.0, clock=clock)
  progress.frame(1, 3)  # the first frame: at once, no rate yet (it compiled the policy)
  for frame in range(2, 402):
    clock.now += 0.25
    progress.frame(frame, 3)
  progress.episode_done(400, -12.5)
  assert _messages(caplog)[:2] == [
      "Filming: frame 1/1000, 3 running, 0 of 3 episodes done",
      "Filming: frame 41/1000, 3 running, 0 of 3 episodes done, 0.250 s a frame, at most "
      "4 min left"]
  assert len(_messages(caplog)) == 1 + 10 + 1  # 100 s of frames: one line per 10 s
  assert _messages(caplog)[-1] == "Filming: episode 1/3 ended after 400 frames, return -12.50"


def test_a_new_batch_of_episodes_gets_a_line_at_once_timed_from_its_start(caplog):
  caplog.set_level(logging.INFO, logger="batchrl")
  clock = _Clock()
  progress = visualize.FrameProgress(2, None, clock=clock)
  progress.frame(1, 1)
  clock.now += 30.0  # the first env closes, the next one starts its renderer
  progress.begin()
  progress.frame(1, 1)
  clock.now += 11.0
  progress.frame(12, 1)
  assert _messages(caplog) == ["Filming: frame 1, 1 running, 0 of 2 episodes done"] * 2 + [
      "Filming: frame 12, 1 running, 0 of 2 episodes done, 1.000 s a frame"]


def test_the_renderer_is_named_with_mujoco_gl_and_a_word_on_cpu_speed(monkeypatch):
  mujoco = types.SimpleNamespace(unwrapped=types.SimpleNamespace(mujoco_renderer=object()),
                                 spec=types.SimpleNamespace(id="HalfCheetah-v5"))
  monkeypatch.setenv("MUJOCO_GL", "egl")
  note = visualize.renderer_note(mujoco)
  assert note.startswith("Rendering HalfCheetah-v5 with MuJoCo offscreen (rgb_array, "
                         "MUJOCO_GL=egl).")
  assert "on a CPU" in note and "minutes" in note
  monkeypatch.delenv("MUJOCO_GL")
  assert "MUJOCO_GL unset: MuJoCo's default, glfw" in visualize.renderer_note(mujoco)
  other = types.SimpleNamespace(unwrapped=types.SimpleNamespace(),
                                spec=types.SimpleNamespace(id="CartPole-v1"))
  assert visualize.renderer_note(other) == ("Rendering CartPole-v1 with Gymnasium's "
                                            "rgb_array mode.")
  assert visualize.gl_renderer_note(other) is None


@pytest.mark.gymnax
def test_more_episodes_than_the_policy_batch_are_filmed_a_batch_at_a_time(tmp_path, caplog):
  """A policy built for 2 envs films 3 episodes as 2, then 1 (sac_mujoco's 1 env and
  --num-episodes 3 used to fail: the third env had no action)."""
  caplog.set_level(logging.INFO, logger="batchrl")
  exp = configs.apply_overrides(configs.get("cartpole_fused"), ["num_envs=2", "batch_size=256"])
  run_dir = tmp_path / "T-cartpole_fused"
  experiment.prepare_run(run_dir, exp, [])
  result = visualize.visualize(run_dir, tmp_path / "videos", num_episodes=3,
                               allow_untrained=True)
  assert [e["index"] for e in result["episodes"]] == [0, 1, 2]
  assert all(e["length"] > 0 and (tmp_path / "videos" / f"episode-{e['index']:03d}.mp4")
             .stat().st_size > 1000 for e in result["episodes"])
  messages = _messages(caplog)
  assert "Filming 3 episodes 2 at a time (the policy acts for num_envs=2 envs)." in messages
  assert [m for m in messages if m.startswith("Filming: frame 1/")] == [
      "Filming: frame 1/500, 2 running, 0 of 3 episodes done",
      "Filming: frame 1/500, 1 running, 2 of 3 episodes done"]
  assert sum(m.startswith("Filming: episode ") for m in messages) == 3
  lengths = np.array([e["length"] for e in result["episodes"]])
  assert np.isfinite(result["mean_return"]) and (lengths <= 500).all()
