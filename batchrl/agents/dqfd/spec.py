"""The ``dqfd`` agent type of ``batchrl.Agent.create``, and the object-API methods it needs.

Keys: every ``dqn`` key (``batchrl.agents.dqn.spec``: ``memory``, ``memory_capacity``,
``batch_size``, ``update_frequency``, ``first_update``, ``repeat_update``,
``target_sync_frequency`` / ``target_update_frequency``, ``target_update_weight`` /
``update_target_weight``, ``huber_loss`` / ``clip_loss``, ``double_dqn`` (True by default
here), ``n_step``, ``dueling``, ``discount``, ``optimizer``, ``actions_exploration``), plus
TensorForce 0.3's DQFD keys and ``DQFDConfig``'s own:

==================================  ============================================================
key                                 meaning
==================================  ============================================================
``demo_memory_capacity``            demonstration transitions the demonstration memory holds
``demo_sampling_ratio``             share of each online batch drawn from the demonstrations
``expert_margin``                   margin of the large-margin loss
``supervised_weight``               weight of the large-margin loss
``nstep_weight``                    weight of the n-step TD loss (with ``n_step`` > 1)
``l2_regularization``               weight of the L2 penalty on the weights
``pretrain_target_update_frequency``  pretraining gradient steps between target updates
``demonstrations``, ``pretrain_steps``  demonstrations to import at creation (an .npz path or a
                                    built-in source) and pretraining steps made then
==================================  ============================================================

Object API (for the lead to add to ``batchrl.Agent``; each takes and returns the model
state, ``AgentState.model``, a ``batchrl.agents.dqfd.DQFDState``)::

    agent.import_demonstrations(demonstrations)
        -> batchrl.agents.dqfd.import_demonstrations(model_state, demonstrations)
        demonstrations: a list of dicts (state, action, reward, terminal, internal) or one
        dict of arrays (states, actions, rewards, terminals, optional next_states); appends
        (the oldest are overwritten once the memory is full)
    agent.set_demonstrations(batch)
        -> batchrl.agents.dqfd.set_demonstrations(model_state, batch)      (replaces)
    agent.pretrain(steps) -> metrics
        -> batchrl.agents.dqfd.pretrain(model_state, steps)   -> (model_state, metrics)
        raises NoDemonstrationsError (a UserInputError) when none are stored

All three are host-side functions (not jitted themselves; ``pretrain`` runs one compiled
scan); they validate states and actions against the model's spaces (errors name the field
and the index). States must be what the model sees: with state preprocessing configured,
process the demonstrations' states first. Call ``pretrain`` after flushing pending commits.
"""
from __future__ import annotations

import dataclasses

from batchrl.agents.core import Model
from batchrl.agents.dqfd.config import DQFDConfig
from batchrl.agents.dqn.config import DQNConfig
from batchrl.agents.dqn.spec import dqn_config, dqn_keys
from batchrl.agents.registry import IGNORED_KEYS, AgentType, BuildContext, check_keys
from batchrl.configclass import ConfigError, to_dict

# TensorForce's DQFD key names are the config's own
_DQFD_ONLY = tuple(sorted({f.name for f in dataclasses.fields(DQFDConfig)}
                          - {f.name for f in dataclasses.fields(DQNConfig)}))


def dqfd_keys() -> tuple[str, ...]:
  return tuple(sorted(set(dqn_keys()) | set(_DQFD_ONLY)))


def dqfd_config(kwargs: dict, context: BuildContext) -> DQFDConfig:
  """The DQFDConfig of ``Agent.create(agent='dqfd', **kwargs)``."""
  check_keys({k: v for k, v in kwargs.items() if k not in IGNORED_KEYS}, dqfd_keys(), "dqfd")
  own = {k: kwargs[k] for k in _DQFD_ONLY if k in kwargs}
  rest = {k: v for k, v in kwargs.items() if k not in own}
  try:
    base = dqn_config(rest, context, "dqfd", defaults={"double_dqn": True})
  except ConfigError as e:
    raise ConfigError(str(e).replace("dqn.", "dqfd.")) from None
  try:
    return DQFDConfig(**to_dict(base), **own)
  except (TypeError, ValueError) as e:
    raise ConfigError(f"invalid dqfd setting: {e}") from None


def _build(kwargs: dict, context: BuildContext) -> Model:
  from batchrl.agents.dqfd.agent import make_dqfd
  return make_dqfd(dqfd_config(kwargs, context))


AGENT_TYPES = [
    AgentType("dqfd", "Deep Q-learning from demonstrations (DQN + demonstration memory, "
              "pretraining, large-margin loss)", _build, dqfd_keys()),
]
