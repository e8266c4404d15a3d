"""Deprecated (kept for one release): ``batchrl.agents.families`` holds the agent list."""
from __future__ import annotations

import warnings

from batchrl.agents.families import api_names as names
from batchrl.agents.families import api_type as get
from batchrl.agents.family import BuildContext

warnings.warn("batchrl.agents.registry is now batchrl.agents.families (api_type, api_names) "
              "and batchrl.agents.family (BuildContext)", DeprecationWarning, stacklevel=2)

__all__ = ["BuildContext", "get", "names"]
