"""EnvPool's C++ environments inside the compiled program: ``run.backend='envpool'``.

EnvPool (``pip install "batchrl[envpool]"``) steps a batch of envs in C++ and offers that
step as an XLA custom call, so ``PoolEnv`` puts the env step inside the compiled training
loop, as Batch PPO's in-graph batch env did, with no Python between the policy and the
physics. It speaks the batched in-graph protocol of ``batchrl.envs.jax_env``, like
``InGraphBatchEnv``, and applies the observation and action maps of the Batch PPO stack
(``batchrl.envs.wrappers.batch_ppo_stack``) in the graph: float32 values, bounded Box
values mapped to [-1, 1] with ``normalize_ranges``, actions clipped to the env's bounds.

Two things need care:

- Auto-reset. EnvPool resets an env on the step *after* its episode ended (Gymnasium's
  NEXT_STEP); batchrl's loop needs the next episode's first observation in the step that
  ended one (SAME_STEP), with the last one in ``final_obs``. When an episode ends, one host
  call steps just those envs once more (EnvPool ignores their action and resets them) and
  their first observations replace the returned ones: one crossing per finished episode,
  none on the other steps.
- float64. EnvPool's custom calls read and write the dtypes of its own specs (float64 for
  MuJoCo) whatever JAX's x64 setting: with x64 off, float32 buffers would be read as
  doubles. The step is traced with x64 on (``jax.enable_x64``), its action cast up and its
  results cast down to the graph's float32.

How it differs from ``backend='gymnasium'`` for the same task and seed (the statistics are
not the same numbers): EnvPool seeds its envs its own way (the pool's seed is the run's,
fixed when the pool is built), and ``reset(key)`` does not reseed, so an evaluation or a
resumed run continues the pool's random stream instead of restarting it from the key. The
dynamics are Gymnasium's, transition by transition (``tests/test_pool.py``: CartPole-v1,
HalfCheetah-v5; and from a start both fix, InvertedPendulum-v5 without reset noise, the
same first 1000 observations as ``BatchEnv``, auto-resets included), except one: where
Pendulum-v1's speed limit of 8 binds, EnvPool moves the angle with the speed before
clipping (as gym 0.21 did), Gymnasium with the clipped speed. And one flag: a fall (Hopper's,
Walker2d's) on the very step the episode limit is reached comes from EnvPool as truncated
only, so a run on it bootstraps through that fall, where the gymnasium backend stores it as
terminated (``tests/test_transition_parity.py``); with the default limit of 1000 steps that
is a fall on exactly the last step.
EnvPool's tasks with flat Box observations and Box or Discrete actions work (MuJoCo,
classic control; ``envpool.list_all_envs()``).

Atari (``run.atari``, an ALE id such as ``BreakoutNoFrameskip-v4``): EnvPool's game at its
``-v5`` id with its own C++ versions of the wrappers of ``batchrl.envs.atari`` (no-op starts,
frame skip 4 with max-pooling, clipped rewards, FIRE at reset; sticky actions as the ALE id
has them) and episodic life done here (``PoolEnv``: EnvPool's own would let a restart
continue a game; ale-py, ``batchrl[atari]``, says which games wait for FIRE), frames out
raw (210x160 RGB) so that ``run.preprocessing`` (grayscale, 84x84, 4 frames) does the rest
in the graph as on the gymnasium backend, and the
same score channel (EnvPool's unclipped reward and real game over), so reported scores are
raw scores of whole games. Its episode limit is EnvPool's (27,000 agent steps) unless
``run.max_length`` sets one.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import warnings
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl.envs.ale import import_ale
from batchrl.envs.atari import FIRE, FRAME, GAME_OVER, NOOP, SCORE_REWARD
from batchrl.envs.host_call import host_call
from batchrl.envs.jax_env import EnvStep
from batchrl.envs.wrappers import affine_map, normalize_mask, unit_box, unit_range
from batchrl.errors import UserInputError, did_you_mean, missing_extra

try:  # x64 for one block: jax.enable_x64 in recent JAX, jax.experimental's before
  _x64 = functools.partial(jax.enable_x64, True)
except AttributeError:  # pragma: no cover  (an older JAX)
  from jax.experimental import enable_x64 as _x64


def import_envpool():
  """The ``envpool`` module, or a one-line error naming the extra that installs it."""
  try:
    import envpool  # optional: pip install "batchrl[envpool]"
  except ImportError as error:
    raise missing_extra("run.backend='envpool'", "envpool", error) from error
  return envpool


# EnvPool's own Atari wrappers set as ``batchrl.envs.atari.atari_env`` sets ours; the frames
# come out raw (210x160 RGB, one per step) so that run.preprocessing does the rest in the
# graph. Episodic life is ours (``PoolEnv``): EnvPool's keeps the game going through every
# reset but the one after a game over, so a restart (before an evaluation, on resume) would
# not start a new game.
ATARI_OPTIONS = {"img_height": 210, "img_width": 160, "gray_scale": False, "stack_num": 1,
                 "frame_skip": 4, "noop_max": 30, "episodic_life": False, "reward_clip": True,
                 "use_fire_reset": True}
# the two ALE id forms whose settings EnvPool's options reproduce (other ALE ids skip a
# random number of frames, or stick to actions by another rule)
_ALE_GAME = re.compile(r"^(?:ALE/(?P<v5>[A-Z][A-Za-z]*)-v5"
                       r"|(?P<v4>[A-Z][A-Za-z]*)NoFrameskip-v4)$")


def pool_task(env_id: str, atari: bool) -> tuple[str, dict]:
  """EnvPool's task id and options for ``env_id``: an ALE id with ``atari`` (its game at
  EnvPool's ``-v5``; sticky actions as the ALE id has them: 0.25 for ``ALE/...-v5``, none
  for ``...NoFrameskip-v4``), any EnvPool id as it is otherwise."""
  if not atari:
    return env_id, {}
  match = _ALE_GAME.match(env_id)
  if match is None:
    raise UserInputError(f"run.atari with run.backend='envpool' takes an ALE id of the form "
                         f"'<Game>NoFrameskip-v4' or 'ALE/<Game>-v5', got {env_id!r}.")
  sticky = 0.25 if match["v5"] else 0.0
  game = match["v5"] or match["v4"]
  return f"{game}-v5", {**ATARI_OPTIONS, "repeat_action_probability": sticky}


def make_pool(env_id: str, num_envs: int, seed: int, max_length: int | None = None,
              atari: bool = False):
  """EnvPool's Gymnasium-style pool of ``num_envs`` envs of ``env_id`` (with ``atari``, an
  ALE id: see ``pool_task``); an id EnvPool lacks is a ``UserInputError`` naming the
  closest ones it has."""
  envpool = import_envpool()
  task, options = pool_task(env_id, atari)
  tasks = envpool.list_all_envs()
  if task not in tasks:
    raise UserInputError(f"EnvPool {envpool.__version__} has no task {task!r}"
                         f"{did_you_mean(task, tasks, n=3)} (run.backend='envpool'); its "
                         "tasks: envpool.list_all_envs().")
  if max_length is not None:
    options["max_episode_steps"] = int(max_length)
  return envpool.make(task, env_type="gymnasium", num_envs=num_envs, seed=int(seed),
                      **options)


@functools.cache
def needs_fire(task: str) -> bool:
  """Whether EnvPool's Atari ``task`` (its config's ``task``, e.g. 'breakout') waits for
  FIRE after a lost life: its minimal action set has FIRE as action 1, as
  ``batchrl.envs.atari.needs_fire`` decides for ALE envs (ale-py: ``batchrl[atari]``)."""
  ale_py = import_ale()
  ale = ale_py.ALEInterface()
  ale.setLoggerMode(ale_py.LoggerMode.Error)
  ale.loadROM(ale_py.roms.get_rom_path(task))
  actions = ale.getMinimalActionSet()
  return len(actions) >= 3 and actions[FIRE] == ale_py.Action.FIRE


@contextlib.contextmanager
def _quiet():
  """EnvPool builds its spaces anew on every ``recv`` (and on reading them), and Gymnasium
  warns each time that their float64 bounds become float32: noise, hidden here."""
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*precision lowered", UserWarning)
    yield


def _float32_box(space: gym.spaces.Box) -> gym.spaces.Box:
  """``space`` with float32 values (the graph's dtype; ConvertTo32Bit's space)."""
  if space.dtype.kind != "f":
    return space
  return gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32),
                        space.shape, np.float32)


@dataclasses.dataclass(frozen=True)
class _Maps:
  """The Batch PPO stack's maps of one pool, as in-graph functions (see the module doc)."""

  observation_space: gym.Space
  action_space: gym.Space
  observ_affine: tuple | None  # (mask, low, width): bounded observations to [-1, 1]
  action_affine: tuple | None  # (mask, low, width): [-1, 1] actions to the real range
  action_bounds: tuple | None  # (low, high) of a Box action, clipped to

  frames: bool = False  # EnvPool's [C, H, W] frames, handed on as [H, W, C]

  @classmethod
  def of(cls, obs_space: gym.Space, act_space: gym.Space, normalize: bool,
         frames: bool = False) -> "_Maps":
    if frames:
      c, h, w = obs_space.shape
      return cls(gym.spaces.Box(0, 255, (h, w, c), np.uint8), act_space, None, None, None,
                 frames=True)
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) > 1:
      raise UserInputError(f"run.backend='envpool' takes tasks with flat Box observations "
                           f"(MuJoCo, classic control) or, with run.atari, ALE games; this "
                           f"one has {obs_space}.")
    if not isinstance(act_space, (gym.spaces.Box, gym.spaces.Discrete)):
      raise UserInputError(f"run.backend='envpool' needs Box or Discrete actions; this task "
                           f"has {act_space}.")
    setting = None if normalize else False
    obs_mask = normalize_mask(obs_space, setting, "observ")
    is_box = isinstance(act_space, gym.spaces.Box)
    act_mask = normalize_mask(act_space, setting, "action") if is_box else None
    if act_mask is not None and unit_range(act_space, act_mask):
      act_mask = None  # [-1, 1] already (MuJoCo's): as RangeNormalize, no rounding map
    observed = obs_space if obs_mask is None else unit_box(obs_space, obs_mask)
    acted = act_space if act_mask is None else unit_box(act_space, act_mask)
    return cls(_float32_box(observed), _float32_box(acted) if is_box else act_space,
               _with_mask(obs_mask, affine_map(obs_space, obs_mask)),
               _with_mask(act_mask, affine_map(act_space, act_mask)),
               (act_space.low, act_space.high) if is_box else None)

  def observation(self, obs: jax.Array) -> jax.Array:
    if self.frames:
      return jnp.moveaxis(obs, 1, -1)
    if self.observ_affine is None:
      return obs.astype(self.observation_space.dtype)
    mask, low, width = self.observ_affine
    scaled = 2.0 * (obs - low) / width - 1.0
    return jnp.where(mask, scaled, obs).astype(self.observation_space.dtype)

  def action(self, action: jax.Array) -> jax.Array:
    if self.action_affine is not None:
      mask, low, width = self.action_affine
      action = jnp.where(mask, low + (action + 1.0) * width / 2.0, action)
    if self.action_bounds is not None:
      action = jnp.clip(action, *self.action_bounds)
    return action


def _with_mask(mask, affine):
  """``(mask, low, width)`` with unbounded elements' width 1 (they are masked out; a finite
  width keeps the unused branch of ``where`` free of inf and nan), or None."""
  if mask is None:
    return None
  low, width = affine
  return (mask, np.where(mask, low, 0.0).astype(np.float32),
          np.where(mask, width, 1.0).astype(np.float32))


@dataclasses.dataclass(eq=False)
class PoolEnv:
  """A pool of EnvPool envs as a batched in-graph env (see the module doc).

  The in-graph ``state`` is ``(handle, lives)``: EnvPool's handle, a token the custom calls
  pass along so that XLA keeps them in order (the pool itself is named in the compiled
  call, so the token's bytes carry no meaning and a checkpoint may hold them), and each
  env's lives (Atari; zeros otherwise).

  Atari: a lost life ends the agent's episode (``terminated``) but not the game, as
  ``batchrl.envs.atari.EpisodicLife`` does; the env goes on with one FIRE step where the
  game waits for FIRE, else one no-op step (our wrappers take a no-op, FIRE and action 2).
  Only a game over (or the episode limit) resets the game, and a restart always starts new
  games.
  """

  pool: Any
  normalize_ranges: bool = True
  atari: bool = False  # a pool of ``make_pool(..., atari=True)``: frames and score channel

  def __post_init__(self):
    with _quiet():
      self._pool_spaces = (self.pool.observation_space, self.pool.action_space)
    self._maps = _Maps.of(*self._pool_spaces, self.normalize_ranges, frames=self.atari)
    # what EnvPool's C++ step reads (its space may say another: Discrete's int64 for int32)
    self._action_dtype = np.dtype(self.pool.spec.action_array_spec["action"].dtype)
    space = self._pool_spaces[0]  # its values as the graph carries them (float32)
    self._obs_struct = jax.ShapeDtypeStruct((self.num_envs,) + space.shape,
                                            jax.dtypes.canonicalize_dtype(space.dtype))
    self._lives_struct = jax.ShapeDtypeStruct((self.num_envs,), np.int32)
    # the step that follows a lost life: FIRE where the game waits for it, else a no-op
    # (one step, where EpisodicLife and FireReset take three: each is a round trip to the
    # pool, and a lost life comes every few dozen steps early in training)
    self._continue = ((FIRE,) if needs_fire(self.pool.config["task"]) else (NOOP,)
                      ) if self.atari else ()

  @property
  def num_envs(self) -> int:
    return int(self.pool.config["num_envs"])

  @property
  def single_observation_space(self) -> gym.Space:
    if self.atari:  # as batchrl.envs.atari.ScoreObservation's
      return gym.spaces.Dict({
          FRAME: self._maps.observation_space,
          SCORE_REWARD: gym.spaces.Box(-np.inf, np.inf, (), np.float32),
          GAME_OVER: gym.spaces.Box(0.0, 1.0, (), np.float32)})
    return self._maps.observation_space

  @property
  def single_action_space(self) -> gym.Space:
    return self._maps.action_space

  @property
  def max_episode_steps(self) -> int | None:
    return self.pool.config.get("max_episode_steps")

  @functools.cached_property
  def _xla(self):
    """EnvPool's (handle, recv, send, step), made with x64 on so that its specs keep their
    float64 (built at the first trace: a pool only read for its spaces registers nothing)."""
    with _x64():
      return self.pool.xla()

  # -- host side ------------------------------------------------------------------------

  def _host_reset(self, _seed):
    self.pool.async_reset()
    rows = (np.zeros(self._obs_struct.shape, self._obs_struct.dtype),
            np.zeros(self._lives_struct.shape, np.int32))
    self._received(rows)
    return rows

  def _host_restart(self, over, lost, obs, lives):
    """New first observations (and lives) for the envs whose episode ended: a game over
    (``over``; any env outside Atari) is stepped once more, which EnvPool takes as its
    reset (the action is ignored); a lost life (``lost``) goes on with ``self._continue``'s
    actions, and a game that ends on the way is reset in turn."""
    rows = (obs.copy(), lives.copy())
    for action in self._continue:
      ids = np.flatnonzero(lost)
      if not len(ids):
        break
      self._send(ids, action)
      ended = self._received(rows)
      over, lost = over | ended, lost & ~ended
    if over.any():
      self._send(np.flatnonzero(over), 0)
      self._received(rows)
    return rows

  def _send(self, ids, action) -> None:
    actions = np.full((len(ids),) + self._pool_spaces[1].shape, action, self._action_dtype)
    self.pool.send(actions, ids.astype(np.int32))

  def _received(self, rows) -> np.ndarray:
    """Writes the next ``recv``'s observations and lives into ``rows`` at their env ids;
    returns the mask of envs whose game just ended."""
    with _quiet():
      first, _, terminated, truncated, info = self.pool.recv()
    ids = np.asarray(info["env_id"])
    obs, lives = rows
    obs[ids] = np.asarray(first, obs.dtype)
    lives[ids] = np.asarray(info.get("lives", 0), np.int32)
    ended = np.zeros(len(lives), bool)
    ended[ids] = np.asarray(terminated, bool) | np.asarray(truncated, bool)
    return ended

  # -- graph side -----------------------------------------------------------------------

  def reset(self, key):
    seed = jax.random.randint(key, (), 0, np.iinfo(np.int32).max)  # unused: see the doc
    obs, lives = host_call(self._host_reset, (self._obs_struct, self._lives_struct), seed)
    zeros = jnp.zeros(self.num_envs, jnp.float32)
    return self._observation(obs, zeros, zeros), (jnp.asarray(self._xla[0]), lives)

  def step(self, key, state, action) -> EnvStep:
    del key  # the pool owns its randomness (seeded when built)
    handle, lives = state
    out = self._pool_step(handle, action)
    raw, truncated = out["obs"], out["truncated"]
    over = out["terminated"] | truncated  # the game's own end
    lost = (out["lives"] < lives) & ~over if self.atari else jnp.zeros_like(over)
    terminated = out["terminated"] | lost
    first, lives = jax.lax.cond(
        (over | lost).any(),
        lambda: host_call(self._host_restart, (self._obs_struct, self._lives_struct), over,
                          lost, raw, out["lives"]),
        lambda: (raw, out["lives"]))
    zeros = jnp.zeros(self.num_envs, jnp.float32)
    return EnvStep(self._observation(first, zeros, zeros), (out["handle"], lives),
                   out["reward"], terminated, truncated,
                   self._observation(raw, out["score_reward"], over), {})

  def _observation(self, obs, score_reward, game_over):
    """What the agent's side sees: mapped observations, with ``atari`` the score-channel
    Dict of ``batchrl.envs.atari`` (the raw reward and whether the game really ended)."""
    obs = self._maps.observation(obs)
    if not self.atari:
      return obs
    return {FRAME: obs, SCORE_REWARD: score_reward,
            GAME_OVER: game_over.astype(jnp.float32)}

  def _pool_step(self, handle, action) -> dict:
    """EnvPool's compiled step, results in env order and in the graph's dtypes."""
    action = self._maps.action(action)
    _, _, _, pool_step = self._xla
    with _x64():
      handle, (obs, reward, terminated, truncated, info) = pool_step(
          handle, action.astype(self._action_dtype))
      order = jnp.zeros(self.num_envs, jnp.int32).at[info["env_id"]].set(
          jnp.arange(self.num_envs, dtype=jnp.int32))
      lives = info.get("lives", jnp.zeros(self.num_envs, jnp.int32))
      # Atari's "reward" info is the unclipped reward (the score channel's)
      return {"handle": handle, "obs": obs[order].astype(self._obs_struct.dtype),
              "reward": reward[order].astype(jnp.float32),
              "score_reward": info.get("reward", reward)[order].astype(jnp.float32),
              "terminated": terminated[order].astype(jnp.bool_),
              "truncated": truncated[order].astype(jnp.bool_),
              "lives": lives[order].astype(jnp.int32)}
