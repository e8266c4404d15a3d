"""Named configs as frozen, documented, validated dataclasses.

A config class declares every field with :func:`param` (a default plus a help text) and is
decorated with :func:`configclass`, which makes it a frozen keyword-only dataclass that checks
each value against its annotation when constructed::

    @configclass
    class PPOConfig:
      lr: float = param(1e-4, "Adam learning rate.")
      policy_layers: tuple[int, ...] = param((200, 100), "Hidden sizes of the policy MLP.")
      network: Literal["gaussian", "categorical"] = param("gaussian", "Policy head.")

    cfg = override(PPOConfig(), ["lr=3e-4", "policy_layers=(64, 64)"])
    assert cfg.replace(lr=1e-3).lr == 1e-3  # every config class has replace()
    assert from_dict(PPOConfig, yaml.safe_load(yaml.safe_dump(to_dict(cfg)))) == cfg

Supported annotations: ``int``, ``float`` (ints accepted, stored as float), ``bool``, ``str``,
``None``, ``tuple[X, ...]`` / ``tuple[X, Y]``, ``Literal[...]`` and unions such as ``X | None``.
Everything a config holds can therefore be written with ``yaml.safe_dump`` and read back with
``yaml.safe_load``: no config ever needs an unsafe loader (Batch PPO's did).
"""
from __future__ import annotations

import dataclasses
import functools
import textwrap
import types
import typing
from typing import Any, Callable, Iterable, Literal, Mapping

import numpy as np
import yaml

from batchrl.errors import UserInputError, did_you_mean

_NONE = type(None)
_SCALARS = (bool, int, float, str, _NONE)


class ConfigError(UserInputError):
  """A config value, key, file or name is invalid; the message says what is valid."""


# --------------------------------------------------------------------------- declaring fields


def param(default: Any = dataclasses.MISSING, help: str = "") -> Any:
  """A documented config field: ``lr: float = param(1e-4, "Adam learning rate.")``."""
  if isinstance(default, (list, dict, set)):
    raise ConfigError(
        f"config defaults must be immutable, got {type(default).__name__} {default!r}; "
        "use a tuple instead of a list")
  return dataclasses.field(default=default, metadata={"help": help})


def configclass(cls: type) -> type:
  """Make ``cls`` a frozen, keyword-only dataclass validated on construction.

  Every field must carry a help text (declare it with :func:`param`) and an annotation from
  the supported set. A ``__post_init__`` defined by the class (cross-field checks) runs after
  the per-field checks.
  """
  own_post_init = cls.__dict__.get("__post_init__")

  def __post_init__(self):
    check_config(self)
    if own_post_init is not None:
      own_post_init(self)

  cls.__post_init__ = __post_init__
  if "replace" not in cls.__dict__:
    cls.replace = _replace_method
  cls = dataclasses.dataclass(frozen=True, kw_only=True)(cls)
  hints = _hints(cls)
  for f in dataclasses.fields(cls):
    if not f.metadata.get("help"):
      raise ConfigError(
          f"field {f.name!r} of {cls.__name__} has no help text; declare it as "
          f"`{f.name}: ... = param(default, \"what it means\")`")
    _require_supported(cls, f.name, hints[f.name])
  return cls


def _replace_method(self, **changes):
  """A copy with ``changes`` (converted by each field's annotation); an unknown key is an
  error naming the closest field. Every ``@configclass`` has it."""
  return override_dict(self, changes)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
  try:
    return typing.get_type_hints(cls, include_extras=False)
  except Exception as e:  # unresolvable string annotations: say which class, not a NameError
    raise ConfigError(f"cannot resolve the annotations of {cls.__name__}: {e}") from e


def _fields(cls: type) -> list[dataclasses.Field]:
  if not dataclasses.is_dataclass(cls):
    raise ConfigError(f"expected a config dataclass, got {cls!r}")
  return [f for f in dataclasses.fields(cls) if f.init]


# --------------------------------------------------------------------------- type checking


def _is_union(tp) -> bool:
  return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _is_tuple(tp) -> bool:
  return tp is tuple or typing.get_origin(tp) is tuple


def _tuple_items(tp, n: int) -> list | None:
  """Element annotations of a tuple annotation for ``n`` items; None when the length is wrong."""
  args = typing.get_args(tp)
  if not args:
    return [Any] * n
  if len(args) == 2 and args[1] is Ellipsis:
    return [args[0]] * n
  return list(args) if len(args) == n else None


def _supported(tp) -> bool:
  if tp in _SCALARS or tp is Any:
    return True
  if typing.get_origin(tp) is Literal:
    return all(isinstance(a, _SCALARS) for a in typing.get_args(tp))
  if _is_union(tp):
    return all(_supported(a) for a in typing.get_args(tp))
  if _is_tuple(tp):
    return all(a is Ellipsis or _supported(a) for a in typing.get_args(tp))
  return False


def _require_supported(cls: type, name: str, tp) -> None:
  if not _supported(tp):
    raise ConfigError(
        f"field {name!r} of {cls.__name__} has annotation {type_name(tp)}, which configs do "
        "not support; use int, float, bool, str, None, tuple[X, ...], Literal[...] or unions "
        "of those (everything must survive yaml.safe_dump)")


def type_name(tp) -> str:
  """A readable name for an annotation: ``tuple[int, ...]``, ``float | None``."""
  if tp is _NONE or tp is None:
    return "None"
  if tp is Any:
    return "any"
  if typing.get_origin(tp) is Literal:
    return "Literal[" + ", ".join(repr(a) for a in typing.get_args(tp)) + "]"
  if _is_union(tp):
    return " | ".join(type_name(a) for a in typing.get_args(tp))
  if _is_tuple(tp):
    args = typing.get_args(tp)
    if not args:
      return "tuple"
    return "tuple[" + ", ".join("..." if a is Ellipsis else type_name(a) for a in args) + "]"
  return getattr(tp, "__name__", repr(tp))


def _matches(value, tp) -> bool:
  """Whether ``value`` is exactly of type ``tp`` (bools are not ints; ints are floats)."""
  if tp is Any:
    return _matches_any_scalar_tree(value)
  if tp is _NONE or tp is None:
    return value is None
  if tp is bool:
    return isinstance(value, bool)
  if tp is int:
    return isinstance(value, int) and not isinstance(value, bool)
  if tp is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if tp is str:
    return isinstance(value, str)
  if typing.get_origin(tp) is Literal:
    return any(type(value) is type(a) and value == a for a in typing.get_args(tp))
  if _is_union(tp):
    return any(_matches(value, a) for a in typing.get_args(tp))
  if _is_tuple(tp):
    if not isinstance(value, tuple):
      return False
    items = _tuple_items(tp, len(value))
    return items is not None and all(_matches(v, t) for v, t in zip(value, items))
  return False


def _matches_any_scalar_tree(value) -> bool:
  if isinstance(value, tuple):
    return all(_matches_any_scalar_tree(v) for v in value)
  return isinstance(value, _SCALARS)


def _coerce(value, tp):
  """Lossless normalisation towards ``tp``: numpy scalars, int -> float, list -> tuple."""
  if isinstance(value, np.generic):
    value = value.item()
  if _is_union(tp):
    if _matches(value, tp) and not (float in typing.get_args(tp) and isinstance(value, int)):
      return value
    for member in typing.get_args(tp):
      converted = _coerce(value, member)
      if _matches(converted, member):
        return converted
    return value
  if tp is float and isinstance(value, int) and not isinstance(value, bool):
    return float(value)
  if (_is_tuple(tp) or tp is Any) and isinstance(value, (list, tuple)):
    items = _tuple_items(tp, len(value)) if tp is not Any else [Any] * len(value)
    if items is not None:
      return tuple(_coerce(v, t) for v, t in zip(value, items))
  return value


def _from_text(value, tp, raw: str | None):
  """Repair what YAML 1.1 makes of command-line text (``3e-4`` is a string to it)."""
  if _is_union(tp):
    members = typing.get_args(tp)
    # YAML's None is null; Python's spelling means the same where no string is valid
    if _NONE in members and (value is None or (raw in ("None", "none") and str not in members)):
      return None
    for member in typing.get_args(tp):
      if member is _NONE:
        continue
      candidate = _coerce(_from_text(value, member, raw), member)
      if _matches(candidate, member):
        return candidate
    return value
  if typing.get_origin(tp) is Literal:
    choices = typing.get_args(tp)
    if any(type(value) is type(c) and value == c for c in choices):
      return value
    return raw if raw in choices else value
  if tp is str:
    return value if isinstance(value, str) or raw is None else raw
  if tp in (int, float) and isinstance(value, str):
    value = _parse_number(value)
  if tp is int and isinstance(value, float) and value.is_integer():
    return int(value)  # steps=1e6
  if _is_tuple(tp):
    return _tuple_from_text(value, tp)
  return value


def _parse_number(text: str):
  try:
    return float(text)
  except ValueError:
    return text


def _tuple_from_text(value, tp):
  if isinstance(value, str) and value.strip().startswith("(") and value.strip().endswith(")"):
    try:  # Python-style tuples: (64, 64) or (64,)
      value = yaml.safe_load("[" + value.strip()[1:-1] + "]")
    except yaml.YAMLError:
      return value
  if not isinstance(value, (list, tuple)):
    return value
  items = _tuple_items(tp, len(value))
  if items is None:
    return value
  return tuple(_from_text(v, t, None) for v, t in zip(value, items))


def _describe_value(value) -> str:
  return f"{value!r} ({type(value).__name__})"


def _convert(cls: type, name: str, value, tp, raw: str | None = None):
  """Parse/normalise one value for field ``name``, or raise a ConfigError naming it."""
  if raw is None and isinstance(value, str):
    raw = value
  converted = _coerce(_from_text(_coerce(value, tp), tp, raw), tp)
  if not _matches(converted, tp):
    shown = repr(raw) if raw is not None else _describe_value(value)
    raise ConfigError(f"config field {name!r} of {cls.__name__} expects {type_name(tp)}, "
                      f"got {shown}")
  return converted


def validate_types(cfg) -> None:
  """Raise ConfigError if any field of ``cfg`` does not match its annotation."""
  cls = type(cfg)
  hints = _hints(cls)
  for f in _fields(cls):
    tp = hints[f.name]
    _require_supported(cls, f.name, tp)
    value = getattr(cfg, f.name)
    if not _matches(value, tp):
      raise ConfigError(f"config field {f.name!r} of {cls.__name__} expects {type_name(tp)}, "
                        f"got {_describe_value(value)}")


def check_config(cfg) -> None:
  """Normalise (int -> float, list -> tuple, numpy scalars) and validate ``cfg`` in place.

  Call it from ``__post_init__``; it works on frozen dataclasses. :func:`configclass` does.
  """
  hints = _hints(type(cfg))
  for f in _fields(type(cfg)):
    value = getattr(cfg, f.name)
    coerced = _coerce(value, hints[f.name])
    if coerced is not value:
      object.__setattr__(cfg, f.name, coerced)  # frozen: normalising is part of construction
  validate_types(cfg)


# --------------------------------------------------------------------------- overrides


def _unknown_key_error(cls: type, key: str) -> ConfigError:
  names = [f.name for f in _fields(cls)]
  return ConfigError(f"unknown config key {key!r} for {cls.__name__}"
                     f"{did_you_mean(key, names, n=3)}; valid keys: {', '.join(names)}")


def _converted_values(cls: type, values: Mapping[str, Any], texts: Mapping[str, str]) -> dict:
  hints = _hints(cls)
  known = {f.name for f in _fields(cls)}
  out = {}
  for key, value in values.items():
    if key not in known:
      raise _unknown_key_error(cls, key)
    out[key] = _convert(cls, key, value, hints[key], texts.get(key))
  return out


def _replace(cfg, changes: dict):
  new = dataclasses.replace(cfg, **changes)
  validate_types(new)  # also for dataclasses not built with @configclass
  return new


def override_dict(cfg, values: Mapping[str, Any]):
  """A copy of ``cfg`` with ``values`` applied (converted by each field's annotation)."""
  return _replace(cfg, _converted_values(type(cfg), values, {}))


def parse_override(item: str) -> tuple[str, str]:
  """Split ``"key=value"`` into ``(key, value text)``."""
  key, sep, text = item.partition("=")
  if not sep or not key.strip():
    raise ConfigError(f"override {item!r} must look like key=value (e.g. lr=3e-4)")
  return key.strip(), text.strip()


def _load_text(text: str):
  try:
    return yaml.safe_load(text)
  except yaml.YAMLError:
    return text


def override(cfg, items: Iterable[str]):
  """A copy of ``cfg`` with ``["key=value", ...]`` applied; values are parsed YAML-style.

  ``lr=3e-4``, ``layers=[64,64]`` or ``layers=(64, 64)``, ``flag=true``, ``x=null``. A later
  item for the same key wins.
  """
  if isinstance(items, str):
    raise ConfigError(f"override expects a list of 'key=value' strings, got the string {items!r}")
  texts = dict(parse_override(item) for item in items)
  values = {key: _load_text(text) for key, text in texts.items()}
  return _replace(cfg, _converted_values(type(cfg), values, texts))


# --------------------------------------------------------------------------- dict and YAML


def _plain(value):
  """Tuples become lists so the result is plain JSON/YAML data."""
  if isinstance(value, (tuple, list)):
    return [_plain(v) for v in value]
  return value


def to_dict(cfg) -> dict[str, Any]:
  """Field values as plain data (tuples as lists), in declaration order."""
  return {f.name: _plain(getattr(cfg, f.name)) for f in _fields(type(cfg))}


def from_dict(cls: type, values: Mapping[str, Any]):
  """Build ``cls`` from plain data; missing keys take defaults, unknown keys are errors."""
  if not isinstance(values, Mapping):
    raise ConfigError(f"{cls.__name__} needs a mapping of field values, got "
                      f"{type(values).__name__}")
  missing = [f.name for f in _fields(cls)
             if _default_of(f) is dataclasses.MISSING and f.name not in values]
  if missing:
    raise ConfigError(f"{cls.__name__} needs values for {', '.join(missing)}")
  cfg = cls(**_converted_values(cls, values, {}))
  validate_types(cfg)
  return cfg


# --------------------------------------------------------------------------- describing


def format_table(headers: list[str], rows: list[list[str]], width: int | None = None) -> str:
  """Plain-text columns under ``headers``; the last column is not padded (it holds long help
  texts) and, given a ``width``, wraps within it, aligned under its header."""
  widths = [max(len(r[i]) for r in [headers] + rows) for i in range(len(headers) - 1)]
  indent = sum(w + 2 for w in widths)
  # a last column narrower than this would be a ribbon of words: let the terminal wrap it
  wrap = width is not None and width - indent >= 30

  def lines(cells):
    head = "  ".join(c.ljust(w) for c, w in zip(cells, widths))
    texts = textwrap.wrap(cells[-1], width - indent) if wrap else [cells[-1]]
    texts = texts or [""]
    return [f"{head}  {texts[0]}".rstrip()] + [" " * indent + t for t in texts[1:]]

  rule = "  ".join("-" * w for w in widths + [len(headers[-1])])
  return "\n".join(lines(headers) + [rule] + [line for r in rows for line in lines(r)])


def first_sentence(doc: str | None) -> str:
  """The first sentence of a docstring, whole (its first paragraph up to a full stop outside
  parentheses), on one line: what a listing shows of it."""
  paragraph = " ".join((doc or "").strip().split("\n\n")[0].split())
  depth = 0
  for i, char in enumerate(paragraph):
    depth += {"(": 1, ")": -1}.get(char, 0)
    if char == "." and depth <= 0 and paragraph[i + 1:i + 2] in ("", " ") \
        and not paragraph[:i + 1].endswith(_ABBREVIATIONS):
      return paragraph[:i + 1]
  return paragraph


_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.")  # full stops that do not end a sentence


def _default_of(f: dataclasses.Field):
  if f.default is not dataclasses.MISSING:
    return f.default
  if f.default_factory is not dataclasses.MISSING:
    return f.default_factory()
  return dataclasses.MISSING


def describe(config) -> str:
  """A table of a config class's fields (type, default, help) or an instance's values.

  For an instance, values that differ from the default are marked with ``*``.
  """
  cls = config if isinstance(config, type) else type(config)
  hints = _hints(cls)
  rows = []
  for f in _fields(cls):
    default = _default_of(f)
    shown = "(required)" if default is dataclasses.MISSING else repr(default)
    if not isinstance(config, type):
      value = getattr(config, f.name)
      shown = repr(value) + (" *" if value != default else "")
    rows.append([f.name, type_name(hints[f.name]), shown, f.metadata.get("help", "")])
  column = "default" if isinstance(config, type) else "value"
  return f"{cls.__name__}\n" + format_table(["field", "type", column, "help"], rows)


# --------------------------------------------------------------------------- registry


@dataclasses.dataclass(frozen=True)
class RegistryEntry:
  """One named config: ``factory()`` builds it."""

  name: str
  factory: Callable[[], Any]
  description: str


class Registry:
  """Named config factories: ``REGISTRY.get("pendulum")`` -> a config instance.

  ``listed_by``: the command that lists every name; an unknown name's error then names the
  closest few and that command, instead of every name on one line.
  """

  def __init__(self, kind: str = "config", listed_by: str | None = None):
    self.kind = kind
    self.listed_by = listed_by
    self._entries: dict[str, RegistryEntry] = {}

  def register(self, name: str, factory: Callable[[], Any] | None = None,
               description: str | None = None):
    """Register ``factory`` under ``name``; without a factory, returns a decorator.

    The description defaults to the first sentence of the factory's docstring.
    """
    if factory is None:
      return lambda f: self.register(name, f, description)
    if not name or not isinstance(name, str) or any(c.isspace() or c == "=" for c in name):
      raise ConfigError(f"{self.kind} name must be a non-empty string without spaces or '=', "
                        f"got {name!r}")
    if name in self._entries:
      raise ConfigError(f"{self.kind} {name!r} is already registered")
    if description is None:
      description = first_sentence(factory.__doc__)
    self._entries[name] = RegistryEntry(name, factory, description)
    return factory

  def entry(self, name: str) -> RegistryEntry:
    """The entry for ``name``; unknown names raise ConfigError with the closest names."""
    if name not in self._entries:
      close = did_you_mean(name, self._entries, n=3)
      if self.listed_by:
        raise ConfigError(f"unknown {self.kind} {name!r}{close}; every {self.kind}, with its "
                          f"description: {self.listed_by}")
      known = ", ".join(self._entries) or "none registered"
      raise ConfigError(f"unknown {self.kind} {name!r}{close}; known: {known}")
    return self._entries[name]

  def get(self, name: str):
    """A fresh config built by the factory registered as ``name``."""
    return self.entry(name).factory()

  def names(self) -> list[str]:
    """Registered names, in registration order."""
    return list(self._entries)

  def table(self, width: int | None = None) -> str:
    """Plain-text listing of names and descriptions (for ``batchrl configs``), the
    descriptions wrapped within ``width`` columns when given."""
    rows = [[e.name, e.description] for e in self._entries.values()]
    return format_table(["name", "description"], rows, width)

  def __contains__(self, name: object) -> bool:
    return name in self._entries

  def __len__(self) -> int:
    return len(self._entries)
