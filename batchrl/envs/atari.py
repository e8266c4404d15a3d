"""The standard Atari wrappers (Mnih et al. 2015; as SB3 and CleanRL apply them), written as
small Gymnasium wrappers of our own, and ``atari_env``, the stack ``batchrl train`` uses.

Why our own and not ``gymnasium.wrappers.AtariPreprocessing``: that one also grayscales and
resizes on the host (here the seed's ``grayscale`` / ``image_resize`` / ``sequence``
preprocessors do that inside the compiled loop, ``batchrl.envs.preprocessed``), has no
episodic life nor reward clipping, and cannot keep the raw game score next to the signal
the agent learns from. The split kept here:

* the **agent** learns from clipped rewards (``sign(r)``) and sees a life loss as the end of
  an episode (``terminated``), the usual training signal;
* the **reported scores** (training episodes and evaluations) are the raw game score of a
  whole game: ``ScoreObservation`` carries each step's unclipped reward and whether the
  game really ended next to the frame (a ``Dict`` observation ``{"frame", "score_reward",
  "game_over"}``), and ``PreprocessedEnv`` moves them into the step's info, where
  ``batchrl.simulation`` counts scores from them.

``atari_env(id)`` builds, innermost first::

    ALE env (frameskip=1) -> NoopReset(30) -> MaxAndSkip(4) -> TimeLimit(max_length)
      -> ScoreObservation -> EpisodicLife -> FireReset (games with FIRE) -> ClipReward

Each wrapper reads only ``reset`` / ``step`` / ``info["lives"]`` (and the action meanings
for ``FireReset``), so the tests drive them with a hand-made frame env.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from batchrl.envs import ale
from batchrl.envs.core import make_gym
from batchrl.errors import UserInputError

FRAME, SCORE_REWARD, GAME_OVER = "frame", "score_reward", "game_over"
NOOP, FIRE = 0, 1


class NoopReset(gym.Wrapper):
  """After each reset, a random number (1..``noop_max``) of no-op actions, so episodes start
  from varied states (the env's ``np_random`` draws it: reproducible under a seed).
  ``last_noops`` says how many the latest reset took."""

  def __init__(self, env: gym.Env, noop_max: int = 30):
    super().__init__(env)
    if noop_max < 0:
      raise ValueError(f"noop_max must be >= 0, got {noop_max}")
    self.noop_max = noop_max
    self.last_noops = 0

  def reset(self, **kwargs):
    obs, info = self.env.reset(**kwargs)
    self.last_noops = int(self.env.unwrapped.np_random.integers(1, self.noop_max + 1)) \
        if self.noop_max else 0
    for _ in range(self.last_noops):
      obs, _, terminated, truncated, info = self.env.step(NOOP)
      if terminated or truncated:  # a game over during no-ops: start again, no more no-ops
        obs, info = self.env.reset()
    return obs, info


class MaxAndSkip(gym.Wrapper):
  """Repeats each action ``skip`` times, sums the rewards, and returns the element-wise max
  of the last two frames (Atari sprites flicker: some are drawn on odd frames only).
  Stops early when the episode ends (then the max of the last two frames it saw)."""

  def __init__(self, env: gym.Env, skip: int = 4):
    super().__init__(env)
    if skip < 1:
      raise ValueError(f"skip must be >= 1, got {skip}")
    self.skip = skip

  def step(self, action):
    total, frames = 0.0, []
    for _ in range(self.skip):
      obs, reward, terminated, truncated, info = self.env.step(action)
      total += float(reward)
      frames = frames[-1:] + [obs]
      if terminated or truncated:
        break
    frame = frames[0] if len(frames) == 1 else np.maximum(frames[0], frames[1])
    return frame, total, terminated, truncated, info


class ScoreObservation(gym.Wrapper):
  """The frame plus this step's raw (unclipped) reward and whether the game really ended,
  as a ``Dict`` observation: the side channel that keeps reported scores raw while the
  wrappers outside it clip rewards and end episodes at each lost life."""

  def __init__(self, env: gym.Env):
    super().__init__(env)
    self.observation_space = gym.spaces.Dict({
        FRAME: env.observation_space,
        SCORE_REWARD: gym.spaces.Box(-np.inf, np.inf, (), np.float32),
        GAME_OVER: gym.spaces.Box(0.0, 1.0, (), np.float32)})

  def reset(self, **kwargs):
    obs, info = self.env.reset(**kwargs)
    return self._observation(obs, 0.0, False), info

  def step(self, action):
    obs, reward, terminated, truncated, info = self.env.step(action)
    return (self._observation(obs, reward, terminated or truncated), reward, terminated,
            truncated, info)

  @staticmethod
  def _observation(frame, reward, game_over) -> dict:
    return {FRAME: frame, SCORE_REWARD: np.float32(reward), GAME_OVER: np.float32(game_over)}


class EpisodicLife(gym.Wrapper):
  """A lost life ends the episode for the agent (``terminated``) but not the game: the next
  ``reset()`` without a seed continues the game with one no-op step. A real reset happens
  after a game over, or when ``reset`` gets a seed or options (a forced restart, e.g. before
  an evaluation). Needs ``info["lives"]`` (ALE envs give it)."""

  def __init__(self, env: gym.Env):
    super().__init__(env)
    self.lives = 0
    self.game_over = True

  def step(self, action):
    obs, reward, terminated, truncated, info = self.env.step(action)
    self.game_over = bool(terminated or truncated)
    lives = int(info["lives"])
    if 0 < lives < self.lives:  # a life lost, the game goes on
      terminated = True
    self.lives = lives
    return obs, reward, terminated, truncated, info

  def reset(self, *, seed=None, options=None):
    if self.game_over or seed is not None or options:
      obs, info = self.env.reset(seed=seed, options=options)
    else:
      obs, _, terminated, truncated, info = self.env.step(NOOP)
      if terminated or truncated:  # the no-op step ended the game after all
        obs, info = self.env.reset()
    self.lives, self.game_over = int(info["lives"]), False
    return obs, info


class FireReset(gym.Wrapper):
  """Presses FIRE (then action 2, as the reference wrappers do) after every reset: games
  such as Breakout wait for it, and an agent that never fires would learn nothing."""

  def reset(self, **kwargs):
    self.env.reset(**kwargs)
    for action in (FIRE, 2):
      obs, _, terminated, truncated, info = self.env.step(action)
      if terminated or truncated:
        obs, info = self.env.reset(**kwargs)
    return obs, info


class ClipReward(gym.RewardWrapper):
  """``sign(reward)``: the agent's reward, the same scale in every game. Reported scores are
  not clipped (``ScoreObservation`` sits inside this wrapper)."""

  def reward(self, reward):
    return float(np.sign(reward))


def needs_fire(env: gym.Env) -> bool:
  """Whether the game waits for FIRE to start (its action 1 is FIRE)."""
  meanings = getattr(env.unwrapped, "get_action_meanings", None)
  if meanings is None:
    return False
  names = meanings()
  return len(names) >= 3 and names[FIRE] == "FIRE"


def wrap_atari(env: gym.Env, max_length: int | None = None, noop_max: int = 30,
               skip: int = 4, fire_reset: bool | None = None) -> gym.Env:
  """The wrapper stack of the module docstring around an env with ``frameskip=1``.

  Args:
    env: an ALE env (or a look-alike giving ``info["lives"]``) that steps ONE frame.
    max_length: agent steps (after frame skip) per game; None keeps the env's own limit
      (108,000 frames for ale-py's ids).
    noop_max: most no-ops after a reset (0: none).
    skip: frames per agent step.
    fire_reset: press FIRE after resets; None = when the game has a FIRE action.
  """
  env = MaxAndSkip(NoopReset(env, noop_max), skip)
  if max_length is not None:
    env = gym.wrappers.TimeLimit(env, max_length)
  env = EpisodicLife(ScoreObservation(env))
  if needs_fire(env) if fire_reset is None else fire_reset:
    env = FireReset(env)
  return ClipReward(env)


def atari_env(env_id: str, max_length: int | None = None, render_mode: str | None = None,
              **wrap) -> gym.Env:
  """An ALE id with the Atari wrappers (``wrap_atari``); ``**wrap`` goes to ``wrap_atari``.

  The env steps one frame (``frameskip=1``) so ``MaxAndSkip`` can max-pool; sticky actions
  keep the id's default (``ALE/...-v5``: 0.25; ``...NoFrameskip-v4``: none, as in the
  published DQN/PPO Atari results). An id that is not an Atari game is an error here, so
  ``run.atari`` on CartPole says so instead of failing inside a wrapper.
  """
  ale.import_ale()
  if env_id in gym.registry and not ale.is_atari(env_id):  # unknown ids: make_gym says so
    raise UserInputError(f"environment {env_id!r} is not an Atari (ALE) game, but the "
                             "run asks for the Atari wrappers (run.atari=True); use an id such "
                             "as 'ALE/Breakout-v5' or 'BreakoutNoFrameskip-v4'")
  kwargs = {"frameskip": 1}
  if render_mode is not None:
    kwargs["render_mode"] = render_mode
  return wrap_atari(make_gym(env_id, **kwargs), max_length, **wrap)
