"""What the batch policy-gradient agents (VPG, TRPO) share: the rollout, acting and storing,
the returns/advantages of a batch, baseline training, and the ``Model`` builder. The
networks and TensorForce's baselines are ``networks.py``; ``PGConfig`` (``config.py``) holds
the shared fields; ``keys.py`` translates TensorForce's keys.

Shapes: ``B`` envs, ``T = config.rollout_length``, ``D`` flattened observation size.

Batches in whole episodes (``VPGConfig.batch_unit='episodes'``; TRPO counts timesteps): the
period stays ``rollout_length`` stores, but each env's column of the rollout holds
``episode_buffer_length`` steps and is filled from its own ``EpisodeFill.fill``. An update
learns only once ``batch_episodes`` episodes have finished (``finished_episodes``), masks
out every step after each column's last finished episode (``Batch.mask``), and then moves
each column's unfinished tail to its front (``carry_tails``): no episode is split between
two updates or dropped. Episodes longer than ``max_episode_timesteps`` are cut there in
``store`` (stored as truncated, so the returns bootstrap) and counted; the env goes on, and
a recurrent policy replays the rest of that episode from its initial carry.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from batchrl.agents import spaces
from batchrl.agents.core import Model, Transition
from batchrl.agents.policy_gradient.config import PGConfig
from batchrl.agents.policy_gradient.networks import PGNetworks, layout, make_networks
from batchrl.agents.spaces import SpaceInfo, space_info
from batchrl.configclass import ConfigError
from batchrl.networks.mlp import reset_carry
from batchrl.ops.returns import discounted_returns, generalized_advantages
from batchrl.ops.running_stats import RunningStats
from batchrl.specs import EnvSpec

# ----------------------------------------------------------------------------- state


class Rollout(NamedTuple):
  """Raw experience of one batch, ``[T, B, ...]``."""

  obs: Any  # [T, B, D] (flat) or a pytree of [T, B, ...] states
  raw_action: Any  # the policy's sample (or the explored action batchrl.Agent hands back)
  reward: jax.Array  # [T, B]
  terminated: jax.Array  # [T, B] bool
  truncated: jax.Array  # [T, B] bool
  next_obs: Any  # [T, B, ...] the observation each step led to (final one at episode ends)


class EpisodeFill(NamedTuple):
  """Where each env's column of an episode-counting rollout stands (``PGState.episodes``)."""

  fill: jax.Array  # [B] int32 rows in use: the carried tail, then the steps stored since
  length: jax.Array  # [B] int32 steps of each env's current episode stored so far
  cut: jax.Array  # [] int32 episodes cut at max_episode_timesteps since the last update


class PGState(NamedTuple):
  """Everything VPG / TRPO learn and remember; a pytree (checkpointable, vmappable)."""

  params: dict  # {"policy"[, "baseline"]}
  opt_state: Any  # the policy optimizer (VPG) or () (TRPO: natural gradient steps)
  baseline_opt_state: Any  # Adam of the 'states' baseline, () otherwise
  obs_stats: Any  # RunningStats of raw float observations
  reward_stats: RunningStats  # of raw per-step rewards []
  rollout: Rollout
  rollout_carry: Any  # [B, ...] policy carry the rollout started from
  carry: Any  # [B, ...] policy carry to act from next (() when feed-forward)
  step: jax.Array  # [] int32 transitions stored in the current rollout
  num_updates: jax.Array  # [] int32
  num_steps: jax.Array  # [] int32 environment steps stored (summed over envs)
  key: jax.Array  # baseline minibatch shuffling
  info: SpaceInfo
  episodes: Any = ()  # EpisodeFill when the batch counts episodes, else () (no leaves)


def baseline_optimizer(config: PGConfig) -> optax.GradientTransformation:
  return optax.adam(config.baseline_learning_rate, eps=1e-5)


def counts_episodes(config: PGConfig) -> bool:
  """Whether the batch counts whole episodes (only ``VPGConfig`` has ``batch_unit``)."""
  return getattr(config, "batch_unit", "timesteps") == "episodes"


def episode_buffer_length(config: PGConfig, num_envs: int) -> int:
  """Steps each env's column holds when the batch counts episodes.

  With episodes of at most ``L = max_episode_timesteps`` steps (``store`` cuts longer ones)
  a column of ``f`` steps that starts at an episode start holds at least ``f // L``
  finished episodes. After a learning update each column keeps an unfinished tail of at
  most ``L - 1`` steps; ``K = ceil(ceil(N / B) * L / T)`` periods of ``T = rollout_length``
  steps later every column holds ``ceil(N / B)`` finished episodes, so the update learns
  by then. ``K * T + L - 1`` steps therefore never overflow; rounded up to a multiple of
  ``baseline_minibatches`` (which must divide the ``[C, B]`` batch).
  """
  steps, longest = config.rollout_length, config.max_episode_timesteps
  per_env = -(-config.batch_episodes // num_envs)
  periods = -(-per_env * longest // steps)
  length = periods * steps + longest - 1
  parts = config.baseline_minibatches
  return -(-length // parts) * parts


def buffer_length(config: PGConfig, num_envs: int) -> int:
  """Rows of the rollout: ``rollout_length``, or ``episode_buffer_length`` for episodes."""
  if counts_episodes(config):
    return episode_buffer_length(config, num_envs)
  return config.rollout_length


def check_batch(config: PGConfig, info: SpaceInfo, name: str) -> None:
  """The baseline minibatches must divide the batch of ``rollout_length * num_envs``."""
  if counts_episodes(config):
    return  # episode_buffer_length is a multiple of baseline_minibatches
  total = config.rollout_length * info.num_envs
  if total % config.baseline_minibatches:
    raise ConfigError(f"{name}.baseline_minibatches ({config.baseline_minibatches}) must "
                      f"divide the batch of rollout_length * num_envs = "
                      f"{config.rollout_length} * {info.num_envs} = {total} timesteps.")


def init_state(config: PGConfig, key: jax.Array, spec: EnvSpec, name: str,
               policy_optimizer: optax.GradientTransformation | None) -> PGState:
  """Fresh parameters, optimizers, normalizers, an empty rollout and zero carries."""
  info = space_info(spec, layout(config, spec))
  check_batch(config, info, name)
  nets = make_networks(config, info)
  if nets.recurrent and config.baseline_mode == "network":
    raise ConfigError(f"{name}.baseline_mode='network' needs a feed-forward policy network; "
                      "with lstm/gru layers use baseline_mode='states'.")
  params_key, state_key = jax.random.split(key)
  params = nets.init(params_key)
  opt_state = () if policy_optimizer is None else policy_optimizer.init(params["policy"])
  baseline_opt = (baseline_optimizer(config).init(params["baseline"])
                  if "baseline" in params else ())
  steps, envs = buffer_length(config, info.num_envs), info.num_envs
  per_step = lambda x: jnp.broadcast_to(x, (steps,) + jnp.shape(x))
  zero_obs = spaces.zero_obs(info, (envs,))
  flags = jnp.zeros((steps, envs), jnp.bool_)
  rollout = Rollout(jax.tree.map(per_step, zero_obs),
                    spaces.zero_raw_action(info, (steps, envs)),
                    jnp.zeros((steps, envs), jnp.float32), flags, flags,
                    jax.tree.map(per_step, zero_obs))
  carry = nets.initial_carry(envs)
  zero = jnp.int32(0)
  episodes = (EpisodeFill(jnp.zeros(envs, jnp.int32), jnp.zeros(envs, jnp.int32), zero)
              if counts_episodes(config) else ())
  return PGState(params, opt_state, baseline_opt, spaces.obs_stats_init(info),
                 RunningStats.create(()), rollout, carry, carry, zero, zero, zero, state_key,
                 info, episodes)


# ----------------------------------------------------------------------------- act, store


def normalize_obs(config: PGConfig, state: PGState, obs):
  if not config.normalize_observations:
    return obs
  return spaces.normalize_obs_tree(state.obs_stats, obs, config.observation_clip,
                                   config.normalizer_epsilon)


def scale_rewards(config: PGConfig, state: PGState, rewards: jax.Array) -> jax.Array:
  if not config.scale_rewards:
    return rewards
  return state.reward_stats.normalize(rewards, center=False, clip=config.reward_clip,
                                      epsilon=config.normalizer_epsilon)


def act(config: PGConfig, state: PGState, obs, key: jax.Array, deterministic: bool = False):
  """``obs[B, ...] -> (action[B, ...], extras)``; extras: the raw sample and next carry."""
  nets = make_networks(config, state.info)
  inputs = normalize_obs(config, state, spaces.float_obs(state.info, obs))
  carry, dist, _ = nets.policy(state.params["policy"], state.carry, inputs)
  raw_action = dist.mode() if deterministic else dist.sample(key)
  action = spaces.env_action(state.info, raw_action, rescale=config.rescale_actions,
                             clip=config.clip_actions)
  return action, {"raw_action": raw_action, "carry": carry}


def store(config: PGConfig, state: PGState, transition: Transition) -> PGState:
  """Writes one ``[B]`` transition at ``state.step`` (at each env's ``fill`` when the batch
  counts episodes); updates the normalizers."""
  info = state.info
  obs = spaces.float_obs(info, transition.obs)
  row = Rollout(obs, transition.extras["raw_action"],
                jnp.asarray(transition.reward, jnp.float32),
                jnp.asarray(transition.terminated, jnp.bool_),
                jnp.asarray(transition.truncated, jnp.bool_),
                spaces.float_obs(info, transition.next_obs))
  index = state.step % config.rollout_length
  if counts_episodes(config):
    rollout, episodes = _store_in_columns(config, state, row)
    state = state._replace(episodes=episodes)
  else:
    rollout = jax.tree.map(
        lambda column, x: jax.lax.dynamic_update_index_in_dim(
            column, x.astype(column.dtype), index, 0),
        state.rollout, row)
  start = jax.tree.map(lambda kept, c: jnp.where(index == 0, c, kept), state.rollout_carry,
                       state.carry)
  state = track(config, state, transition)
  return state._replace(
      rollout=rollout, rollout_carry=start, step=state.step + 1,
      num_steps=state.num_steps + info.num_envs,
      obs_stats=spaces.obs_stats_update(state.obs_stats, obs),
      reward_stats=state.reward_stats.update(row.reward))


def _store_in_columns(config: PGConfig, state: PGState, row: Rollout):
  """``row`` ``[B]`` written at row ``fill[b]`` of each env's column; an episode reaching
  ``max_episode_timesteps`` steps unfinished is cut (stored as truncated: bootstrapped)."""
  episodes = state.episodes
  length = episodes.length + 1
  done = jnp.logical_or(row.terminated, row.truncated)
  cut = jnp.logical_and(length >= config.max_episode_timesteps, jnp.logical_not(done))
  row = row._replace(truncated=jnp.logical_or(row.truncated, cut))
  envs = jnp.arange(episodes.fill.shape[0])
  rollout = jax.tree.map(
      lambda column, x: column.at[episodes.fill, envs].set(x.astype(column.dtype)),
      state.rollout, row)
  return rollout, EpisodeFill(episodes.fill + 1,
                              jnp.where(jnp.logical_or(done, cut), 0, length),
                              episodes.cut + jnp.sum(cut, dtype=jnp.int32))


def finished_episodes(state: PGState) -> tuple[jax.Array, jax.Array]:
  """``(ends[B], count[])``: per env column, the row after its last finished episode (0
  when none finished), and the number of finished episodes in all columns."""
  rollout = state.rollout
  rows = jnp.arange(rollout.reward.shape[0])[:, None]
  done = jnp.logical_or(rollout.terminated, rollout.truncated)
  done = jnp.logical_and(done, rows < state.episodes.fill[None, :])
  ends = jnp.max(jnp.where(done, rows + 1, 0), axis=0)
  return ends.astype(jnp.int32), jnp.sum(done, dtype=jnp.int32)


def carry_tails(state: PGState, ends: jax.Array, learned: jax.Array) -> PGState:
  """After an update: when it ``learned``, each column's rows ``[ends[b], fill[b])`` (its
  unfinished episode) move to its front; otherwise everything stays for the next one.
  Resets the cut counter."""
  shift = jnp.where(learned, ends, 0)
  rows = state.rollout.reward.shape[0]
  source = (jnp.arange(rows)[:, None] + shift[None, :]) % rows  # [C, B]
  envs = jnp.arange(shift.shape[0])[None, :]
  rollout = jax.tree.map(lambda column: column[source, envs], state.rollout)
  episodes = state.episodes._replace(fill=state.episodes.fill - shift, cut=jnp.int32(0))
  return state._replace(rollout=rollout, episodes=episodes)


def track(config: PGConfig, state: PGState, transition: Transition) -> PGState:
  """Advances the policy carry; zeroes it for envs whose episode ended."""
  del config
  return state._replace(carry=reset_carry(transition.extras["carry"], transition.done))


# ----------------------------------------------------------------------------- the batch


class Batch(NamedTuple):
  """A rollout prepared for learning, ``[T, B]``."""

  obs: Any  # normalized observations [T, B, ...]
  raw_action: Any  # [T, B, ...]
  advantages: jax.Array  # [T, B] (standardized with normalize_rewards)
  targets: jax.Array  # [T, B] what the baseline regresses to
  values: jax.Array  # [T, B] baseline before the update (0 for 'none')
  reset: jax.Array  # [T, B] the carry is zeroed before this step
  carry: Any  # [B, ...] the carry of step 0
  mask: jax.Array | None = None  # [T, B] bool steps of finished episodes (episode batches)


def standardize(x: jax.Array, epsilon: float = 1e-8, mask: jax.Array | None = None
                ) -> jax.Array:
  """``(x - mean) / std`` over all elements of ``x`` (over those where ``mask`` when given)."""
  if mask is None:
    return (x - jnp.mean(x)) / (jnp.std(x) + epsilon)
  mean = masked_mean(x, mask)
  std = jnp.sqrt(masked_mean(jnp.square(x - mean), mask))
  return (x - mean) / (std + epsilon)


def masked_mean(x: jax.Array, mask: jax.Array | None) -> jax.Array:
  """The mean of ``x`` where ``mask`` (all of it for None); 0 when the mask is empty.
  ``where``, not a product: masked-out steps may hold any finite value and give no
  gradient."""
  if mask is None:
    return jnp.mean(x)
  total = jnp.sum(jnp.where(mask, x, 0.0))
  return total / jnp.maximum(jnp.sum(mask), 1).astype(total.dtype)


def state_values(config: PGConfig, nets: PGNetworks, params: dict, obs) -> jax.Array:
  """Baseline values ``[...]`` of normalized observations (feed-forward; 0 for 'none')."""
  if config.baseline_mode == "states":
    return nets.baseline(params["baseline"], obs)
  if config.baseline_mode == "network":
    return nets.policy(params["policy"], (), obs)[2]
  lead = jax.tree.leaves(obs)[0].shape
  return jnp.zeros(lead[:2], jnp.float32)


def prepare(config: PGConfig, nets: PGNetworks, state: PGState, ends=None,
            returns: Callable[..., jax.Array] = discounted_returns) -> Batch:
  """Normalized ``[T, B]`` data: values before the update, returns, advantages.

  ``returns(rewards, terminated, truncated, next_values, discount) -> [T, B]``: the value
  targets without GAE (A2C passes its n-step returns; the default runs to the rollout's end).

  When the batch counts episodes, ``T`` is the buffer length, ``mask`` marks the steps of
  finished episodes (the only ones learned from and standardized over), every column
  starts an episode (its carry is the initial one) and the returns of a finished episode
  never reach past its last step. ``ends``: ``finished_episodes(state)[0]`` when the
  caller has it already.
  """
  r = state.rollout
  obs = normalize_obs(config, state, r.obs)
  next_obs = normalize_obs(config, state, r.next_obs)
  rewards = scale_rewards(config, state, r.reward)
  values = state_values(config, nets, state.params, obs)
  next_values = state_values(config, nets, state.params, next_obs)
  targets = returns(rewards, r.terminated, r.truncated, next_values, config.discount)
  if config.gae_lambda is None:
    advantages = targets - values
  else:
    advantages = generalized_advantages(rewards, values, next_values, r.terminated,
                                        r.truncated, config.discount, config.gae_lambda)
    if config.value_target == "lambda_return":
      targets = advantages + values
  mask, carry = None, state.rollout_carry
  if counts_episodes(config):
    ends = finished_episodes(state)[0] if ends is None else ends
    mask = jnp.arange(r.reward.shape[0])[:, None] < ends[None, :]
    carry = nets.initial_carry(r.reward.shape[1])
  if config.normalize_rewards:
    advantages = standardize(advantages, mask=mask)
  done = jnp.logical_or(r.terminated, r.truncated)
  first = jnp.full_like(done[:1], mask is not None)
  reset = jnp.concatenate([first, done[:-1]], axis=0)
  stop = jax.lax.stop_gradient
  return Batch(obs, r.raw_action, stop(advantages), stop(targets), stop(values), reset,
               carry, mask)


def train_baseline(config: PGConfig, nets: PGNetworks, params, opt_state, obs,
                   targets: jax.Array, key: jax.Array, mask: jax.Array | None = None):
  """``baseline_steps`` shuffled passes of ``baseline_minibatches`` Adam steps on
  ``0.5 * mean((V(s) - target)^2)``; ``obs``/``targets`` ``[T, B, ...]``; with ``mask``
  ``[T, B]`` the mean of each minibatch is over its masked-in steps.

  Returns the new baseline params, optimizer state and the mean loss over the steps.
  """
  optimizer = baseline_optimizer(config)
  data = (obs, targets) if mask is None else (obs, targets, mask)
  flat = jax.tree.map(lambda x: jnp.reshape(x, (-1,) + x.shape[2:]), data)
  size = targets.size
  parts = config.baseline_minibatches

  def loss(p, batch):
    squares = jnp.square(nets.baseline(p, batch[0]) - batch[1])
    return 0.5 * (jnp.mean(squares) if mask is None else masked_mean(squares, batch[2]))

  grad_fn = jax.value_and_grad(loss)

  def minibatch(carry, batch):
    params, opt_state = carry
    loss, grads = grad_fn(params, batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), loss

  def epoch(carry, epoch_key):
    order = jax.random.permutation(epoch_key, size) if parts > 1 else jnp.arange(size)
    split = lambda x: x[order].reshape((parts, size // parts) + x.shape[1:])
    return jax.lax.scan(minibatch, carry, jax.tree.map(split, flat))

  keys = jax.random.split(key, config.baseline_steps)
  (params, opt_state), losses = jax.lax.scan(epoch, (params, opt_state), keys)
  return params, opt_state, jnp.mean(losses)


def batch_metrics(batch: Batch) -> dict:
  return {"value_mean": masked_mean(batch.values, batch.mask),
          "return_mean": masked_mean(batch.targets, batch.mask)}


def summarize(config: PGConfig, state: PGState) -> dict:
  """TensorBoard material: normalizer statistics and the last rollout's actions."""
  obs_mean, obs_std = spaces.obs_stats_mean_std(state.obs_stats, config.normalizer_epsilon)
  scalars = {"normalizer/observ_mean": obs_mean, "normalizer/observ_std": obs_std,
             "normalizer/reward_std": jnp.mean(state.reward_stats.std(
                 config.normalizer_epsilon))}
  actions = state.rollout.raw_action
  histograms = ({f"action/{k}": v for k, v in actions.items()} if isinstance(actions, dict)
                else {"action": actions})
  return {"scalars": scalars, "histograms": histograms}


def make_model(config, name: str, init, update) -> Model:
  """The ``Model`` of a policy-gradient agent (VPG, TRPO): rollout acting and storing from
  this module, ``init(config, key, spec)`` and ``update(config, state)`` its own;
  ``period = config.rollout_length``."""
  return Model(
      init=lambda key, spec: init(config, key, spec),
      act=lambda state, obs, key, deterministic=False: act(config, state, obs, key,
                                                           deterministic),
      store=lambda state, transition: store(config, state, transition),
      update=lambda state: update(config, state),
      ready=lambda state: state.step >= config.rollout_length,
      track=lambda state, transition: track(config, state, transition),
      period=config.rollout_length,
      name=name,
      summarize=lambda state: summarize(config, state),
      # Counting whole episodes, an update waits until enough of them finished.
      learned_updates=(lambda state: state.num_updates) if counts_episodes(config) else None)
