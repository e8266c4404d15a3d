"""Deprecated names kept for one release: use ``batchrl.agents.families``."""
from __future__ import annotations

from batchrl.agents.families import api_names as names, api_type as get
from batchrl.agents.family import BuildContext

__all__ = ["BuildContext", "get", "names"]
