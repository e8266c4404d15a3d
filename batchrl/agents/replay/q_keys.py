"""The TensorForce keys of DQN's agent types (``dqn``, ``ddqn``, ``dqn_nstep``) and DQFD's,
turned into a ``DQNConfig`` (or DQFD's subclass) by ``dqn_config``.

Keys: the replay keys (``batchrl.agents.replay.keys``: ``memory``, ``batch_size``,
``update_frequency``, ``first_update``, ``repeat_update``, targets, loss, optimizer), plus
``DQNConfig``'s own fields:

================================================  ==============================================
key                                               meaning
================================================  ==============================================
``double_dqn``                                    Double DQN targets (``ddqn`` forces True)
``n_step``                                        n-step returns (``dqn_nstep``: default 3)
``dueling``                                       a dueling head on the network (or end the
                                                  network with a ``dueling`` layer)
``actions_exploration``, ``explorations_spec``    the model's epsilon-greedy schedule (a
                                                  ``batchrl.exploration`` spec; None = greedy)
================================================  ==============================================

Exploration: DQN explores inside its own ``act`` (epsilon 1.0 -> 0.1 over 10000 timesteps by
default), so it explores the same way in every driver. The object API's ``exploration=``
argument would act on top of it; give the schedule through ``actions_exploration`` instead.
"""
from __future__ import annotations

from batchrl.agents.family import BuildContext
from batchrl.agents.replay.keys import replay_config
from batchrl.agents.replay.q_config import DQNConfig
from batchrl.agents.replay.q_networks import check_discrete
from batchrl.configclass import ConfigError


def dqn_config(kwargs: dict, context: BuildContext, agent: str = "dqn",
               forced: dict | None = None, defaults: dict | None = None,
               config_class: type = DQNConfig):
  """The DQNConfig (or ``config_class``, DQFD's) of ``Agent.create(agent='dqn', **kwargs)``."""
  try:
    check_discrete(context.action_space)
  except TypeError as e:
    raise ConfigError(str(e)) from None
  return replay_config(config_class, kwargs, context, agent, defaults, forced)
