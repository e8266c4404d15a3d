"""Config framework: documented fields, type checks, overrides, YAML round trips, registry."""
from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
import pytest
import yaml

from batchrl.configclass import (
  ConfigError,
  Registry,
  check_config,
  configclass,
  describe,
  from_dict,
  override,
  override_dict,
  param,
  to_dict,
  validate_types,
)


@configclass
class Example:
  """A config with one field of every supported kind."""

  lr: float = param(1e-4, "Learning rate.")
  steps: int = param(1000, "Environment steps.")
  flag: bool = param(False, "A switch.")
  env: str = param("Pendulum-v1", "Gymnasium id.")
  layers: tuple[int, ...] = param((200, 100), "Hidden sizes.")
  pair: tuple[int, float] = param((1, 2.0), "A fixed-length pair.")
  clip: float | None = param(None, "Gradient clip norm; null for none.")
  chunk: int | None = param(None, "Chunk length; null for whole episodes.")
  network: Literal["gaussian", "categorical"] = param("gaussian", "Policy head.")


@dataclasses.dataclass(frozen=True)
class Plain:
  """A plain frozen dataclass (no @configclass) validated by hand."""

  n: int = param(1, "A count.")

  def __post_init__(self):
    check_config(self)


# ------------------------------------------------------------------ construction and validation


def test_defaults_and_normalisation():
  cfg = Example(lr=1, layers=[64, 64], steps=np.int64(5))
  assert cfg.lr == 1.0 and isinstance(cfg.lr, float)
  assert cfg.layers == (64, 64)
  assert cfg.steps == 5 and type(cfg.steps) is int
  with pytest.raises(dataclasses.FrozenInstanceError):
    cfg.lr = 2.0  # type: ignore[misc]


@pytest.mark.parametrize("field, value, expected", [
    ("steps", 1.5, "int"), ("steps", True, "int"), ("lr", "fast", "float"),
    ("flag", 1, "bool"), ("env", 3, "str"), ("layers", (1, "a"), "tuple[int, ...]"),
    ("pair", (1,), "tuple[int, float]"), ("clip", "x", "float | None"),
    ("network", "beta", "Literal['gaussian', 'categorical']"),
])
def test_construction_rejects_wrong_types(field, value, expected):
  with pytest.raises(ConfigError) as info:
    Example(**{field: value})
  message = str(info.value)
  assert repr(field) in message and expected in message and repr(value) in message


def test_plain_dataclass_validated_by_check_config():
  assert Plain(n=2).n == 2
  with pytest.raises(ConfigError, match="'n'.*expects int"):
    Plain(n="2")


def test_validate_types_on_unvalidated_dataclass():
  @dataclasses.dataclass
  class Loose:
    n: int = 1
  with pytest.raises(ConfigError, match="'n' of Loose expects int, got 'x'"):
    validate_types(Loose(n="x"))


def test_field_without_help_is_rejected():
  with pytest.raises(ConfigError, match="has no help text"):
    @configclass
    class NoHelp:
      n: int = 1


def test_unsupported_annotation_is_rejected():
  with pytest.raises(ConfigError, match="configs do not support"):
    @configclass
    class BadType:
      d: dict = param(None, "A dict.")


# ------------------------------------------------------------------ overrides


@pytest.mark.parametrize("item, field, expected", [
    ("lr=3e-4", "lr", 3e-4), ("lr=1", "lr", 1.0), ("lr=.inf", "lr", float("inf")),
    ("steps=1e6", "steps", 1_000_000), ("steps=20", "steps", 20),
    ("flag=true", "flag", True), ("flag=no", "flag", False),
    ("env=CartPole-v1", "env", "CartPole-v1"), ("env=123", "env", "123"), ("env=no", "env", "no"),
    ("layers=[64,64]", "layers", (64, 64)), ("layers=(64, 64)", "layers", (64, 64)),
    ("layers=(32,)", "layers", (32,)), ("layers=[]", "layers", ()),
    ("pair=[3, 1e-3]", "pair", (3, 1e-3)),
    ("clip=0.5", "clip", 0.5), ("clip=null", "clip", None), ("clip=1", "clip", 1.0),
    ("chunk=50", "chunk", 50), ("chunk=~", "chunk", None), ("chunk=None", "chunk", None),
    ("clip=none", "clip", None),
    ("network=categorical", "network", "categorical"),
])
def test_override_parses_by_annotation(item, field, expected):
  cfg = override(Example(), [item])
  assert getattr(cfg, field) == expected
  assert type(getattr(cfg, field)) is type(expected)


def test_override_keeps_other_fields_and_last_wins():
  cfg = override(Example(), ["steps=5", "steps=7", "lr = 0.5"])
  assert (cfg.steps, cfg.lr, cfg.layers) == (7, 0.5, (200, 100))


def test_unknown_key_suggests_closest():
  with pytest.raises(ConfigError) as info:
    override(Example(), ["lrr=0.1"])
  message = str(info.value)
  assert "unknown config key 'lrr'" in message and "did you mean 'lr'" in message
  assert "valid keys:" in message


@pytest.mark.parametrize("item, field, expected", [
    ("steps=1.5", "steps", "int"), ("flag=maybe", "flag", "bool"),
    ("layers=[64, x]", "layers", "tuple[int, ...]"), ("lr=fast", "lr", "float"),
    ("network=beta", "network", "Literal"), ("pair=[1, 2, 3]", "pair", "tuple[int, float]"),
])
def test_bad_override_value_names_field_and_type(item, field, expected):
  with pytest.raises(ConfigError) as info:
    override(Example(), [item])
  assert repr(field) in str(info.value) and expected in str(info.value)


def test_malformed_override():
  with pytest.raises(ConfigError, match="key=value"):
    override(Example(), ["lr"])
  with pytest.raises(ConfigError, match="list of 'key=value'"):
    override(Example(), "lr=1")


def test_override_dict():
  cfg = override_dict(Example(), {"lr": "3e-4", "layers": [8], "clip": None, "steps": 1e3})
  assert (cfg.lr, cfg.layers, cfg.clip, cfg.steps) == (3e-4, (8,), None, 1000)
  with pytest.raises(ConfigError, match="did you mean 'layers'"):
    override_dict(Example(), {"layer": (1,)})


# ------------------------------------------------------------------ dict and YAML


def test_dict_round_trip():
  cfg = Example(lr=0.25, layers=(3, 4), pair=(5, 6.5), clip=2.0, network="categorical")
  data = to_dict(cfg)
  assert data["layers"] == [3, 4] and list(data) == [f.name for f in dataclasses.fields(Example)]
  assert from_dict(Example, data) == cfg
  assert from_dict(Example, {}) == Example()
  with pytest.raises(ConfigError, match="did you mean 'steps'"):
    from_dict(Example, {"step": 3})


def test_yaml_round_trip_with_safe_load():
  cfg = override(Example(), ["lr=3e-4", "layers=(64, 64)", "clip=0.5", "env=no"])
  data = yaml.safe_load(yaml.safe_dump(to_dict(cfg), sort_keys=False))
  assert data["layers"] == [64, 64] and data["env"] == "no"
  assert from_dict(Example, data) == cfg


def test_hand_edited_yaml_float_exponent():
  text = yaml.safe_dump(to_dict(Example()), sort_keys=False).replace("lr: 0.0001", "lr: 3e-4")
  assert from_dict(Example, yaml.safe_load(text)).lr == 3e-4


# ------------------------------------------------------------------ describe and registry


def test_describe_class_and_instance():
  text = describe(Example)
  assert "lr" in text and "float" in text and "Learning rate." in text and "(200, 100)" in text
  text = describe(Example(lr=0.5))
  assert "0.5 *" in text and "1000" in text


def _registry() -> Registry:
  registry = Registry()

  @registry.register("pendulum")
  def pendulum():
    """Pendulum with small batches."""
    return Example(env="Pendulum-v1")

  registry.register("cartpole", lambda: Example(env="CartPole-v1", network="categorical"),
                    "CartPole with a categorical policy.")
  return registry


def test_registry_get_names_table():
  registry = _registry()
  assert registry.names() == ["pendulum", "cartpole"]
  assert registry.get("cartpole").network == "categorical"
  assert "pendulum" in registry and len(registry) == 2
  table = registry.table()
  assert "Pendulum with small batches." in table and "cartpole" in table


def test_a_description_is_the_first_sentence_of_the_docstring_whole():
  from batchrl.configclass import first_sentence
  assert first_sentence("""TRPO on CartPole (steps in microseconds: cheap.
  More in parentheses). Then the rest.

  A second paragraph.""") == ("TRPO on CartPole (steps in microseconds: cheap. More in "
                               "parentheses).")
  assert first_sentence("Runs e.g. CartPole-v1. More.") == "Runs e.g. CartPole-v1."
  assert first_sentence("No full stop, v1.5 kept\n\nnext") == "No full stop, v1.5 kept"
  assert first_sentence(None) == ""


def test_registry_unknown_and_duplicate_names():
  registry = _registry()
  with pytest.raises(ConfigError) as info:
    registry.get("pendelum")
  assert "did you mean 'pendulum'" in str(info.value) and "cartpole" in str(info.value)
  with pytest.raises(ConfigError, match="already registered"):
    registry.register("pendulum", Example)
  with pytest.raises(ConfigError, match="without spaces"):
    registry.register("bad name", Example)
