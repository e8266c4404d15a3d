"""The object API: ``batchrl.Agent``, the object users drive themselves (``Agent.create``,
``act`` / ``observe``, ``save`` / ``load``), and the machinery behind it.

The algorithms are ``batchrl.agents`` (pure functions over a state pytree, a ``Model`` per
family); this package wraps one of them in an object that handles interaction, and nothing in
``batchrl.agents`` imports it. Its modules, from the top:

- ``api``: the ``Agent`` class.
- ``spec``: what ``Agent.create``'s arguments resolve to, and the ``agent.json`` beside its
  checkpoints.
- ``fast_path``: acts that do not commit, transitions stored many at a time.
- ``streams``: the host-side bookkeeping of the streams and the plan of each act.
- ``runtime``: a model with its adapters and the programs compiled for them.
- ``adapters``: spaces, preprocessing, explorations and action masks between the user and
  the model.
- ``interaction``: the device side, pure functions over one ``AgentState`` pytree.
- ``states``: the user's states checked against the state spec.
- ``dispatch``: how the programs are compiled and run (inline dispatch, compilation cache).
- ``errors``: the errors raised for misuse, below every other module here.
"""
from __future__ import annotations

from batchrl.agent.api import Agent
from batchrl.agent.errors import AgentUsageError, StateError, StreamAheadError

__all__ = ["Agent", "AgentUsageError", "StateError", "StreamAheadError"]
