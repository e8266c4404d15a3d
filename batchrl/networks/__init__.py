"""Network pieces owned by batchrl: action distributions and heads (no distrax dependency)."""
from batchrl.networks.distributions import (
  Bernoulli,
  Beta,
  Categorical,
  DiagGaussian,
  Independent,
  Joint,
  Reshaped,
  mask_allows_nothing,
)
from batchrl.networks.heads import ActionHeads, ActionSpec, action_specs_from_space, sample_uniform
from batchrl.networks.layered import (
  InputSpec,
  Network,
  build_network,
  input_specs_from_space,
  validate_network_spec,
)
from batchrl.networks.layers import NetworkSpecError

__all__ = ["Categorical", "DiagGaussian"]
__all__ += ["ActionHeads", "ActionSpec", "Bernoulli", "Beta", "Independent", "Joint", "Reshaped",
            "action_specs_from_space", "mask_allows_nothing", "sample_uniform"]
__all__ += ["InputSpec", "Network", "NetworkSpecError", "build_network",
            "input_specs_from_space", "validate_network_spec"]
