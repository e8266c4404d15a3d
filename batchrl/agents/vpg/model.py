"""VPG (REINFORCE, Williams 1992 / Sutton et al. 1999) as a ``Model``: pure functions over
one state pytree (``pg_model.PGState``).

  act     normalize obs -> policy step (carry) -> sample (or mode) -> rescale/clip for the env
  store   write the transition into the ``[T, B]`` rollout; update the normalizers
  update  values of the baseline before the update -> discounted returns or GAE advantages
          (standardized with normalize_rewards) -> ONE Adam step on
          ``-mean(log pi(a|s) * A) - entropy_coef * H`` over the whole batch (plus the value
          head's loss with baseline_mode 'network') -> ``baseline_steps`` passes of the
          'states' baseline's own Adam

``period = rollout_length``; a batch is ``rollout_length * num_envs`` timesteps, or, with
``batch_unit='episodes'``, every episode finished since the last learning update once there
are ``batch_episodes`` of them: until then an update only reports (``learning`` 0), then it
learns from exactly the steps of the finished episodes and keeps each env's unfinished
episode for a later update (``batchrl.agents.policy_gradient.model``: ``finished_episodes``,
``carry_tails``).
Metrics of those updates besides the usual: ``learning``, ``episodes_used``,
``steps_used``, ``steps_carried`` (kept for a later update), ``episodes_cut`` (at
``max_episode_timesteps`` since the previous update).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from batchrl.agents.core import Model
from batchrl.agents.policy_gradient import model as pg_model
from batchrl.agents.policy_gradient.model import Batch, PGState
from batchrl.agents.policy_gradient.networks import PGNetworks, make_networks
from batchrl.agents.vpg import losses
from batchrl.agents.vpg.config import VPGConfig
from batchrl.specs import EnvSpec


def make_vpg(config: VPGConfig | None = None) -> Model:
  """VPG as a ``Model``; ``period = config.rollout_length``."""
  config = VPGConfig() if config is None else config
  if not isinstance(config, VPGConfig):
    raise TypeError(f"make_vpg takes a VPGConfig, got {type(config).__name__}.")
  return pg_model.make_model(config, "vpg", init, update)


def optimizer(config: VPGConfig) -> optax.GradientTransformation:
  """Adam on the policy (and the shared value head), optionally clipped and annealed."""
  learning_rate = (optax.constant_schedule(config.learning_rate)
                   if config.total_updates is None else
                   optax.linear_schedule(config.learning_rate, 0.0, config.total_updates))
  clip = ([optax.clip_by_global_norm(config.max_grad_norm)]
          if config.max_grad_norm is not None else [])
  return optax.chain(*clip, optax.adam(learning_rate, eps=config.adam_epsilon))


def init(config: VPGConfig, key: jax.Array, spec: EnvSpec) -> PGState:
  return pg_model.init_state(config, key, spec, "VPGConfig", optimizer(config))


def policy_gradient(config: VPGConfig, nets: PGNetworks, policy_params, batch: Batch):
  """Gradient of the VPG loss w.r.t. the policy parameters on a ``[T, B]`` batch, and the
  loss's metrics. Minus the policy part is the REINFORCE estimate
  ``mean_t,b(grad log pi(a|s) * A)``."""

  def loss_fn(params):
    dist, values = nets.unroll(params, batch.carry, batch.obs, batch.reset)
    return losses.vpg_loss(dist, batch.raw_action, batch.advantages, values, batch.targets,
                           config.entropy_coef, config.baseline_coef, batch.mask)

  (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(policy_params)
  return grads, metrics


def update(config: VPGConfig, state: PGState) -> tuple[PGState, dict]:
  """One policy step on the stored batch, then the baseline's steps; the rollout empties
  (with ``batch_unit='episodes'``: see ``update_on_episodes``)."""
  nets = make_networks(config, state.info)
  if pg_model.counts_episodes(config):
    return update_on_episodes(config, nets, state)
  batch = pg_model.prepare(config, nets, state)
  params, opt_state, baseline_opt, key, metrics = learn(config, nets, state, batch)
  state = state._replace(params=params, opt_state=opt_state, baseline_opt_state=baseline_opt,
                         key=key, step=jnp.int32(0), num_updates=state.num_updates + 1)
  return state, metrics


def update_on_episodes(config: VPGConfig, nets: PGNetworks, state: PGState
                       ) -> tuple[PGState, dict]:
  """Learns (under ``lax.cond``) once ``batch_episodes`` episodes have finished, from all
  finished ones; then each env's unfinished episode moves to the front of its column."""
  ends, finished = pg_model.finished_episodes(state)
  ready = finished >= config.batch_episodes

  def learn_now(params, opt_state, baseline_opt, key):
    batch = pg_model.prepare(config, nets, state, ends)
    step = learn(config, nets, state._replace(params=params, opt_state=opt_state,
                                              baseline_opt_state=baseline_opt, key=key), batch)
    return step[:4] + (dict(step[4], steps_used=jnp.sum(batch.mask, dtype=jnp.float32)),)

  def wait(*learned):
    metrics = jax.eval_shape(learn_now, *learned)[4]
    return learned + (jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metrics),)

  params, opt_state, baseline_opt, key, metrics = jax.lax.cond(
      ready, learn_now, wait, state.params, state.opt_state, state.baseline_opt_state,
      state.key)
  cut = state.episodes.cut
  state = pg_model.carry_tails(state, ends, ready)
  metrics.update(learning=ready.astype(jnp.float32),
                 episodes_used=jnp.where(ready, finished, 0).astype(jnp.float32),
                 steps_carried=jnp.sum(state.episodes.fill, dtype=jnp.float32),
                 episodes_cut=cut.astype(jnp.float32))
  state = state._replace(params=params, opt_state=opt_state, baseline_opt_state=baseline_opt,
                         key=key, step=jnp.int32(0),
                         num_updates=state.num_updates + ready.astype(jnp.int32))
  return state, metrics


def learn(config: VPGConfig, nets: PGNetworks, state: PGState, batch: Batch):
  """One policy step on ``batch``, then the baseline's steps: ``(params, opt_state,
  baseline_opt_state, key, metrics)``."""
  params = dict(state.params)
  grads, metrics = policy_gradient(config, nets, params["policy"], batch)
  updates, opt_state = optimizer(config).update(grads, state.opt_state, params["policy"])
  params["policy"] = optax.apply_updates(params["policy"], updates)
  key, baseline_key = jax.random.split(state.key)
  baseline_opt = state.baseline_opt_state
  if config.baseline_mode == "states":
    params["baseline"], baseline_opt, metrics["baseline_loss"] = pg_model.train_baseline(
        config, nets, params["baseline"], baseline_opt, batch.obs, batch.targets,
        baseline_key, batch.mask)
  elif config.baseline_mode == "none":
    metrics["baseline_loss"] = jnp.float32(0.0)
  metrics.update(pg_model.batch_metrics(batch), grad_norm=optax.tree.norm(grads),
                 learning_rate=_learning_rate(config, state.num_updates))
  return params, opt_state, baseline_opt, key, metrics


def _learning_rate(config: VPGConfig, num_updates: jax.Array) -> jax.Array:
  if config.total_updates is None:
    return jnp.float32(config.learning_rate)
  fraction = 1.0 - jnp.minimum(num_updates, config.total_updates) / config.total_updates
  return jnp.float32(config.learning_rate) * fraction
