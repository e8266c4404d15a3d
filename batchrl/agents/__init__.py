"""Agents: pure functions over an explicit state pytree (see ``batchrl.agents.core``)."""
