"""The errors ``batchrl.Agent`` raises for misuse; ``batchrl.agent`` re-exports them
(``from batchrl.agent import AgentUsageError``).

They sit below everything else of the object API so that every module of it can raise them
without importing the ``Agent`` itself.
"""
from __future__ import annotations


class AgentUsageError(ValueError):
  """act/observe called out of order, a bad ``parallel`` index, or a state that does not
  match its spec."""


class StreamAheadError(AgentUsageError):
  """One stream is ``STAGE_DEPTH`` (``batchrl.agent.runtime``) steps ahead of another: rows
  of the model's batch hold one step of every stream, so it must wait (``ThreadedRunner``
  does)."""


class StateError(AgentUsageError):
  """A state that does not match its spec (shape, dtype, names, values)."""
