"""Network pieces owned by batchrl: action distributions (no distrax dependency)."""
from batchrl.networks.distributions import Categorical, DiagGaussian

__all__ = ["Categorical", "DiagGaussian"]
