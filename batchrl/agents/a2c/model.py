"""A2C (synchronous advantage actor-critic, Mnih et al. 2016) and TensorForce's AC as a
``Model``: pure functions over one state pytree (``pg_model.PGState``), with the rollout,
networks and critic (the 'baseline') of ``batchrl.agents.policy_gradient``.

  act     normalize obs -> policy step (carry) -> sample (or mode) -> rescale/clip for the env
  store   write the transition into the ``[T, B]`` rollout of ``B`` streams
  update  critic values before the update -> n-step returns G (or GAE) -> ONE optimizer step
          (RMSprop or Adam) on ``-mean(log pi(a|s) * w) - entropy_coef * H + critic_coef *
          0.5 * mean((G - V)^2)`` with ``w = G - V(s)`` (A2C) or ``w = G`` (AC); a critic
          with ``critic_update='separate'`` then takes its own Adam passes instead

``period = rollout_length`` (A2C's classic 5 steps per stream).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from batchrl.agents.a2c import losses
from batchrl.agents.a2c.config import A2CConfig
from batchrl.agents.core import Model
from batchrl.agents.policy_gradient import model as pg_model
from batchrl.agents.policy_gradient.model import Batch, PGState
from batchrl.agents.policy_gradient.networks import PGNetworks, make_networks
from batchrl.ops.returns import discounted_returns
from batchrl.specs import EnvSpec


def make_a2c(config: A2CConfig | None = None) -> Model:
  """A2C (or AC, ``advantage=False``) as a ``Model``; ``period = config.rollout_length``."""
  config = A2CConfig() if config is None else config
  if not isinstance(config, A2CConfig):
    raise TypeError(f"make_a2c takes an A2CConfig, got {type(config).__name__}.")
  return pg_model.make_model(config, "a2c" if config.advantage else "ac", init, update)


def optimizer(config: A2CConfig) -> optax.GradientTransformation:
  """RMSprop or Adam on the jointly trained parameters, optionally clipped and annealed."""
  rate = (optax.constant_schedule(config.learning_rate) if config.total_updates is None
          else optax.linear_schedule(config.learning_rate, 0.0, config.total_updates))
  clip = ([optax.clip_by_global_norm(config.max_grad_norm)]
          if config.max_grad_norm is not None else [])
  if config.optimizer == "rmsprop":
    step = optax.rmsprop(rate, decay=config.rmsprop_decay, eps=config.optimizer_epsilon)
  else:
    step = optax.adam(rate, eps=config.optimizer_epsilon)
  return optax.chain(*clip, step)


def joint_params(config: A2CConfig, params: dict) -> dict:
  """What the joint optimizer moves: the policy (with its value head), and a separate
  critic unless it has its own optimizer."""
  joint = config.baseline_mode == "states" and config.critic_update == "joint"
  return {key: params[key] for key in (("policy", "baseline") if joint else ("policy",))}


def init(config: A2CConfig, key: jax.Array, spec: EnvSpec) -> PGState:
  state = pg_model.init_state(config, key, spec, "A2CConfig", None)
  own_critic = config.critic_update == "separate"
  return state._replace(opt_state=optimizer(config).init(joint_params(config, state.params)),
                        baseline_opt_state=state.baseline_opt_state if own_critic else ())


def returns_fn(config: A2CConfig):
  """``returns(rewards, terminated, truncated, next_values, discount)`` for
  ``pg_model.prepare``: n-step (``n_step``) or to the rollout's end, bootstrapping at true
  ends as well with ``estimate_terminals``."""

  def returns(rewards, terminated, truncated, next_values, discount):
    if config.estimate_terminals:
      truncated = jnp.logical_or(terminated, truncated)
      terminated = jnp.zeros_like(truncated)
    if config.n_step is None:
      return discounted_returns(rewards, terminated, truncated, next_values, discount)
    return losses.n_step_returns(rewards, terminated, truncated, next_values, discount,
                                 config.n_step)

  return returns


def policy_weights(config: A2CConfig, batch: Batch) -> jax.Array:
  """``[T, B]`` what multiplies ``log pi(a|s)``: advantages (A2C) or returns (AC)."""
  if config.advantage:
    return batch.advantages  # standardized by prepare with normalize_rewards
  if config.normalize_rewards:
    return pg_model.standardize(batch.targets, mask=batch.mask)
  return batch.targets


def joint_gradient(config: A2CConfig, nets: PGNetworks, joint: dict, batch: Batch):
  """Gradient of ``losses.a2c_loss`` w.r.t. the joint parameters, and its metrics."""
  weights = policy_weights(config, batch)

  def loss_fn(params):
    dist, head_values = nets.unroll(params["policy"], batch.carry, batch.obs, batch.reset)
    if config.baseline_mode == "network":
      values = head_values
    elif "baseline" in params:
      values = nets.baseline(params["baseline"], batch.obs)
    else:
      values = None  # the critic learns on its own
    return losses.a2c_loss(dist.log_prob(batch.raw_action), dist.entropy(), weights, values,
                           batch.targets, config.entropy_coef, config.critic_coef,
                           batch.mask)

  (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(joint)
  return grads, metrics


def update(config: A2CConfig, state: PGState) -> tuple[PGState, dict]:
  """One joint step on the stored batch (then the separate critic's passes); the rollout
  empties."""
  nets = make_networks(config, state.info)
  batch = pg_model.prepare(config, nets, state, returns=returns_fn(config))
  params = dict(state.params)
  joint = joint_params(config, params)
  grads, metrics = joint_gradient(config, nets, joint, batch)
  updates, opt_state = optimizer(config).update(grads, state.opt_state, joint)
  params.update(optax.apply_updates(joint, updates))
  key, critic_key = jax.random.split(state.key)
  critic_opt = state.baseline_opt_state
  if config.critic_update == "separate":
    params["baseline"], critic_opt, metrics["baseline_loss"] = pg_model.train_baseline(
        config, nets, params["baseline"], critic_opt, batch.obs, batch.targets, critic_key)
  metrics.update(pg_model.batch_metrics(batch), grad_norm=optax.tree.norm(grads),
                 learning_rate=_learning_rate(config, state.num_updates))
  state = state._replace(params=params, opt_state=opt_state, baseline_opt_state=critic_opt,
                         key=key, step=jnp.int32(0), num_updates=state.num_updates + 1)
  return state, metrics


def _learning_rate(config: A2CConfig, num_updates: jax.Array) -> jax.Array:
  if config.total_updates is None:
    return jnp.float32(config.learning_rate)
  fraction = 1.0 - jnp.minimum(num_updates, config.total_updates) / config.total_updates
  return jnp.float32(config.learning_rate) * fraction
