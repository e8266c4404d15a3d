"""The spec of a ``batchrl.Agent``: what ``Agent.create``'s arguments resolve to, and the
``agent.json`` beside its checkpoints.

An agent or network may be given as a JSON file; a mistake in it names the file
(``naming_spec_files``). The spec is passed through JSON once (``jsonable``), so what is
saved is exactly what was built, and two specs compare as their sorted JSON. What a spec
built, network by network, is ``describe_networks`` (``Agent.summary``).
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

from batchrl.configclass import ConfigError
from batchrl.envs.core import Environment, GymEnvironment, make
from batchrl.errors import UserInputError
from batchrl.files import write_atomic
from batchrl.networks.layer_specs import NetworkSpecError

SPEC_FILE = "agent.json"


def load_json(path: str | os.PathLike, what: str) -> Any:
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    raise FileNotFoundError(f"{what} file {str(path)!r} does not exist.") from None
  except json.JSONDecodeError as e:
    raise ConfigError(f"{what} file {str(path)!r} is not valid JSON: {e.msg} at line "
                      f"{e.lineno}, column {e.colno}.") from None


def looks_like_path(value: Any) -> bool:
  return isinstance(value, (str, os.PathLike)) and (
      str(value).endswith(".json") or os.sep in str(value))


def resolve_agent(agent: Any, kwargs: dict) -> tuple[str, dict]:
  """``agent=`` (a name, a dict with ``type``, or a JSON file) -> (type, merged kwargs)."""
  if looks_like_path(agent):
    agent = load_json(agent, "agent spec")
  if isinstance(agent, dict):
    spec = dict(agent)
    name = spec.pop("type", spec.pop("agent", None))
    if name is None:
      raise ConfigError("an agent spec dict needs 'type' (e.g. {'type': 'ppo', ...}).")
    overlap = {k for k in kwargs if k in spec and spec[k] != kwargs[k]}
    if overlap:
      raise ConfigError(f"keys {sorted(overlap)} are given both in the agent spec and as "
                        "arguments with different values; give each once.")
    return name, {**spec, **kwargs}
  if isinstance(agent, str):
    return agent, dict(kwargs)
  raise ConfigError(f"agent must be an agent name, a dict with 'type' or a JSON file path, "
                    f"got {type(agent).__name__}.")


def resolve_network(network: Any) -> Any:
  if looks_like_path(network):
    return load_json(network, "network spec")
  return network


@contextlib.contextmanager
def naming_spec_files(agent: Any, network: Any) -> Iterator[None]:
  """A mistake in a spec read from a JSON file names the file (the user edits the file, not
  the dict it became), and comes without the chained traceback of where it was found."""
  try:
    yield
  except UserInputError as e:
    is_network = isinstance(e, NetworkSpecError) or isinstance(e.__cause__, NetworkSpecError)
    what, path = ("network", network) if is_network else ("agent", agent)
    if not looks_like_path(path) or str(path) in str(e):
      raise
    message = f"{what} spec file {str(path)!r}: {e}"
    try:
      renamed = type(e)(message)
    except TypeError:  # an error type with its own constructor
      renamed = ConfigError(message)
    # a user's mistake needs no traceback; anything else wrapped in one keeps its cause
    cause = e.__cause__
    raise renamed from (None if cause is None or isinstance(cause, UserInputError)
                        else cause)


def env_specs(environment) -> tuple[dict, dict, int | None]:
  """states, actions and max_episode_timesteps of an environment, id or gym env."""
  if isinstance(environment, Environment):
    limit = getattr(environment, "max_episode_timesteps", None)
    if isinstance(environment, GymEnvironment) and limit is None:
      spec = getattr(environment.env, "spec", None)
      limit = getattr(spec, "max_episode_steps", None)
    return environment.states, environment.actions, limit
  env = make(environment)
  try:
    spec = getattr(env.env, "spec", None)
    return env.states, env.actions, getattr(spec, "max_episode_steps", None)
  finally:
    env.close()


# ---------------------------------------------------------------------- summary


def describe_networks(params) -> list[str]:
  """One line per network of a model's ``params`` (arrays or shape structs): its name (the
  first key under ``params``), parameter count and weight shapes by layer path, e.g.
  ``critic: 183,042 parameters; weights critic_0/MLP_0/Dense_0 65x256, ...``. Target copies
  (``target_*``) are left out: they repeat the networks."""
  groups: dict[str, list[tuple[str, tuple]]] = {}
  counts: dict[str, int] = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    keys = [_key_name(k) for k in path]
    if not keys or keys[0].startswith("target"):
      continue
    name = keys[0]
    counts[name] = counts.get(name, 0) + int(np.prod(leaf.shape))
    if keys[-1] in ("kernel", "embedding") and len(leaf.shape) >= 2:
      groups.setdefault(name, []).append(("/".join(keys[1:-1]), tuple(leaf.shape)))
  lines = []
  for name, count in counts.items():
    layers = ", ".join(f"{path or name} {'x'.join(map(str, shape))}"
                       for path, shape in groups.get(name, []))
    counted = f"{count:,} parameter{'s' if count != 1 else ''}"
    lines.append(f"{name}: {counted}" + (f"; weights {layers}" if layers else ""))
  return lines


def _key_name(key) -> str:
  for attr in ("key", "name", "idx"):
    if hasattr(key, attr):
      return str(getattr(key, attr))
  return str(key)


# ---------------------------------------------------------------------- JSON and files


def jsonable(value):
  """The spec through JSON, so what is saved is exactly what was built (tuples -> lists)."""
  try:
    return json.loads(json.dumps(value, default=_json_default))
  except TypeError as e:
    raise ConfigError(f"the agent spec must be JSON-able: {e}") from None


def _json_default(value):
  if isinstance(value, np.generic):
    return value.item()
  if isinstance(value, np.ndarray):
    return value.tolist()
  raise TypeError(f"{type(value).__name__} {value!r} is not JSON-able")


def comparable(spec: dict) -> str:
  return json.dumps(spec, sort_keys=True)


def write_spec(directory: Path, spec: dict) -> None:
  write_atomic(Path(directory) / SPEC_FILE, json.dumps(spec, indent=1, sort_keys=True))


def read_spec(directory) -> dict:
  path = Path(directory) / SPEC_FILE
  if not Path(directory).is_dir():
    raise FileNotFoundError(f"no saved agent at {str(directory)!r}: the directory does not "
                            "exist.")
  if not path.exists():
    raise FileNotFoundError(f"no saved agent in {str(directory)!r}: {SPEC_FILE} is missing "
                            "(save with agent.save(directory)).")
  return load_json(path, "saved agent spec")
