"""A2C's ``AgentFamily`` (``a2c`` and ``ac``): its entry with how to build it."""
from batchrl.agents.a2c import ENTRY
from batchrl.agents.a2c.keys import a2c_config, a2c_keys
from batchrl.agents.a2c.model import make_a2c
from batchrl.agents.family import AgentFamily, AgentType


def _api_type(name: str) -> AgentType:
  return ENTRY.api_type(name, lambda kwargs, context: make_a2c(a2c_config(kwargs, context, name)),
                        a2c_keys())


FAMILY = AgentFamily(ENTRY, api_types=(_api_type("a2c"), _api_type("ac")), make=make_a2c)
