"""The TensorForce keys VPG and TRPO share in the object API (``batchrl.agents.vpg.keys``,
``batchrl.agents.trpo.keys``), turned into ``PGConfig`` values."""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from batchrl.agents import family
from batchrl.agents.family import adam_learning_rate
from batchrl.agents.policy_gradient.config import BASELINE_MODES, BASELINE_NAMES
from batchrl.configclass import ConfigError

TF_KEYS = ("batch_size", "keep_last", "baseline", "baseline_mode", "baseline_optimizer",
           "gae_rewards", "entropy_regularization")
# Object-API defaults: GAE(0.97) with a 'states' MLP baseline (TensorForce's default was no
# baseline; give baseline_mode=None for that).
API_DEFAULTS = dict(discount=0.99, gae_lambda=0.97, value_target="lambda_return")
API_BATCH_DEFAULT = 1024  # timesteps per update


def own_keys(config_class: type) -> set[str]:
  """The config fields the object API accepts as keys (the network comes from ``network=``)."""
  return {f.name for f in dataclasses.fields(config_class)} - {"network", "policy_layers"}


def shared_tf_keys(kwargs: dict, values: dict, num_streams: int, optimized: dict) -> None:
  """Pops the shared TensorForce keys from ``kwargs`` into config ``values`` (and what the
  ``baseline_optimizer`` dict sets into ``optimized``)."""
  batch = kwargs.pop("batch_size", API_BATCH_DEFAULT)
  kwargs.pop("keep_last", None)  # our rollouts always keep it (see the spec modules)
  if "rollout_length" not in kwargs:
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1 or (
        batch % num_streams):
      raise ConfigError(f"batch_size ({batch!r} timesteps per update) must be a positive "
                        f"multiple of parallel_interactions ({num_streams}): each stream "
                        "contributes batch_size / parallel_interactions timesteps.")
    values["rollout_length"] = batch // num_streams
  if "entropy_regularization" in kwargs:
    if "entropy_coef" in kwargs:
      raise ConfigError("entropy_regularization and entropy_coef mean the same thing; "
                        "give one of them.")
    values["entropy_coef"] = kwargs.pop("entropy_regularization")
  _gae_keys(kwargs, values)
  _baseline_keys(kwargs, values)
  if "baseline_optimizer" in kwargs:
    optimized.update(_baseline_optimizer(kwargs.pop("baseline_optimizer")))


def _gae_keys(kwargs: dict, values: dict) -> None:
  """``gae_rewards`` (0.3: on/off) and ``gae_lambda`` (alone: on, later versions)."""
  if "gae_rewards" not in kwargs:
    return
  gae = kwargs.pop("gae_rewards")
  if not isinstance(gae, bool):
    raise ConfigError(f"gae_rewards must be true or false, got {gae!r}.")
  if not gae:
    if kwargs.get("gae_lambda") is not None:
      raise ConfigError("gae_lambda is given but gae_rewards is false; drop one of them.")
    kwargs.pop("gae_lambda", None)
    values["gae_lambda"] = None
    if values.get("value_target") == "lambda_return":
      values["value_target"] = "return"


def _baseline_keys(kwargs: dict, values: dict) -> None:
  """``baseline`` (a name, a spec dict or a network spec) and ``baseline_mode``."""
  given_mode = "baseline_mode" in kwargs
  mode = kwargs.pop("baseline_mode", None)
  if given_mode:
    if mode is None:
      mode = "none"
    if mode not in BASELINE_MODES:
      raise ConfigError(f"baseline_mode must be None, 'states' or 'network', got {mode!r}.")
    values["baseline_mode"] = mode
  if "baseline" not in kwargs:
    return
  baseline = kwargs.pop("baseline")
  if baseline is None:
    if not given_mode:
      values["baseline_mode"] = "none"
    return
  if not given_mode:
    values["baseline_mode"] = "states"  # TensorForce 0.3: a baseline is its own network
  values.update(_baseline_spec(baseline))


def _baseline_spec(baseline) -> dict:
  """``'mlp'``, ``{'type': 'mlp', 'sizes': [..]}``, ``'linear'``, ``'cnn'`` (optionally with
  ``conv_sizes`` / ``dense_sizes``), ``'auto'``, ``{'type': 'network', 'network': spec}`` or a
  network spec (a layer list or a branches dict) -> config values."""
  if isinstance(baseline, str):
    if baseline not in BASELINE_NAMES:
      raise ConfigError(f"baseline must be one of {BASELINE_NAMES}, a dict such as "
                        f"{{'type': 'mlp', 'sizes': [32, 32]}} or a network spec; got "
                        f"{baseline!r}.")
    return {"baseline_network": baseline}
  if isinstance(baseline, list) or (isinstance(baseline, dict) and "branches" in baseline):
    return {"baseline_network": json.dumps(baseline)}
  if not isinstance(baseline, dict) or "type" not in baseline:
    raise ConfigError(f"baseline must be a name, a dict with 'type' or a network spec, got "
                      f"{baseline!r}.")
  kind, options = baseline["type"], {k: v for k, v in baseline.items() if k != "type"}
  allowed = {"mlp": {"sizes"}, "linear": set(), "cnn": {"conv_sizes", "dense_sizes"},
             "auto": set(), "network": {"network"}}
  if kind not in allowed:
    raise ConfigError(f"baseline type must be one of {sorted(allowed)}, got {kind!r}.")
  unknown = set(options) - allowed[kind]
  if unknown:
    raise ConfigError(f"unknown keys {sorted(unknown)} in the {kind!r} baseline; valid: "
                      f"{sorted(allowed[kind]) or 'none'}.")
  if kind == "mlp":
    return {"baseline_network": "mlp",
            **({"baseline_layers": tuple(options["sizes"])} if "sizes" in options else {})}
  if kind == "network":
    return {"baseline_network": json.dumps(options.get("network", "auto"))}
  if kind == "cnn" and options:
    layers = [{"type": "conv2d", "size": int(s), "window": 3, "activation": "relu"}
              for s in options.get("conv_sizes", (32, 32))]
    layers.append({"type": "flatten"})
    layers += [{"type": "dense", "size": int(s), "activation": "relu"}
               for s in options.get("dense_sizes", (32,))]
    return {"baseline_network": json.dumps(layers)}
  return {"baseline_network": kind}


def _baseline_optimizer(spec) -> dict:
  """``{'type': 'adam', 'learning_rate': x}`` or ``{'type': 'multi_step', 'optimizer':
  {...adam...}, 'num_steps': n}`` -> baseline_learning_rate (and baseline_steps)."""
  values = {}
  if isinstance(spec, dict) and spec.get("type") == "multi_step":
    unknown = set(spec) - {"type", "optimizer", "num_steps"}
    if unknown:
      raise ConfigError(f"unknown baseline_optimizer keys {sorted(unknown)}; valid: type, "
                        "optimizer, num_steps.")
    if "num_steps" in spec:
      values["baseline_steps"] = spec["num_steps"]
    spec = spec.get("optimizer", {"type": "adam"})
  rate = adam_learning_rate(spec, "baseline_optimizer")
  if rate is not None:
    values["baseline_learning_rate"] = rate
  return values


def build_config(config_class: type, kwargs: dict, values: dict, optimized: dict,
                 network) -> Any:
  """``config_class(**values, **optimized, **kwargs)`` with the JSON network: ``values``
  are defaults and translated keys, ``optimized`` what optimizer dicts set (a key also given
  directly with another value is an error); errors are ConfigErrors."""
  for key, value in optimized.items():
    if key in kwargs and kwargs[key] != value:
      raise ConfigError(f"{key} is given twice with different values (directly and in an "
                        "optimizer dict); give it once.")
  merged = {**values, **optimized, **kwargs, "network": json.dumps(network)}
  return family.build_config(config_class, merged, config_class.__name__)
