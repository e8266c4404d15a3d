"""The search space of ``batchrl tune``: ``--search KEY=EXPR`` parsed and checked.

Grammar (one ``--search`` per key)::

    KEY=loguniform(LOW,HIGH)   a float, log-uniform in [LOW, HIGH]   (0 < LOW < HIGH)
    KEY=uniform(LOW,HIGH)      a float, uniform in [LOW, HIGH]        (LOW < HIGH)
    KEY=int(LOW,HIGH)          an int in [LOW, HIGH], both included   (LOW < HIGH)
    KEY=choice(A,B,...)        one of the values (two or more; tuples like (64,64) allowed)

``KEY`` is any ``--set`` key (``learning_rate``, ``agent.clip_range``, ``run.num_envs``):
sampled values are applied exactly as ``--set KEY=VALUE`` would (``configs.apply_overrides``),
so a key that is not a field names the closest one and a value outside a field's valid range
is refused by the field's own check. ``check_space`` applies every bound (and a value between
them) to the experiment before anything runs.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Iterable, Mapping

from batchrl.configclass import ConfigError
from batchrl.configs import Experiment, apply_overrides

KINDS = ("loguniform", "uniform", "int", "choice")
GRAMMAR = ("KEY=loguniform(LOW,HIGH), KEY=uniform(LOW,HIGH), KEY=int(LOW,HIGH) or "
           "KEY=choice(A,B,...)")
_EXPRESSION = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=\s*([a-z]+)\s*\((.*)\)\s*$", re.S)


@dataclasses.dataclass(frozen=True)
class Param:
  """One searched key: ``kind`` in ``KINDS``; ``low``/``high`` for the ranges, ``choices``
  (the values' text, as ``--set`` takes it) for ``choice``; ``text`` is what the user wrote."""

  key: str
  kind: str
  low: float | int | None = None
  high: float | int | None = None
  choices: tuple[str, ...] = ()
  text: str = ""

  def values_to_check(self) -> list[str]:
    """Texts of the values ``check_space`` applies: both bounds and one inside (a float
    between two ints tells a float range on an int field), or every choice."""
    if self.kind == "choice":
      return list(self.choices)
    if self.kind == "int":
      return [str(self.low), str(self.high)]
    middle = (math.sqrt(self.low * self.high) if self.kind == "loguniform"
              else (self.low + self.high) / 2)
    return [repr(float(self.low)), repr(float(middle)), repr(float(self.high))]

  def grid(self) -> list:
    """The values a grid search tries (``int`` and ``choice`` only)."""
    if self.kind == "int":
      return list(range(self.low, self.high + 1))
    if self.kind == "choice":
      return list(self.choices)
    raise ConfigError(f"--sampler grid needs int(...) or choice(...) values; "
                      f"{self.text!r} is a continuous range (use --sampler tpe or random, or "
                      "list the values with choice(...)).")


def parse(text: str) -> Param:
  """One ``--search`` expression; a mistake is a ``ConfigError`` that states the grammar."""
  match = _EXPRESSION.match(text)
  if not match:
    raise _bad(text, "expected")
  key, kind, body = match.groups()
  if kind not in KINDS:
    raise _bad(text, f"unknown distribution {kind!r}; expected")
  args = _split_arguments(body)
  if any(not a for a in args):
    raise _bad(text, "an empty argument; expected")
  if kind == "choice":
    if len(args) < 2:
      raise _bad(text, "choice needs two or more values (fix one value with --set); expected")
    if len(set(args)) < len(args):
      raise _bad(text, "choice repeats a value; expected")
    return Param(key, kind, choices=tuple(args), text=text.strip())
  if len(args) != 2:
    raise _bad(text, f"{kind} takes exactly two bounds, got {len(args)}; expected")
  low, high = (_number(text, a, integer=kind == "int") for a in args)
  if not low < high:
    raise ConfigError(f"--search {text.strip()!r}: bounds in the wrong order (LOW must be < "
                      f"HIGH, got {args[0]} and {args[1]}).")
  if kind == "loguniform" and low <= 0:
    raise ConfigError(f"--search {text.strip()!r}: loguniform needs 0 < LOW, got {args[0]}.")
  return Param(key, kind, low, high, text=text.strip())


def parse_space(space: Iterable[str] | Mapping[str, str]) -> tuple[Param, ...]:
  """``--search`` expressions (or ``{key: "loguniform(1e-4,1e-2)"}``) as ``Param``s; a key
  given twice is an error."""
  if isinstance(space, str):
    raise ConfigError(f"the search space is a list of KEY=EXPR strings or a dict, got the "
                      f"string {space!r}")
  items = ([f"{k}={v}" for k, v in space.items()] if isinstance(space, Mapping)
           else list(space))
  if not items:
    raise ConfigError(f"give at least one --search {GRAMMAR}.")
  params = tuple(parse(item) for item in items)
  seen: dict[str, Param] = {}
  for param in params:  # the same spelling twice; check_space also finds aliases
    if param.key in seen:
      raise _twice(param.key, _place(seen[param.key]), _place(param))
    seen[param.key] = param
  return params


def check_space(exp: Experiment, params: tuple[Param, ...], overrides: list[str], *,
                seed: int | None = None) -> None:
  """Every bound and choice of ``params`` applied to ``exp`` (with ``overrides``, the
  ``--set`` items, and ``seed``, ``--seed``'s ``run.seed``) as ``--set`` would: an unknown
  key names the closest field, a value out of a field's range gives that field's own
  message, and a field given twice (``check_duplicates``) names both places. Nothing runs."""
  check_duplicates(exp, params, overrides, seed=seed)
  overrides = [*overrides, *([f"run.seed={seed}"] if seed is not None else [])]
  for param in params:
    for value in param.values_to_check():
      try:
        apply_overrides(exp, [*overrides, f"{param.key}={value}"])
      except ConfigError as e:
        raise ConfigError(f"--search {param.text!r} ({param.key}={value}): {e}") from None


def check_duplicates(exp: Experiment, params: tuple[Param, ...], overrides: list[str], *,
                     seed: int | None = None) -> None:
  """A field searched twice, or both fixed (``--set``, ``--seed``) and searched, however
  each spells it (``learning_rate``, ``agent.learning_rate`` and ``ppo.learning_rate`` are
  one field): a ``ConfigError`` naming the field and both places. A trial would otherwise
  take one of the two values silently (the last item applied wins)."""
  fixed: dict[str, str] = {}
  for item in overrides:
    fixed.setdefault(field_of(exp, item.partition("=")[0]), f"--set {item.strip()}")
  if seed is not None:
    fixed.setdefault("run.seed", f"--seed {seed}")
  searched: dict[str, str] = {}
  for param in params:
    field = field_of(exp, param.key)
    first = searched.get(field) or fixed.get(field)
    if first is not None:
      raise _twice(field, first, _place(param))
    searched[field] = _place(param)


def field_of(exp: Experiment, key: str) -> str:
  """The field a ``--set`` key names, written ``run.FIELD`` or ``AGENT.FIELD`` (the section
  resolved as ``configs.apply_overrides`` resolves it); a key it would refuse (unknown, or
  a bare name of both sections) is returned as written, to be refused when applied."""
  section, _, name = key.strip().rpartition(".")
  run_keys = {f.name for f in dataclasses.fields(exp.run)}
  agent_keys = {f.name for f in dataclasses.fields(exp.config)}
  if section == "run" or (not section and name in run_keys and name not in agent_keys):
    return f"run.{name}"
  if section in ("agent", exp.agent) or (not section and name in agent_keys
                                         and name not in run_keys):
    return f"{exp.agent}.{name}"
  return key.strip()


def _place(param: Param) -> str:
  return f"--search {param.text!r}"


def _twice(field: str, first: str, second: str) -> ConfigError:
  why = (" (--set fixes a value for every trial, --search searches it)"
         if first.startswith("--set") else "")
  return ConfigError(f"{field} is given twice, by {first} and by {second}: keep one{why}.")


def overrides_of(params: tuple[Param, ...], values: Mapping[str, object]) -> list[str]:
  """The ``--set`` items of one trial's sampled ``values`` (by key)."""
  return [f"{p.key}={_text(values[p.key])}" for p in params]


def _text(value) -> str:
  return repr(value) if isinstance(value, float) else str(value)


def _bad(text: str, what: str) -> ConfigError:
  return ConfigError(f"--search {text.strip()!r} does not parse: {what} {GRAMMAR}.")


def _number(text: str, arg: str, *, integer: bool):
  try:
    value = float(arg)
  except ValueError:
    raise _bad(text, f"{arg!r} is not a number; expected") from None
  if not math.isfinite(value):
    raise _bad(text, f"{arg!r} is not a finite number; expected")
  if integer:
    if not value.is_integer():
      raise _bad(text, f"int bounds are integers, got {arg!r}; expected")
    return int(value)
  return value


def _split_arguments(body: str) -> list[str]:
  """Top-level comma-separated arguments: ``(64,64),(128,128)`` is two."""
  args, depth, current = [], 0, []
  for char in body:
    if char in "([{":
      depth += 1
    elif char in ")]}":
      depth -= 1
    if char == "," and depth == 0:
      args.append("".join(current).strip())
      current = []
    else:
      current.append(char)
  args.append("".join(current).strip())
  return args
