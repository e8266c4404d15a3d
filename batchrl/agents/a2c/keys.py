"""The ``a2c`` and ``ac`` agent types of ``batchrl.Agent.create`` and JSON agent specs.

TensorForce 0.6 built both from the same parts: a policy, a separate critic network with
its own loss, and returns estimated over ``horizon`` rewards then bootstrapped from the
critic. They differ in one flag: ``a2c`` weights the policy gradient by the *advantage*
(return minus the critic's ``V(s)``), ``ac`` by the bootstrapped return itself. Here they
are one family, ``A2CConfig.advantage`` True or False (as ``dqn``/``ddqn`` share DQN's).

==============================  ==========================================================
key                             meaning
==============================  ==========================================================
``batch_size``                  timesteps per update, summed over the parallel streams
                                (``rollout_length = batch_size / parallel_interactions``)
``update_frequency``            accepted only equal to ``batch_size`` (an update per batch)
``learning_rate``               step size of the policy's optimizer (default 1e-3)
``optimizer``                   ``'adam'`` (TensorForce's, the default) or ``'rmsprop'``, or
                                ``{'type': 'adam' | 'rmsprop', 'learning_rate': x}``
``horizon``                     rewards summed before the critic's estimate, minus one:
                                ``G = r_t + ... + d^h r_(t+h) + d^(h+1) V(s_(t+h+1))``
                                (``n_step = horizon + 1``; default 0: one-step TD returns)
``discount``                    reward discount
``estimate_terminals``          bootstrap from the critic at true episode ends as well
(``estimate_terminal``)         (default false: the value after a true end is 0)
``critic_network``              the critic, a network of its own (``baseline_mode=
                                'states'``): ``'auto'`` (default), ``'mlp'``, ``'linear'``,
                                ``{'type': 'mlp', 'sizes': [..]}`` or a network spec
``critic_optimizer``            a float (default 1.0): the weight of the critic's loss,
                                learnt in the policy's optimizer step (``critic_update=
                                'joint'``, ``critic_coef``); or ``{'type': 'adam',
                                'learning_rate': x}`` / ``{'type': 'multi_step',
                                'optimizer': {...}, 'num_steps': n}``: its own Adam
                                (``critic_update='separate'``)
``state_action_value``          only false: the critic estimates state values
``use_beta_distribution``       Beta policies for bounded float actions
                                (``float_distribution``)
``entropy_regularization``      entropy bonus weight (``entropy_coef``)
==============================  ==========================================================

Besides these, every ``A2CConfig`` field but ``network``/``policy_layers`` (the network is
``Agent.create``'s ``network=``) and ``advantage`` (the agent type says it) is a valid key;
``gae_lambda`` replaces the n-step returns by GAE.
"""
from __future__ import annotations

import dataclasses

from batchrl.agents.a2c.config import A2CConfig
from batchrl.agents.family import IGNORED_KEYS, BuildContext, check_keys, take_aliases
from batchrl.agents.policy_gradient import keys as pg_keys
from batchrl.configclass import ConfigError

# Object-API defaults: TensorForce 0.6's (Adam, one-step TD returns, a separate 'auto'
# critic learnt in the policy's step with weight 1), but a learning rate of 1e-3.
A2C_DEFAULTS = dict(
    discount=0.99, gae_lambda=None, value_target="return", normalize_rewards=False,
    baseline_mode="states", baseline_network="auto", optimizer="adam", learning_rate=1e-3,
    n_step=1, critic_update="joint", critic_coef=1.0)
TF_KEYS = ("batch_size", "update_frequency", "horizon", "estimate_terminal",
           "critic_network", "critic_optimizer", "state_action_value",
           "use_beta_distribution", "entropy_regularization")
OPTIMIZERS = ("adam", "rmsprop")


def a2c_keys() -> tuple[str, ...]:
  return tuple(sorted((pg_keys.own_keys(A2CConfig) - {"advantage"}) | set(TF_KEYS)))


def a2c_config(kwargs: dict, context: BuildContext, agent: str = "a2c") -> A2CConfig:
  """The A2CConfig of ``Agent.create(agent='a2c' | 'ac', **kwargs)``."""
  kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_KEYS}
  check_keys(kwargs, a2c_keys(), agent)
  values, optimized = dict(A2C_DEFAULTS, advantage=agent == "a2c"), {}
  frequency = kwargs.pop("update_frequency", None)
  if frequency is not None and frequency != kwargs.get("batch_size", frequency):
    raise ConfigError(f"update_frequency ({frequency!r}) must equal batch_size "
                      f"({kwargs.get('batch_size')!r}): {agent} updates once per batch.")
  _horizon(kwargs)
  terminals = take_aliases(kwargs, "estimate_terminals", ("estimate_terminal",))
  if terminals is not dataclasses.MISSING:
    kwargs["estimate_terminals"] = terminals
  _critic(kwargs, agent)
  if kwargs.pop("state_action_value", False) is not False:
    raise ConfigError(f"state_action_value must be false for {agent}: the critic estimates "
                      "state values V(s) (state-action critics are not offered).")
  if "use_beta_distribution" in kwargs:
    beta = kwargs.pop("use_beta_distribution")
    if not isinstance(beta, bool):
      raise ConfigError(f"use_beta_distribution must be true or false, got {beta!r}.")
    values["float_distribution"] = "beta" if beta else "gaussian"
  if isinstance(kwargs.get("optimizer"), dict):
    optimized.update(_optimizer(kwargs.pop("optimizer")))
  elif "optimizer" in kwargs and kwargs["optimizer"] not in OPTIMIZERS:
    raise ConfigError(f"optimizer must be one of {OPTIMIZERS} or {{'type': 'adam', "
                      f"'learning_rate': x}}, got {kwargs['optimizer']!r}.")
  pg_keys.shared_tf_keys(kwargs, values, context.num_streams, optimized)
  return pg_keys.build_config(A2CConfig, kwargs, values, optimized, context.network)


def _horizon(kwargs: dict) -> None:
  """``horizon`` h (TensorForce) -> ``n_step = h + 1``."""
  if "horizon" not in kwargs:
    return
  horizon = kwargs.pop("horizon")
  if not isinstance(horizon, int) or isinstance(horizon, bool) or horizon < 0:
    raise ConfigError(f"horizon must be an int >= 0 (rewards before the critic's estimate, "
                      f"minus one), got {horizon!r}.")
  if "n_step" in kwargs and kwargs["n_step"] != horizon + 1:
    raise ConfigError(f"horizon {horizon} means n_step {horizon + 1}, but n_step "
                      f"{kwargs['n_step']!r} is given too; give one of them.")
  kwargs["n_step"] = horizon + 1


def _critic(kwargs: dict, agent: str) -> None:
  """``critic_network`` -> the shared ``baseline`` key; ``critic_optimizer`` -> joint weight
  or the shared ``baseline_optimizer`` key."""
  if "critic_network" in kwargs:
    if kwargs.get("baseline_mode", "states") != "states":
      raise ConfigError(f"critic_network is a critic of its own (baseline_mode='states'), "
                        f"but baseline_mode={kwargs['baseline_mode']!r} is given; drop one.")
    critic = kwargs.pop("critic_network")
    if critic is None:
      raise ConfigError(f"critic_network must be a network ('auto', 'mlp', a spec), not "
                        f"None: {agent} needs its critic.")
    kwargs["baseline"] = critic
  if "critic_optimizer" not in kwargs:
    return
  spec = kwargs.pop("critic_optimizer")
  if isinstance(spec, (int, float)) and not isinstance(spec, bool):
    if "critic_coef" in kwargs and kwargs["critic_coef"] != spec:
      raise ConfigError("critic_optimizer (a weight) and critic_coef mean the same thing; "
                        "give one of them.")
    kwargs.setdefault("critic_update", "joint")
    kwargs["critic_coef"] = spec
    return
  if kwargs.setdefault("critic_update", "separate") != "separate":
    raise ConfigError(f"critic_optimizer {spec!r} is an optimizer of the critic's own, but "
                      f"critic_update={kwargs['critic_update']!r}; drop one.")
  kwargs["baseline_optimizer"] = spec


def _optimizer(spec: dict) -> dict:
  """``{'type': 'adam' | 'rmsprop', 'learning_rate': x}`` -> config values."""
  unknown = sorted(set(spec) - {"type", "learning_rate"})
  if unknown:
    raise ConfigError(f"unknown optimizer keys {unknown}; valid: type, learning_rate.")
  kind = spec.get("type", "adam")
  if kind not in OPTIMIZERS:
    raise ConfigError(f"optimizer type must be one of {OPTIMIZERS}, got {kind!r}.")
  values = {"optimizer": kind}
  if "learning_rate" in spec:
    values["learning_rate"] = spec["learning_rate"]
  return values
