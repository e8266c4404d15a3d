"""Network pieces owned by batchrl, one module each: action distributions
(``distributions``, no distrax dependency), action heads (``heads``), the layered builder
from JSON specs (``layered``) with its layer types (``layers``, checked by ``layer_specs``).

Importing this package stays free of JAX (configs check their layer specs through
``layer_specs`` before JAX is imported): import the pieces from their modules.
"""
from batchrl.networks.layer_specs import NetworkSpecError

__all__ = ["NetworkSpecError"]
