"""The ``dqfd`` agent type of ``batchrl.Agent.create``, and the object-API methods it adds.

Keys: every ``dqn`` key (``batchrl.agents.replay.q_keys``: ``memory``, ``memory_capacity``,
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
``expert_margin``                   margin of the large-margin loss (default 0.8, the DQfD
                                    paper's; TensorForce 0.3's 0.5 imitates poorly)
``supervised_weight``               weight of the large-margin loss (default 1.0, the paper's;
                                    TensorForce 0.3's 0.1)
``nstep_weight``                    weight of the n-step TD loss (with ``n_step`` > 1)
``l2_regularization``               weight of the L2 penalty on the weights
``pretrain_target_update_frequency``  pretraining gradient steps between target updates
``demonstrations``, ``pretrain_steps``  demonstrations to import at creation (an .npz path or a
                                    built-in source) and pretraining steps made then
==================================  ============================================================

Object API (``FAMILY.host_methods`` in ``batchrl.agents.dqfd.family``: ``batchrl.Agent`` runs them
on its model state, a ``batchrl.agents.dqfd.model.DQFDState``)::

    agent.import_demonstrations(demonstrations)
        -> batchrl.agents.dqfd.model.import_demonstrations(model_state, demonstrations)
        demonstrations: a list of dicts (state, action, reward, terminal, internal) or one
        dict of arrays (states, actions, rewards, terminals, optional next_states); appends,
        growing the memory (and agent.spec's demo_memory_capacity) when they do not fit
    agent.set_demonstrations(batch)
        -> batchrl.agents.dqfd.model.set_demonstrations(model_state, batch)      (replaces)
    agent.pretrain(steps) -> metrics
        -> batchrl.agents.dqfd.model.pretrain(model_state, steps)   -> (model_state, metrics)
        raises NoDemonstrationsError (a UserInputError) when none are stored

All three are host-side functions (not jitted themselves; ``pretrain`` runs one compiled
scan); they validate states and actions against the model's spaces (errors name the field
and the index). States must be what the model sees: with state preprocessing configured,
process the demonstrations' states first. Call ``pretrain`` after flushing pending commits.
"""
from __future__ import annotations

from batchrl.agents.dqfd.config import DQFDConfig
from batchrl.agents.family import BuildContext
from batchrl.agents.replay.q_keys import dqn_config


def dqfd_config(kwargs: dict, context: BuildContext) -> DQFDConfig:
  """The DQFDConfig of ``Agent.create(agent='dqfd', **kwargs)``: DQN's keys plus the
  demonstration fields (TensorForce's DQFD key names are the config's own)."""
  return dqn_config(kwargs, context, "dqfd", defaults={"double_dqn": True},
                    config_class=DQFDConfig)
