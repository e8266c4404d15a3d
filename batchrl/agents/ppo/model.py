"""BatchPPO as an ``Model``: pure functions over one state pytree.

Shapes: ``B`` envs, ``T = config.rollout_length``, ``D`` flattened observation size, ``A``
action size. The algorithm, top to bottom:

  act     normalize obs -> policy step (carry) -> sample (or mode) -> rescale/clip for the env
  store   write raw obs/action/reward/done/next_obs, the acting policy and its input carry
          into the ``[T, B]`` rollout; update the observation and reward normalizers;
          advance the carry (zeroed where the episode ended)
  update  normalize the rollout with the current statistics -> values of the network before
          the update -> returns / advantages -> ``update_epochs`` passes of minibatch Adam
          steps -> KL of the new policy on the whole rollout -> adapt the KL penalty beta
          (pure pieces, ``update_pieces``, that ``update`` composes in one scan; a driver may
          run them as programs of their own: ``batchrl.train.host_update``)

The old policy of the ratio and of the KL is the one that acted (stored in the rollout),
as in the original.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from batchrl import measured
from batchrl.agents import spaces
from batchrl.agents.core import Model, Transition
from batchrl.agents.ppo import losses, shuffle
from batchrl.agents.ppo.config import PPOConfig
from batchrl.agents.ppo.networks import PPONetworks, make_networks, make_spec_networks, reset_carry
from batchrl.agents.spaces import SpaceInfo, space_info
from batchrl.agents.update_pieces import Prepared, UpdatePieces, scan_update
from batchrl.configclass import ConfigError
from batchrl.ops.returns import discounted_returns, generalized_advantages
from batchrl.ops.running_stats import RunningStats
from batchrl.specs import EnvSpec


class RolloutBuffer(NamedTuple):
  """Raw experience of one rollout, ``[T, B, ...]``."""

  obs: Any  # [T, B, D] (flat layout) or a pytree of [T, B, ...] states
  raw_action: jax.Array  # [T, B, A] float or [T, B] int: the policy's sample
  reward: jax.Array  # [T, B]
  terminated: jax.Array  # [T, B] bool
  truncated: jax.Array  # [T, B] bool
  next_obs: jax.Array  # [T, B, D]
  policy: Any  # distribution that acted, batch shape [T, B]
  carry: Any  # policy carry that step t acted from, [T, B, H] (() when feed-forward)


class PPOState(NamedTuple):
  """Everything PPO learns and remembers; a pytree (checkpointable, vmappable)."""

  params: dict  # {"policy", "value"}; {"policy"} alone with config.share_torso
  opt_state: Any
  obs_stats: RunningStats  # of raw observations [D]
  reward_stats: RunningStats  # of raw per-step rewards []
  penalty: jax.Array  # [] KL penalty beta
  buffer: RolloutBuffer
  carry: Any  # [B, H] policy carry to act from next
  step: jax.Array  # [] int32 transitions stored in the current rollout
  num_updates: jax.Array  # [] int32
  num_steps: jax.Array  # [] int32 environment steps stored (summed over envs)
  key: jax.Array  # minibatch shuffling
  info: SpaceInfo


class UpdateData(NamedTuple):
  """The rollout prepared for training; ``[T, B]`` or, cut into sequences, ``[S, L]``."""

  obs: jax.Array
  raw_action: jax.Array
  old_policy: Any
  advantages: jax.Array
  returns: jax.Array
  old_values: jax.Array
  reset: jax.Array  # the carry is zeroed before this step (an episode starts)
  carry: Any  # [T, B, ...] -> [S, ...] at sequence starts


def make_ppo(config: PPOConfig | None = None) -> Model:
  """BatchPPO (KL penalty, default) or clipped PPO as an ``Model``; ``period = rollout_length``."""
  config = PPOConfig() if config is None else config
  if not isinstance(config, PPOConfig):
    raise TypeError(f"make_ppo takes a PPOConfig, got {type(config).__name__}.")
  pieces = update_pieces(config)
  return Model(
      init=lambda key, spec: init(config, key, spec),
      act=lambda state, obs, key, deterministic=False: act(config, state, obs, key,
                                                           deterministic),
      store=lambda state, transition: store(config, state, transition),
      update=functools.partial(scan_update, pieces),
      ready=lambda state: state.step >= config.rollout_length,
      track=lambda state, transition: track(config, state, transition),
      period=config.rollout_length,
      name="ppo",
      summarize=lambda state: summarize(config, state),
      update_pieces=pieces,
      scratch=("buffer",))  # refilled from index 0 after each update (step == 0)


def summarize(config: PPOConfig, state: PPOState) -> dict:
  """TensorBoard material: normalizer statistics and the last rollout's actions/log-probs."""
  buffer = state.buffer
  obs_mean, obs_std = spaces.obs_stats_mean_std(state.obs_stats, config.normalizer_epsilon)
  scalars = {
      "normalizer/observ_mean": obs_mean,
      "normalizer/observ_std": obs_std,
      "normalizer/reward_std": jnp.mean(state.reward_stats.std(config.normalizer_epsilon)),
      "penalty": state.penalty,
  }
  actions = buffer.raw_action
  histograms = ({f"action/{k}": v for k, v in actions.items()} if isinstance(actions, dict)
                else {"action": actions})
  histograms["log_prob"] = buffer.policy.log_prob(actions)
  return {"scalars": scalars, "histograms": histograms}


# ------------------------------------------------------------------------------ init


def _layout(config: PPOConfig, spec: EnvSpec) -> str:
  """BatchPPO's MLPs on flat observations, or networks built from a JSON spec.

  Without a spec, spaces the MLPs cannot take (a Dict state with an ``action_mask``, int
  states, several actions) get the 'auto' network, so ``batchrl train`` works on
  environments that report action masks.
  """
  if config.network is not None:
    return "tree"
  action = spec.action_space
  flat = (isinstance(spec.observation_space, gym.spaces.Box)
          and (isinstance(action, gym.spaces.Discrete)
               or (isinstance(action, gym.spaces.Box) and len(action.shape) == 1)))
  return "flat" if flat else "tree"


def _networks(config: PPOConfig, info: SpaceInfo) -> PPONetworks:
  if info.layout == "flat":
    return make_networks(config, info.observation_size, info.action_space)
  if config.network is None:
    config = dataclasses.replace(config, network='"auto"')
  return make_spec_networks(config, info)


def _num_minibatches(config: PPOConfig, info: SpaceInfo) -> int:
  total = config.rollout_length * info.num_envs
  if config.batch_size is None:
    return 1
  if total % config.batch_size:
    raise ConfigError(f"PPOConfig.batch_size ({config.batch_size}) must divide the rollout "
                     f"of rollout_length * num_envs = {config.rollout_length} * "
                     f"{info.num_envs} = {total} transitions.")
  return total // config.batch_size


def _optimizer(config: PPOConfig, info: SpaceInfo) -> optax.GradientTransformation:
  learning_rate = _learning_rate_schedule(config, info)
  clip = ([optax.clip_by_global_norm(config.max_grad_norm)]
          if config.max_grad_norm is not None else [])
  return optax.chain(*clip, optax.adam(learning_rate, eps=config.adam_epsilon))


def _learning_rate_schedule(config: PPOConfig, info: SpaceInfo):
  if config.total_updates is None:
    return optax.constant_schedule(config.learning_rate)
  steps = config.total_updates * config.update_epochs * _num_minibatches(config, info)
  return optax.linear_schedule(config.learning_rate, 0.0, steps)


def init(config: PPOConfig, key: jax.Array, spec: EnvSpec) -> PPOState:
  """Fresh parameters, optimizer, normalizers, an empty rollout and zero carries."""
  info = space_info(spec, _layout(config, spec))
  _num_minibatches(config, info)  # validates batch_size against num_envs
  nets = _networks(config, info)
  params_key, state_key = jax.random.split(key)
  params = nets.init(params_key)
  carry = nets.initial_carry(info.num_envs)
  steps, envs = config.rollout_length, info.num_envs
  zero_obs = spaces.zero_obs(info, (envs,))
  policy = nets.policy(params["policy"], carry, zero_obs)[1]
  per_step = lambda x: jnp.broadcast_to(x, (steps,) + jnp.shape(x))
  flags = jnp.zeros((steps, envs), jnp.bool_)
  buffer = RolloutBuffer(
      obs=jax.tree.map(per_step, zero_obs),
      raw_action=spaces.zero_raw_action(info, (steps, envs)),
      reward=jnp.zeros((steps, envs), jnp.float32), terminated=flags,
      truncated=flags, next_obs=jax.tree.map(per_step, zero_obs),
      policy=jax.tree.map(per_step, policy), carry=jax.tree.map(per_step, carry))
  zero = jnp.int32(0)
  return PPOState(params, _optimizer(config, info).init(params),
                  spaces.obs_stats_init(info), RunningStats.create(()),
                  jnp.float32(config.kl_init_penalty), buffer, carry, zero, zero, zero,
                  state_key, info)


# ------------------------------------------------------------------------------- act


def normalize_obs(config: PPOConfig, state: PPOState, flat_obs: jax.Array) -> jax.Array:
  return normalize_with(config, state.obs_stats, flat_obs)


def normalize_with(config: PPOConfig, obs_stats: RunningStats, flat_obs: jax.Array):
  if not config.normalize_observations:
    return flat_obs
  return spaces.normalize_obs_tree(obs_stats, flat_obs, config.observation_clip,
                                   config.normalizer_epsilon)


def normalize_rewards(config: PPOConfig, state: PPOState, rewards: jax.Array) -> jax.Array:
  if not config.normalize_rewards:
    return rewards
  return state.reward_stats.normalize(rewards, center=False, clip=config.reward_clip,
                                      epsilon=config.normalizer_epsilon)


def env_action(config: PPOConfig, info: SpaceInfo, raw_action):
  """The policy's sample as the env takes it: offset (Discrete) or rescaled/clipped (Box)."""
  return spaces.env_action(info, raw_action, rescale=config.rescale_actions,
                           clip=config.clip_actions)


def act(config: PPOConfig, state: PPOState, obs: jax.Array, key: jax.Array,
        deterministic: bool = False):
  """``obs[B, ...] -> (action[B, ...], extras)``; extras hold the raw sample, the policy
  that acted and the next carry, all ``[B, ...]``."""
  nets = _networks(config, state.info)
  flat = normalize_obs(config, state, spaces.float_obs(state.info, obs))
  carry, policy = nets.policy(state.params["policy"], state.carry, flat)
  raw_action = policy.mode() if deterministic else policy.sample(key)
  extras = {"raw_action": raw_action, "policy": policy, "carry": carry}
  return env_action(config, state.info, raw_action), extras


# ----------------------------------------------------------------------------- store


def store(config: PPOConfig, state: PPOState, transition: Transition) -> PPOState:
  """Writes one ``[B]`` transition at ``state.step`` and updates the normalizers."""
  info = state.info
  obs = spaces.float_obs(info, transition.obs)
  row = RolloutBuffer(obs, transition.extras["raw_action"],
                      jnp.asarray(transition.reward, jnp.float32),
                      jnp.asarray(transition.terminated, jnp.bool_),
                      jnp.asarray(transition.truncated, jnp.bool_),
                      spaces.float_obs(info, transition.next_obs), transition.extras["policy"],
                      state.carry)
  index = state.step % config.rollout_length
  buffer = jax.tree.map(
      lambda column, x: jax.lax.dynamic_update_index_in_dim(column, x.astype(column.dtype),
                                                            index, 0),
      state.buffer, row)
  state = track(config, state, transition)
  return state._replace(
      buffer=buffer, step=state.step + 1, num_steps=state.num_steps + info.num_envs,
      obs_stats=spaces.obs_stats_update(state.obs_stats, obs),
      reward_stats=state.reward_stats.update(row.reward))


def track(config: PPOConfig, state: PPOState, transition: Transition) -> PPOState:
  """Advances the policy carry; zeroes it for envs whose episode ended."""
  del config
  return state._replace(carry=reset_carry(transition.extras["carry"], transition.done))


# ---------------------------------------------------------------------------- update


def update(config: PPOConfig, state: PPOState) -> tuple[PPOState, dict]:
  """Trains on the stored rollout; returns the new state (rollout emptied) and metrics: the
  pieces of ``update_pieces`` in one scan."""
  return scan_update(update_pieces(config), state)


def update_pieces(config: PPOConfig) -> UpdatePieces:
  """The update as pure pieces (``batchrl.agents.update_pieces``): ``update`` composes them
  in one scan; a driver may run them otherwise (``config.update_loop``, a declaration that
  ``batchrl.train.host_update`` reads), with the same result up to float rounding."""
  return UpdatePieces(
      prepare=functools.partial(_prepared, config),
      value_frames=lambda state: (state.buffer.obs, state.buffer.next_obs),
      values=functools.partial(values_of, config),
      batches=functools.partial(_epoch_batches, config),
      gradients=functools.partial(_gradients, config),
      apply=functools.partial(_apply, config),
      finish=functools.partial(_finish, config),
      # the clipped objective is a mean of per-step terms; the KL penalty's cutoff is not
      # linear in the batch
      mean_of_shares=config.policy_objective == "clip",
      item_frames=config.steps_chunk,
      loop=config.update_loop)


def _prepared(config: PPOConfig, state: PPOState, values=None) -> Prepared:
  """The sequences to train on, one shuffling key per epoch, ``(params, opt_state)``."""
  data, sequences, key, epochs_key = _update_data(config, _networks(config, state.info),
                                                  state, values)
  return Prepared((data, sequences, key), jax.random.split(epochs_key, config.update_epochs),
                  (state.params, state.opt_state))


def values_of(config: PPOConfig, state: PPOState, obs) -> jax.Array:
  """``V(obs)`` ``[t, B]`` of any ``t`` steps of the rollout's observations, under the
  parameters before the update."""
  return _networks(config, state.info).value(state.params,
                                             normalize_with(config, state.obs_stats, obs))


def _epoch_batches(config: PPOConfig, state: PPOState, data, key):
  return epoch_batches(config, state.info, data[1], key)


def _gradients(config: PPOConfig, state: PPOState, carry, batch: UpdateData):
  return minibatch_gradients(config, _networks(config, state.info), state.penalty, carry[0],
                             batch)


def _apply(config: PPOConfig, state: PPOState, carry, grads, metrics):
  return apply_gradients(config, state.info, carry, grads, metrics)


def _finish(config: PPOConfig, state: PPOState, data, carry, metrics):
  data, sequences, key = data
  return _finish_update(config, _networks(config, state.info), state, data, sequences, key,
                        *carry, metrics)


def _update_data(config: PPOConfig, nets: PPONetworks, state: PPOState, values=None):
  data = prepare(config, nets, state, values)
  key, epochs_key = jax.random.split(state.key)
  return data, to_sequences(data, config.steps_chunk), key, epochs_key


def _finish_update(config: PPOConfig, nets: PPONetworks, state: PPOState, data: UpdateData,
                   sequences: UpdateData, key, params, opt_state, metrics):
  """KL of the new policy, the adapted penalty and the update's metrics; the new state."""
  kl = jnp.mean(sequences_kl(nets, params, sequences))
  penalty = state.penalty
  if config.policy_objective == "kl_penalty":
    penalty = losses.adapt_penalty(penalty, kl, config.kl_target)
  schedule = _learning_rate_schedule(config, state.info)
  steps_per_update = config.update_epochs * _num_minibatches(config, state.info)
  metrics = dict(metrics)
  metrics.update(kl=kl, penalty=penalty,
                 learning_rate=schedule(state.num_updates * steps_per_update),
                 value_mean=jnp.mean(data.old_values), return_mean=jnp.mean(data.returns))
  state = state._replace(params=params, opt_state=opt_state, penalty=penalty, key=key,
                         step=jnp.int32(0), num_updates=state.num_updates + 1)
  return state, metrics


def prepare(config: PPOConfig, nets: PPONetworks, state: PPOState,
            values=None) -> UpdateData:
  """Normalized ``[T, B]`` training data: values before the update, returns, advantages.

  ``values``: ``(V(obs), V(next_obs))`` ``[T, B]`` when computed already (a driver may
  compute them in chunks, ``values_of``); None computes them here."""
  batch = state.buffer
  obs = normalize_obs(config, state, batch.obs)
  rewards = normalize_rewards(config, state, batch.reward)
  if values is None:
    values = _values_of_both(nets, state.params, obs,
                             normalize_obs(config, state, batch.next_obs))
  values, next_values = values
  returns = discounted_returns(rewards, batch.terminated, batch.truncated, next_values,
                               config.discount)
  if config.gae_lambda is None:
    advantages = returns - values
  else:
    advantages = generalized_advantages(rewards, values, next_values, batch.terminated,
                                        batch.truncated, config.discount, config.gae_lambda)
    if config.value_target == "lambda_return":
      returns = advantages + values
  if config.normalize_advantages:
    advantages = losses.normalize(advantages)
  done = jnp.logical_or(batch.terminated, batch.truncated)
  reset = jnp.concatenate([jnp.zeros_like(done[:1]), done[:-1]], axis=0)
  return UpdateData(obs, batch.raw_action, batch.policy, jax.lax.stop_gradient(advantages),
                    jax.lax.stop_gradient(returns), values, reset, batch.carry)


def _values_of_both(nets: PPONetworks, params, obs, next_obs):
  """``V(obs), V(next_obs)`` ``[T, B]`` in one pass of the value network over ``[2T, B]``
  (one network in the compiled program instead of two)."""
  steps = jnp.shape(jax.tree.leaves(obs)[0])[0]
  both = jax.tree.map(lambda a, b: jnp.concatenate([a, b], axis=0), obs, next_obs)
  values = nets.value(params, both)
  return values[:steps], values[steps:]


def to_sequences(data: UpdateData, length: int) -> UpdateData:
  """``[T, B, ...] -> [S, L, ...]`` with ``S = B * T / L`` sequences of ``L = length`` steps;
  the carry keeps only each sequence's first step, ``[S, ...]``."""

  def cut(x):
    steps, batch = x.shape[:2]
    x = x.reshape((steps // length, length, batch) + x.shape[2:])
    x = jnp.moveaxis(x, 2, 0)  # [B, T/L, L, ...]
    return x.reshape((batch * (steps // length), length) + x.shape[3:])

  sequences = jax.tree.map(cut, data._replace(carry=()))
  starts = jax.tree.map(lambda c: cut(c)[:, 0], data.carry)
  return sequences._replace(carry=starts)


def sequence_loss(config: PPOConfig, nets: PPONetworks, params, penalty, data: UpdateData):
  """Loss on ``M`` sequences ``[M, L]`` (run time-major through the policy).

  One loss, one gradient over all parameters: with a shared torso its gradient sums the
  policy's, ``value_coef`` times the value's and the entropy's, and ``max_grad_norm`` clips
  the global norm of everything (as SB3 and CleanRL do)."""
  time_major = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), data._replace(carry=()))
  policy, values = nets.unroll_with_values(params, data.carry, time_major.obs,
                                           time_major.reset)
  return losses.ppo_loss(policy, time_major.old_policy, time_major.raw_action,
                         time_major.advantages, values, time_major.returns,
                         time_major.old_values, penalty, config)


def sequences_kl(nets: PPONetworks, params, data: UpdateData) -> jax.Array:
  """``KL(old || new)`` per step ``[L, S]`` of all sequences under ``params``."""
  time_major = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), data._replace(carry=()))
  policy = nets.unroll(params["policy"], data.carry, time_major.obs, time_major.reset)
  return time_major.old_policy.kl(policy)


def flat_step(optimizer: optax.GradientTransformation, grads, opt_state, params):
  """One optimizer step on all parameters as ONE vector; returns ``(params, opt_state,
  gradient norm)`` with the trees shaped as given.

  The same step as ``optimizer.update`` per leaf for element-wise optimizers (Adam, global
  norm clipping), but a dozen leaves' worth of small kernels becomes a few: measured, a
  third of the optimizer's compile time. Above ``measured.FLAT_STEP_MAX_PARAMS`` the copies
  into and out of the vector cost more than the kernels they save, so the step runs per leaf:
  measured on the 'same'-padded Nature CNN (4.0M parameters), 63 ms flat against 9 ms
  per leaf.
  """
  if sum(x.size for x in jax.tree.leaves(params)) > measured.FLAT_STEP_MAX_PARAMS:
    updates, opt_state = optimizer.update(grads, opt_state, params)
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(grads)))
    return optax.apply_updates(params, updates), opt_state, norm
  flat_params, unravel = ravel_pytree(params)
  flat_grads = ravel_pytree(grads)[0]
  like_params = lambda x: jax.tree.structure(x) == jax.tree.structure(params)
  ravel = lambda x: ravel_pytree(x)[0] if like_params(x) else x
  flat_state = jax.tree.map(ravel, opt_state, is_leaf=like_params)
  updates, flat_state = optimizer.update(flat_grads, flat_state, flat_params)
  opt_state = jax.tree.map(lambda new, old: unravel(new) if like_params(old) else new,
                           flat_state, opt_state, is_leaf=like_params)
  grad_norm = jnp.sqrt(jnp.sum(jnp.square(flat_grads)))
  return unravel(flat_params + updates), opt_state, grad_norm


def minibatch_gradients(config: PPOConfig, nets: PPONetworks, penalty, params,
                        batch: UpdateData):
  """``(gradients, metrics)`` of the loss on a minibatch of sequences (or an equal share of
  one: with the clip objective every term is a mean, so the shares' mean is the whole's)."""
  grad_fn = jax.value_and_grad(
      lambda params: sequence_loss(config, nets, params, penalty, batch), has_aux=True)
  (_, metrics), grads = grad_fn(params)
  return grads, metrics


def apply_gradients(config: PPOConfig, info: SpaceInfo, carry, grads, metrics):
  """One Adam step; ``carry = (params, opt_state)``."""
  params, opt_state = carry
  params, opt_state, grad_norm = flat_step(_optimizer(config, info), grads, opt_state, params)
  return (params, opt_state), dict(metrics, grad_norm=grad_norm)


def epoch_batches(config: PPOConfig, info: SpaceInfo, sequences: UpdateData, key):
  """One epoch's minibatches ``[M, S / M, ...]``: the sequences shuffled by ``key``."""
  num_minibatches = _num_minibatches(config, info)
  if num_minibatches == 1:  # one full batch: its order does not matter
    return jax.tree.map(lambda x: x[None], sequences)
  num_sequences = jax.tree.leaves(sequences)[0].shape[0]
  order = shuffle.permutation(key, num_sequences)
  split = lambda x: x[order].reshape(
      (num_minibatches, num_sequences // num_minibatches) + x.shape[1:])
  return jax.tree.map(split, sequences)
