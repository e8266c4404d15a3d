"""``PreprocessedEnv``: a batched in-graph env whose observations pass through a preprocessing
stack (``batchrl.preprocessing``: the seed's ``grayscale``, ``image_resize``, ``sequence``...)
inside the compiled loop, before any agent sees them.

This is how ``batchrl train`` runs Atari (``run.preprocessing``): the host envs send raw
``uint8`` frames, and grayscale, resize to 84x84 and the 4-frame stack happen in the same
compiled program as the policy, for the whole batch at once. The stack's memory (the last
frames) is part of the env state, so it is checkpointed and vmapped like any other.

Layout: a stack ending in ``sequence`` over an image ``[H, W, C]`` gives ``[H, W, C, T]``;
the last two axes are merged to ``[H, W, C * T]`` (frames as channels, what ``conv2d``
layers take).

Score channel: when the observations are the ``Dict`` of ``batchrl.envs.atari``
(``{"frame", "score_reward", "game_over"}``), the frame is preprocessed and the other two go
to the step's ``info``, where ``batchrl.simulation`` takes the reported scores from them
(raw game score per whole game, while the agent learns from the env's reward and
``terminated``).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.envs.atari import FRAME, GAME_OVER, SCORE_REWARD
from batchrl.envs.jax_env import EnvStep
from batchrl.preprocessing import PreprocessingSpecError, Stack, build_stack

_SCORE_KEYS = (SCORE_REWARD, GAME_OVER)


def parse_spec(text: str | None) -> Any:
  """``run.preprocessing`` (JSON text) -> the spec list; a clear error for bad JSON."""
  if text is None:
    return None
  try:
    return json.loads(text)
  except json.JSONDecodeError as error:
    raise PreprocessingSpecError(f"run.preprocessing must be JSON text (a list of "
                                 f"preprocessor dicts), got {text!r}: {error}") from None


def frame_space(space: gym.Space) -> gym.Space:
  """The space preprocessing applies to: the ``frame`` of a score-channel Dict, else all."""
  if has_score_channel(space):
    return space.spaces[FRAME]
  return space


def has_score_channel(space: gym.Space) -> bool:
  return isinstance(space, gym.spaces.Dict) and set(space.spaces) == {FRAME, *_SCORE_KEYS}


def split_observation(obs, scored: bool):
  """``(frame, {"score_reward", "game_over"})`` of a score-channel observation, else
  ``(obs, {})``."""
  if scored:
    return obs[FRAME], {key: obs[key] for key in _SCORE_KEYS}
  return obs, {}


def build_env_stack(spec: Any, space: gym.Space) -> Stack:
  """The ``Stack`` for a host observation space, checked before anything runs."""
  frames = frame_space(space)
  if not isinstance(frames, gym.spaces.Box):
    raise PreprocessingSpecError(f"run.preprocessing needs Box observations (images, "
                                 f"vectors), got {frames}")
  stack = build_stack(spec, frames.shape, np.dtype(frames.dtype).name, "run.preprocessing")
  if any(pre.type == "running_standardize" for pre in stack.preprocessors):
    raise PreprocessingSpecError(
        "run.preprocessing: running_standardize learns statistics, which an env shared by "
        "training and evaluation must not do; use the agent's observation normalization")
  return stack


def merged_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
  """``[H, W, C, T] -> [H, W, C * T]`` (frames as channels); other shapes unchanged."""
  return shape[:2] + (shape[2] * shape[3],) if len(shape) == 4 else shape


def processed_space(stack: Stack) -> gym.spaces.Box:
  """The observation space an agent sees behind ``stack`` (float32, frames as channels)."""
  return gym.spaces.Box(-np.inf, np.inf, merged_shape(stack.processed_shape()), np.float32)


@dataclasses.dataclass(eq=False)
class PreprocessedEnv:
  """Wraps a batched in-graph env (``batchrl.envs.jax_env`` protocol); see the module doc.

  The state is ``(inner env state, stack state)``.
  """

  env: Any
  stack: Stack

  def __post_init__(self):
    space = self.env.single_observation_space
    self.score_channel = has_score_channel(space)
    self._space = processed_space(self.stack)

  @property
  def num_envs(self) -> int:
    return int(self.env.num_envs)

  @property
  def single_observation_space(self) -> gym.Space:
    return self._space

  @property
  def single_action_space(self) -> gym.Space:
    return self.env.single_action_space

  @property
  def max_episode_steps(self):
    return getattr(self.env, "max_episode_steps", None)

  @property
  def batch_env(self):
    """The host batch env behind an ``InGraphBatchEnv`` (closed by ``close_env``)."""
    return getattr(self.env, "batch_env", None)

  def _split(self, obs):
    return split_observation(obs, self.score_channel)

  def _output(self, y):
    y = y.astype(jnp.float32)
    return y.reshape(y.shape[:1] + self._space.shape)

  def reset(self, key):
    obs, state = self.env.reset(key)
    frames, _ = self._split(obs)
    everyone = jnp.ones((self.num_envs,), bool)
    pstate, y = self.stack.process(self.stack.init(self.num_envs), frames, everyone,
                                   update=False)
    return self._output(y), (state, pstate)

  def step(self, key, state, action) -> EnvStep:
    inner, pstate = state
    out = self.env.step(key, inner, action)
    frames, _ = self._split(out.obs)
    final_frames, score = self._split(out.final_obs)
    done = jnp.logical_or(out.terminated, out.truncated)
    new_pstate, y = self.stack.process(pstate, frames, done, update=False)
    # The finished episodes' last observation, pushed onto their old frames (not kept);
    # where nothing ended final_obs is obs, so the common step computes the stack once.
    final_y = jax.lax.cond(
        jnp.any(done),
        lambda: self.stack.process(pstate, final_frames, None, update=False)[1],
        lambda: y)
    info = dict(out.info)
    if self.score_channel:
      info[SCORE_REWARD] = score[SCORE_REWARD].astype(jnp.float32)
      info[GAME_OVER] = score[GAME_OVER] > 0.5
    return EnvStep(self._output(y), (out.state, new_pstate), out.reward, out.terminated,
                   out.truncated, self._output(final_y), info)
