"""The ``vpg`` agent type of ``batchrl.Agent.create`` and JSON agent specs.

TensorForce keys (0.3 names first, later ones after) and what they become in ``VPGConfig``:

==============================  ==========================================================
key                             meaning
==============================  ==========================================================
``batch_size``                  timesteps per update, summed over the parallel streams
                                (``rollout_length = batch_size / parallel_interactions``)
``keep_last``                   accepted (true or false) and without effect: a batch always
                                keeps the observation after its last step and bootstraps
                                from it, which is what keep_last was for
``baseline``                    ``'mlp'`` / ``'linear'`` / ``'cnn'`` / ``'auto'``, ``{'type':
                                'mlp', 'sizes': [..]}``, ``{'type': 'cnn', 'conv_sizes': [..],
                                'dense_sizes': [..]}``, ``{'type': 'network', 'network':
                                spec}`` or a network spec: the 'states' baseline's network
                                (giving it alone means ``baseline_mode='states'``; ``None``
                                means no baseline)
``baseline_mode``               ``None`` / ``'states'`` / ``'network'`` (a value head on the
                                policy's network, trained with it: ``baseline_coef``)
``baseline_optimizer``          ``{'type': 'adam', 'learning_rate': x}`` or ``{'type':
                                'multi_step', 'optimizer': {...}, 'num_steps': n}`` ->
                                ``baseline_learning_rate`` / ``baseline_steps``
``gae_rewards``, ``gae_lambda``  GAE on (with ``gae_lambda``, default 0.97) or off
                                (discounted returns minus the baseline)
``normalize_rewards``           standardize the advantages over each batch
``discount``                    reward discount
``learning_rate``,              the policy's Adam step size (``optimizer`` = ``'adam'`` or
``optimizer``                   ``{'type': 'adam', 'learning_rate': x}``)
``entropy_regularization``      entropy bonus weight (``entropy_coef``)
==============================  ==========================================================

Besides these, every ``VPGConfig`` field but ``network``/``policy_layers`` (the network is
``Agent.create``'s ``network=``) is a valid key.
"""
from __future__ import annotations

from batchrl.agents import pg_common
from batchrl.agents.core import Model
from batchrl.agents.registry import IGNORED_KEYS, AgentType, BuildContext, check_keys
from batchrl.configs.base import ConfigError

# Object-API defaults (VPGConfig's own stay for named configs).
VPG_DEFAULTS = dict(pg_common.API_DEFAULTS, learning_rate=1e-3)
VPG_KEYS = ("learning_rate", "optimizer", "step_optimizer")


def vpg_keys() -> tuple[str, ...]:
  from batchrl.agents.vpg.config import VPGConfig
  return tuple(sorted(pg_common.own_keys(VPGConfig) | set(pg_common.TF_KEYS)
                      | set(VPG_KEYS)))


def vpg_config(kwargs: dict, context: BuildContext):
  """The VPGConfig of ``Agent.create(agent='vpg', **kwargs)``."""
  from batchrl.agents.vpg.config import VPGConfig
  kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_KEYS}
  check_keys(kwargs, vpg_keys(), "vpg")
  values = dict(VPG_DEFAULTS)
  optimizers = [k for k in ("optimizer", "step_optimizer") if k in kwargs]
  if len(optimizers) > 1:
    raise ConfigError("optimizer and step_optimizer mean the same thing; give one of them.")
  for key in optimizers:
    rate = pg_common.adam_learning_rate(kwargs.pop(key), key)
    if rate is not None:
      values["learning_rate"] = rate
  pg_common.shared_tf_keys(kwargs, values, context.num_streams)
  return pg_common.build_config(VPGConfig, kwargs, values, context.network)


def build(kwargs: dict, context: BuildContext) -> Model:
  from batchrl.agents.vpg.agent import make_vpg
  return make_vpg(vpg_config(kwargs, context))


AGENT_TYPES = [AgentType("vpg", "Vanilla policy gradient (REINFORCE) with a baseline",
                         build, vpg_keys())]
