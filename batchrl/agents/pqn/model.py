"""PQN (Gallici et al., ICLR 2025) as a ``Model``: Q-learning over many parallel envs with
no replay memory and no target network, kept stable by LayerNorm in the Q-network and
Q(lambda) targets over short rollouts.

Shapes: ``B`` envs, ``T = config.rollout_length``, ``N = T * B`` rows of an update, ``M``
minibatches. Top to bottom:

  act     Q(obs) -> greedy among allowed actions -> epsilon-greedy (unless deterministic),
          epsilon annealed linearly over the first ``epsilon_decay`` of ``total_updates``
  store   write obs, action indices, reward, terminated, truncated and next_obs into the
          ``[T, B]`` rollout (next_obs is the final observation where an episode ended)
  update  max_a Q(next_obs) under the parameters before the update -> Q(lambda) targets
          backwards over the rollout (fixed for the whole update) -> ``update_epochs``
          shuffled passes of ``M`` minibatch steps of 0.5 (Q(s, a) - target)^2 -> RAdam/Adam
          after global-norm clipping

Exploration lives in ``act`` and counts updates (``num_updates``, checkpointed), so every
driver (fused, host envs, the object API, Ray runners acting with the current parameters)
explores alike.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from batchrl.agents import spaces
from batchrl.agents.core import Model, Transition
from batchrl.agents.pqn import losses
from batchrl.agents.pqn.config import PQNConfig, network_layers, num_minibatches_for
from batchrl.agents.pqn.networks import QNetworks, check_discrete, make_networks
from batchrl.agents.replay.q_networks import action_indices, env_actions, zero_indices
from batchrl.agents.spaces import SpaceInfo, space_info
from batchrl.ops.returns import lambda_returns
from batchrl.specs import EnvSpec

# Observation normalization (``normalize_observations``) with PPOConfig's default clip and
# epsilon: the same statistics code, the same numbers.
OBSERVATION_CLIP = 5.0
NORMALIZER_EPSILON = 1e-4


class Rollout(NamedTuple):
  """One rollout, ``[T, B, ...]``; observations as ``spaces.float_obs`` gives them."""

  obs: Any
  action: dict  # {component: int32[T, B, *S]} indices
  reward: jax.Array  # [T, B]
  terminated: jax.Array  # [T, B] bool
  truncated: jax.Array  # [T, B] bool
  next_obs: Any


class PQNState(NamedTuple):
  """Everything PQN learns and remembers; a pytree (checkpointable, vmappable)."""

  params: Any
  opt_state: Any
  obs_stats: Any  # running statistics of float observations (() when not normalizing)
  buffer: Rollout
  step: jax.Array  # [] int32 stores in the current rollout
  num_updates: jax.Array  # [] int32
  num_steps: jax.Array  # [] int32 environment steps stored (summed over envs)
  key: jax.Array  # minibatch shuffling
  info: SpaceInfo


def make_pqn(config: PQNConfig | None = None) -> Model:
  """PQN as a ``Model``; ``period = rollout_length``, on-policy (no replay)."""
  config = PQNConfig() if config is None else config
  if not isinstance(config, PQNConfig):
    raise TypeError(f"make_pqn takes a PQNConfig, got {type(config).__name__}.")
  return Model(
      init=lambda key, spec: init(config, key, spec),
      act=lambda state, obs, key, deterministic=False: act(config, state, obs, key,
                                                           deterministic),
      store=lambda state, transition: store(config, state, transition),
      update=lambda state: update(config, state),
      ready=lambda state: state.step >= config.rollout_length,
      period=config.rollout_length, name="pqn",
      summarize=lambda state: summarize(config, state),
      scratch=("buffer",))  # refilled from index 0 after each update


# ---------------------------------------------------------------------------- pieces


def networks(config: PQNConfig, info: SpaceInfo) -> QNetworks:
  return make_networks(network_layers(config), config.layer_norm, info)


def learning_rate(config: PQNConfig, info: SpaceInfo):
  """The step size per gradient step: constant, or linear to 0 over the run's steps."""
  if not config.anneal_learning_rate:
    return optax.constant_schedule(config.learning_rate)
  steps = config.total_updates * config.update_epochs * num_minibatches_for(
      config, info.num_envs)
  return optax.linear_schedule(config.learning_rate, 0.0, steps)


def optimizer(config: PQNConfig, info: SpaceInfo) -> optax.GradientTransformation:
  clip = ([optax.clip_by_global_norm(config.max_grad_norm)]
          if config.max_grad_norm is not None else [])
  make = optax.radam if config.optimizer == "radam" else optax.adam
  return optax.chain(*clip, make(learning_rate(config, info), eps=config.adam_epsilon))


def epsilon(config: PQNConfig, num_updates) -> jax.Array:
  return losses.linear_epsilon(config.epsilon_start, config.epsilon_end,
                               config.epsilon_decay * config.total_updates, num_updates)


def normalized(config: PQNConfig, obs_stats, obs):
  if not config.normalize_observations:
    return obs
  return spaces.normalize_obs_tree(obs_stats, obs, OBSERVATION_CLIP, NORMALIZER_EPSILON)


def init(config: PQNConfig, key: jax.Array, spec: EnvSpec) -> PQNState:
  """Fresh parameters and optimizer, an empty rollout. Continuous actions and minibatches
  that do not divide the rollout are errors here, before anything runs."""
  check_discrete(spec.action_space)
  info = space_info(spec, "tree")
  num_minibatches_for(config, info.num_envs)
  nets = networks(config, info)
  params_key, state_key = jax.random.split(key)
  params = nets.init(params_key)
  steps, envs = config.rollout_length, info.num_envs
  obs = spaces.zero_obs(info, (steps, envs))
  flags = jnp.zeros((steps, envs), jnp.bool_)
  buffer = Rollout(obs, zero_indices(nets.components, (steps, envs)),
                   jnp.zeros((steps, envs), jnp.float32), flags, flags, obs)
  stats = spaces.obs_stats_init(info) if config.normalize_observations else ()
  zero = jnp.int32(0)
  return PQNState(params, optimizer(config, info).init(params), stats, buffer, zero, zero,
                  zero, state_key, info)


# ------------------------------------------------------------------------------- act


def act(config: PQNConfig, state: PQNState, obs, key: jax.Array, deterministic: bool = False):
  """``obs[B, ...] -> (action[B, ...], {})``: greedy among allowed actions, epsilon-greedy
  unless ``deterministic``."""
  info = state.info
  nets = networks(config, info)
  flat = spaces.float_obs(info, obs)
  q = nets.q_values(state.params, nets.inputs(normalized(config, state.obs_stats, flat)))
  masks = nets.masks(flat)
  if deterministic:
    indices = {c.name: losses.greedy(q[c.name], masks[c.name]) for c in nets.components}
  else:
    eps = epsilon(config, state.num_updates)
    keys = jax.random.split(key, len(nets.components))
    indices = {c.name: losses.epsilon_greedy(k, q[c.name], masks[c.name], eps)
               for k, c in zip(keys, nets.components)}
  return env_actions(info, nets.components, indices), {}


# ----------------------------------------------------------------------------- store


def store(config: PQNConfig, state: PQNState, transition: Transition) -> PQNState:
  """Writes one ``[B]`` transition at ``state.step`` (and moves the statistics)."""
  info = state.info
  nets = networks(config, info)
  obs = spaces.float_obs(info, transition.obs)
  row = Rollout(obs, action_indices(info, nets.components, transition.action),
                jnp.asarray(transition.reward, jnp.float32),
                jnp.asarray(transition.terminated, jnp.bool_),
                jnp.asarray(transition.truncated, jnp.bool_),
                spaces.float_obs(info, transition.next_obs))
  index = state.step % config.rollout_length
  buffer = jax.tree.map(
      lambda column, x: jax.lax.dynamic_update_index_in_dim(column, x.astype(column.dtype),
                                                            index, 0),
      state.buffer, row)
  stats = state.obs_stats
  if config.normalize_observations:
    stats = spaces.obs_stats_update(stats, obs)
  return state._replace(buffer=buffer, obs_stats=stats, step=state.step + 1,
                        num_steps=state.num_steps + info.num_envs)


# ---------------------------------------------------------------------------- update


def rows(tree):
  """``[T, B, ...] -> [T * B, ...]``."""
  return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), tree)


def targets(config: PQNConfig, nets: QNetworks, state: PQNState) -> dict:
  """Q(lambda) targets ``{name: [T, B, *S]}`` of the stored rollout under the current
  parameters (greedy values of the allowed next actions)."""
  buffer = state.buffer
  steps, envs = buffer.reward.shape
  next_obs = rows(buffer.next_obs)
  q_next = nets.q_values(state.params,
                         nets.inputs(normalized(config, state.obs_stats, next_obs)))
  masks = nets.masks(next_obs)
  out = {}
  for c in nets.components:
    value = losses.max_allowed(q_next[c.name], masks[c.name]).reshape((steps, envs) + c.shape)
    out[c.name] = lambda_returns(config.reward_scale * buffer.reward, buffer.terminated,
                                 buffer.truncated, value, config.discount, config.td_lambda)
  return jax.lax.stop_gradient(out)


def loss_fn(nets: QNetworks, params, batch):
  """The Q-loss of a minibatch ``(inputs[R, ...], actions {name: [R, *S]}, targets {name:
  [R, *S]})``; aux: metrics."""
  inputs, actions, target = batch
  q = nets.q_values(params, inputs)
  count = jax.tree.leaves(inputs)[0].shape[0]
  taken = jnp.concatenate([losses.select(q[c.name], actions[c.name]).reshape(count, -1)
                           for c in nets.components], axis=1)
  wanted = jnp.concatenate([target[c.name].reshape(count, -1) for c in nets.components],
                           axis=1)
  loss = losses.q_loss(taken, wanted)
  return loss, {"loss": loss, "q_mean": jnp.mean(taken), "target_mean": jnp.mean(wanted),
                "td_error": jnp.mean(jnp.abs(wanted - taken))}


def update(config: PQNConfig, state: PQNState) -> tuple[PQNState, dict]:
  """``update_epochs`` shuffled passes of minibatch steps over the rollout, towards targets
  computed once before the first; the rollout is emptied (``step`` back to 0)."""
  info = state.info
  nets = networks(config, info)
  tx = optimizer(config, info)
  num_minibatches = num_minibatches_for(config, info.num_envs)
  data = (nets.inputs(normalized(config, state.obs_stats, rows(state.buffer.obs))),
          rows(state.buffer.action), rows(targets(config, nets, state)))
  total = config.rollout_length * info.num_envs
  grad_fn = jax.grad(functools.partial(loss_fn, nets), has_aux=True)

  def minibatch(carry, batch):
    params, opt_state = carry
    grads, metrics = grad_fn(params, batch)
    updates, opt_state = tx.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), dict(
        metrics, grad_norm=optax.tree.norm(grads))

  def epoch(carry, key):
    order = jax.random.permutation(key, total)
    batches = jax.tree.map(
        lambda x: x[order].reshape((num_minibatches, total // num_minibatches) + x.shape[1:]),
        data)
    return jax.lax.scan(minibatch, carry, batches)

  key, epochs_key = jax.random.split(state.key)
  (params, opt_state), metrics = jax.lax.scan(
      epoch, (state.params, state.opt_state), jax.random.split(epochs_key, config.update_epochs))
  metrics = jax.tree.map(jnp.mean, metrics)
  steps_per_update = config.update_epochs * num_minibatches
  metrics.update(epsilon=epsilon(config, state.num_updates),
                 learning_rate=learning_rate(config, info)(state.num_updates * steps_per_update))
  return state._replace(params=params, opt_state=opt_state, key=key, step=jnp.int32(0),
                        num_updates=state.num_updates + 1), metrics


def summarize(config: PQNConfig, state: PQNState) -> dict:
  """TensorBoard material: epsilon and the update count."""
  return {"scalars": {"epsilon": epsilon(config, state.num_updates),
                      "updates": state.num_updates.astype(jnp.float32)},
          "histograms": {}}
