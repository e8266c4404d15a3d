"""TRPO (Schulman et al. 2015) as a ``Model``: pure functions over one state pytree
(``pg_model.PGState``).

  act     normalize obs -> policy step (carry) -> sample (or mode) -> rescale/clip for the env
  store   write the transition into the ``[T, B]`` rollout; update the normalizers
  update  baseline values before the update -> returns / GAE advantages -> the surrogate
          ``L(theta) = mean(pi_theta(a|s) / pi_old(a|s) * A) + entropy_coef * H`` with
          ``pi_old`` the policy before the update (recomputed on the batch, so observation
          normalizer drift during the rollout does not bias the trust region) -> one natural
          gradient step with line search (``optim.natural_gradient_step``) -> the 'states'
          baseline's own Adam passes

``period = rollout_length``; a batch is ``rollout_length * num_envs`` timesteps.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from batchrl.agents.core import Model
from batchrl.agents.policy_gradient import model as pg_model
from batchrl.agents.policy_gradient.model import Batch, PGState
from batchrl.agents.policy_gradient.networks import PGNetworks, make_networks
from batchrl.agents.trpo import optim
from batchrl.agents.trpo.config import TRPOConfig
from batchrl.specs import EnvSpec


def make_trpo(config: TRPOConfig | None = None) -> Model:
  """TRPO as a ``Model``; ``period = config.rollout_length``."""
  config = TRPOConfig() if config is None else config
  if not isinstance(config, TRPOConfig):
    raise TypeError(f"make_trpo takes a TRPOConfig, got {type(config).__name__}.")
  return pg_model.make_model(config, "trpo", init, update)


def init(config: TRPOConfig, key: jax.Array, spec: EnvSpec) -> PGState:
  return pg_model.init_state(config, key, spec, "TRPOConfig", None)


def surrogate_and_kl(config: TRPOConfig, nets: PGNetworks, policy_params, batch: Batch):
  """``(objective, kl_fn, flat_params, unravel)`` over flat policy parameters ``[P]``.

  ``objective(theta)`` is the surrogate (to maximize) and ``kl_fn(theta)`` the mean
  ``KL(pi_old || pi_theta)``, both on the whole ``[T, B]`` batch, with ``pi_old`` the
  policy of ``policy_params`` held fixed.
  """
  flat, unravel = ravel_pytree(policy_params)

  def dist(theta):
    return nets.unroll(unravel(theta), batch.carry, batch.obs, batch.reset)[0]

  old = jax.lax.stop_gradient(dist(flat))
  old_log_prob = old.log_prob(batch.raw_action)

  def objective(theta):
    new = dist(theta)
    ratio = jnp.exp(new.log_prob(batch.raw_action) - old_log_prob)
    surrogate = jnp.mean(ratio * batch.advantages)
    return surrogate + config.entropy_coef * jnp.mean(new.entropy())

  def kl_fn(theta):
    return jnp.mean(old.kl(dist(theta)))

  return objective, kl_fn, flat, unravel


def policy_step(config: TRPOConfig, nets: PGNetworks, policy_params, batch: Batch):
  """The natural-gradient step with line search; ``(new policy params, metrics)``."""
  objective, kl_fn, flat, unravel = surrogate_and_kl(config, nets, policy_params, batch)
  step = optim.natural_gradient_step(
      objective, kl_fn, flat, max_kl=config.max_kl_divergence,
      cg_iterations=config.cg_iterations, cg_damping=config.cg_damping,
      line_search_steps=config.line_search_steps,
      accept_ratio=config.line_search_accept_ratio, shrink=config.line_search_shrink)
  new_params = unravel(step.params)
  entropy = jnp.mean(nets.unroll(new_params, batch.carry, batch.obs, batch.reset)[0]
                     .entropy())
  return new_params, dict(step.metrics, entropy=entropy)


def update(config: TRPOConfig, state: PGState) -> tuple[PGState, dict]:
  """One trust-region step on the stored batch, then the baseline; the rollout empties."""
  nets = make_networks(config, state.info)
  batch = pg_model.prepare(config, nets, state)
  params = dict(state.params)
  params["policy"], metrics = policy_step(config, nets, params["policy"], batch)
  key, baseline_key = jax.random.split(state.key)
  baseline_opt = state.baseline_opt_state
  if config.baseline_mode == "states":
    params["baseline"], baseline_opt, metrics["baseline_loss"] = pg_model.train_baseline(
        config, nets, params["baseline"], baseline_opt, batch.obs, batch.targets,
        baseline_key)
  else:
    metrics["baseline_loss"] = jnp.float32(0.0)
  metrics.update(pg_model.batch_metrics(batch))
  state = state._replace(params=params, baseline_opt_state=baseline_opt, key=key,
                         step=jnp.int32(0), num_updates=state.num_updates + 1)
  return state, metrics
