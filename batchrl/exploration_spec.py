"""Exploration specs (TensorForce style), read and checked without JAX: what a config's
``exploration`` field or an agent spec may say, and the ``ExplorationSpec`` it means.
``batchrl.exploration`` builds the JAX functions that explore from it; the types, their keys
and what each value means are described there.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from batchrl.errors import UserInputError, did_you_mean

KINDS = ("int", "bool", "float")
_FLOAT_ONLY = ("gaussian", "ornstein_uhlenbeck")

# type -> (schedule, {key: default}); keys are given in TensorForce's own names.
_TYPES: dict[str, tuple[str, dict[str, Any]]] = {
    "constant": ("constant", {"value": 0.0}),
    "linear_decay": ("linear", {"initial_value": 1.0, "final_value": 0.1,
                                "timesteps": 10000, "start_after": 0}),
    "epsilon_anneal": ("linear", {"initial_epsilon": 1.0, "final_epsilon": 0.1,
                                  "timesteps": 10000, "start_after": 0}),
    "epsilon_decay": ("exponential", {"initial_epsilon": 1.0, "final_epsilon": 0.1,
                                      "timesteps": 10000, "half_lives": 10.0,
                                      "start_after": 0}),
    "gaussian": ("constant", {"sigma": 0.3}),
    "ornstein_uhlenbeck": ("constant", {"sigma": 0.3, "mu": 0.0, "theta": 0.15}),
}
# Accepted names -> field names of Exploration.
_FIELD = {"value": "initial", "sigma": "initial", "initial_value": "initial",
          "initial_epsilon": "initial", "final_value": "final", "final_epsilon": "final",
          "timesteps": "timesteps", "start_after": "start_after",
          "start_timestep": "start_after", "half_lives": "half_lives", "mu": "mu",
          "theta": "theta", "constant": "initial"}
_ALIASES = {"constant": ("constant",), "linear_decay": ("initial_epsilon", "final_epsilon"),
            "epsilon_anneal": ("initial_value", "final_value"),
            "epsilon_decay": ("initial_value", "final_value")}


class ExplorationSpecError(UserInputError):
  """An exploration spec that cannot be built or does not fit the action; names what is valid."""


@dataclasses.dataclass(frozen=True)
class ExplorationSpec:
  """One exploration spec, checked and with its defaults filled in; hashable, so it can be a
  static argument of ``jax.jit``. ``batchrl.exploration.Exploration`` adds the functions that
  explore.

  Attributes:
    type: the spec type (see ``batchrl.exploration``).
    schedule: 'constant' | 'linear' | 'exponential': how ``value(t)`` moves.
    initial: the value (constant, sigma) or the value until ``start_after``.
    final: the value the schedule moves towards.
    timesteps: length of the linear ramp / span of ``half_lives`` halvings.
    start_after: global timestep where the schedule starts moving.
    half_lives: exponential schedule only.
    mu, theta: Ornstein-Uhlenbeck mean and mean-reversion rate.
  """

  type: str
  schedule: str = "constant"
  initial: float = 0.0
  final: float = 0.0
  timesteps: int = 1
  start_after: int = 0
  half_lives: float = 1.0
  mu: float = 0.0
  theta: float = 0.15

  @property
  def is_ou(self) -> bool:
    return self.type == "ornstein_uhlenbeck"

  def check_kind(self, kind: str) -> None:
    """Raises ``ExplorationSpecError`` when this exploration cannot act on ``kind`` actions."""
    if kind not in KINDS:
      raise ExplorationSpecError(f"action kind {kind!r} is not one of {KINDS}"
                                 f"{did_you_mean(kind, KINDS)}")
    if kind != "float" and self.type in _FLOAT_ONLY:
      raise ExplorationSpecError(
          f"exploration {self.type!r} adds noise to float actions and cannot explore a "
          f"{kind} action; use constant, linear_decay, epsilon_anneal or epsilon_decay "
          "(epsilon = probability of a uniformly random action)")
    if kind != "float" and max(self.initial, self.final) > 1.0:
      raise ExplorationSpecError(
          f"exploration {self.type!r} is an epsilon (a probability) for {kind} actions and "
          f"must stay in [0, 1]; its values go from {self.initial} to {self.final}")


def _number(where: str, key: str, value: Any, *, integer: bool = False,
            positive: bool = False) -> float | int:
  kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
  bad = isinstance(value, bool) or not isinstance(value, kinds)
  if bad or value < 0 or (positive and value == 0):
    need = ("a positive" if positive else "a non-negative") + (" int" if integer else " number")
    raise ExplorationSpecError(f"{where}: {key} must be {need}, got {value!r}")
  return int(value) if integer else float(value)


def _fields(kind: str, spec: Mapping, where: str) -> dict[str, Any]:
  """Exploration fields from ``spec`` (user key names checked, aliases resolved, defaults)."""
  schedule, defaults = _TYPES[kind]
  valid = list(defaults) + ["start_timestep"] * ("start_after" in defaults) + list(
      _ALIASES.get(kind, ()))
  given: dict[str, Any] = {}
  for key, value in spec.items():
    if key == "type":
      continue
    if key not in valid:
      raise ExplorationSpecError(f"{where} ({kind}): unknown key {key!r}"
                                 f"{did_you_mean(key, valid)}; valid keys: "
                                 f"{', '.join(['type'] + valid)}")
    if _FIELD[key] in given:
      raise ExplorationSpecError(f"{where} ({kind}): {key!r} sets {_FIELD[key]} a second time")
    given[_FIELD[key]] = _checked(f"{where} ({kind})", key, value)
  fields = {_FIELD[key]: value for key, value in defaults.items()}
  fields.update(given)
  fields.setdefault("final", fields["initial"])
  if fields.get("theta", 0.0) > 1:
    raise ExplorationSpecError(f"{where} ({kind}): theta is the mean-reversion rate per step "
                               f"and must be in [0, 1], got {fields['theta']}")
  return {"type": kind, "schedule": schedule, **fields}


def _checked(where: str, key: str, value: Any) -> float | int:
  field = _FIELD[key]
  if field == "mu":
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
      raise ExplorationSpecError(f"{where}: mu must be a number, got {value!r}")
    return float(value)
  integer = field in ("timesteps", "start_after")
  return _number(where, key, value, integer=integer,
                 positive=field in ("timesteps", "half_lives"))


def parse_exploration_spec(spec: Any, where: str = "exploration") -> ExplorationSpec | None:
  """An ``ExplorationSpec`` from a spec: None / 0 (none), a number (constant), a type name, or
  a dict.

  Raises:
    ExplorationSpecError: unknown type or key (with the closest valid one), bad values.
  """
  if isinstance(spec, (bool, np.bool_)):
    raise ExplorationSpecError(f"{where}: expected None, a number or a dict, got {spec!r}")
  if spec is None:
    return None
  if isinstance(spec, (int, float, np.integer, np.floating)):
    if spec == 0:
      return None
    spec = {"type": "constant", "value": spec}
  elif isinstance(spec, str):
    spec = {"type": spec}
  if not isinstance(spec, Mapping):
    raise ExplorationSpecError(f"{where}: expected None, a number or a dict with a 'type', "
                               f"got {spec!r}")
  kind = spec.get("type")
  if kind not in _TYPES:
    raise ExplorationSpecError(f"{where}: unknown exploration type {kind!r}"
                               f"{did_you_mean(kind, _TYPES)}; valid types: "
                               f"{', '.join(_TYPES)}")
  return ExplorationSpec(**_fields(kind, spec, where))
