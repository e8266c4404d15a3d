"""The ``trpo`` agent type of ``batchrl.Agent.create`` and JSON agent specs.

TensorForce keys (0.3 names first, later ones after) and what they become in ``TRPOConfig``:

==============================  ==========================================================
key                             meaning
==============================  ==========================================================
``batch_size``                  timesteps per update, summed over the parallel streams
                                (``rollout_length = batch_size / parallel_interactions``)
``keep_last``                   accepted (true or false) and without effect: a batch always
                                keeps the observation after its last step and bootstraps
                                from it, which is what keep_last was for
``baseline``, ``baseline_mode``  as for ``vpg`` (``batchrl.agents.vpg.keys``), but
                                ``baseline_mode='network'`` is refused: TRPO trains its
                                baseline apart from the policy
``baseline_optimizer``          the baseline's Adam (and ``num_steps`` passes)
``gae_rewards``, ``gae_lambda``  GAE on (default 0.97) or off
``normalize_rewards``           standardize the advantages over each batch
``discount``                    reward discount
``max_kl_divergence``           the trust region: largest mean KL of one update
``cg_iterations``               conjugate gradient iterations
``cg_damping``                  damping of the Fisher matrix in conjugate gradient
``line_search_steps``           most candidates of the backtracking line search
``learning_rate``,              TensorForce 0.3 lists them for TRPO; TRPO's policy step
``optimizer``                   has no learning rate, so they set the baseline's Adam
                                (``optimizer`` = ``'adam'`` / ``{'type': 'adam',
                                'learning_rate': x}``). ``{'type': 'natural_gradient',
                                'learning_rate': x}`` (0.5+) sets ``max_kl_divergence``
``entropy_regularization``      entropy bonus weight in the surrogate (``entropy_coef``)
==============================  ==========================================================

Besides these, every ``TRPOConfig`` field but ``network``/``policy_layers`` (the network is
``Agent.create``'s ``network=``) is a valid key.
"""
from __future__ import annotations

from batchrl.agents.family import IGNORED_KEYS, BuildContext, adam_learning_rate, check_keys
from batchrl.agents.policy_gradient import keys as pg_keys
from batchrl.agents.trpo.config import TRPOConfig
from batchrl.configclass import ConfigError

TRPO_DEFAULTS = dict(pg_keys.API_DEFAULTS, baseline_steps=10, baseline_minibatches=1)
TRPO_KEYS = ("learning_rate", "optimizer")


def trpo_keys() -> tuple[str, ...]:
  return tuple(sorted(pg_keys.own_keys(TRPOConfig) | set(pg_keys.TF_KEYS)
                      | set(TRPO_KEYS)))


def _optimizer(spec, optimized: dict) -> None:
  if isinstance(spec, dict) and spec.get("type") == "natural_gradient":
    unknown = set(spec) - {"type", "learning_rate"}
    if unknown:
      raise ConfigError(f"unknown optimizer keys {sorted(unknown)}; valid: type, "
                        "learning_rate (the KL bound).")
    if "learning_rate" in spec:
      optimized["max_kl_divergence"] = spec["learning_rate"]
    return
  rate = adam_learning_rate(spec, "optimizer")
  if rate is not None:
    optimized["baseline_learning_rate"] = rate


def trpo_config(kwargs: dict, context: BuildContext):
  """The TRPOConfig of ``Agent.create(agent='trpo', **kwargs)``."""
  kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_KEYS}
  check_keys(kwargs, trpo_keys(), "trpo")
  values, optimized = dict(TRPO_DEFAULTS), {}
  if "optimizer" in kwargs:
    _optimizer(kwargs.pop("optimizer"), optimized)
  if "learning_rate" in kwargs:
    rate = kwargs.pop("learning_rate")
    if optimized.get("baseline_learning_rate", rate) != rate:
      raise ConfigError("learning_rate (the baseline's, for trpo) is given twice with "
                        "different values (also in optimizer); give it once.")
    values["baseline_learning_rate"] = rate
  pg_keys.shared_tf_keys(kwargs, values, context.num_streams, optimized)
  return pg_keys.build_config(TRPOConfig, kwargs, values, optimized, context.network)
