"""``Agent.create(preset=NAME)``: the agent values of a named config (``batchrl train``'s,
listed by ``batchrl configs``) for an agent with its own number of streams.

A named config is a run (environment, number of envs, budget) plus the agent's config; a
preset takes the agent's config and keeps what it means per transition, whatever the
number of streams (``parallel_interactions``) the object API acts for:

- the schedule: an update every ``update_frequency * num_envs`` transitions (replay agents)
  or from ``rollout_length * num_envs`` of them (on-policy agents), with the same number of
  gradient steps and the same batch and minibatch sizes. The field that counts steps per
  stream is rescaled to the streams; a stream count that does not divide it is an error
  naming the counts that do;
- schedules fitted to a budget (learning rates annealed to 0) anneal over the named run's
  budget of environment steps, as in ``batchrl train``;
- the networks: the config's own layout (``actor_layers`` ...), not ``network='auto'``.

The run's environment settings (its wrappers, observation or reward normalization, the
number of envs) are not the agent's: ``batchrl configs NAME`` lists them, and the object
API's ``preprocessing=`` adds normalization where a preset's run had it.

Changes to the preset are its config's field names (``batchrl configs NAME`` lists them,
as ``--set`` takes them), not TensorForce's keys. What is saved (``agent.spec``) is the
whole resulting config, so a saved agent loads the same values even if the preset changes.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from batchrl import configs
from batchrl.agents.families import family
from batchrl.configclass import ConfigError, from_dict, to_dict
from batchrl.errors import did_you_mean

# the fields that count steps of each stream between updates (the model's period)
PER_STREAM_PERIODS = ("update_frequency", "rollout_length")


def preset_config(name: str, changes: dict, num_streams: int) -> tuple[str, dict]:
  """``(family name, config dict)`` of preset ``name`` with ``changes`` (config field names)
  for an agent of ``num_streams`` streams. Errors name what was wrong and what is valid."""
  if not isinstance(name, str) or name not in configs.REGISTRY:
    valid = configs.names()
    raise ConfigError(f"unknown preset {name!r}{did_you_mean(str(name), valid)}. Presets are "
                      f"the named configs of `batchrl configs`: {', '.join(valid)}.")
  exp = configs.REGISTRY.get(name)  # unfitted: its schedules are fitted below
  config_class = family(exp.agent).config_class
  fields = {f.name for f in dataclasses.fields(config_class)}
  for key in changes:
    if key not in fields:
      raise ConfigError(f"unknown key {key!r} for preset {name!r} ({exp.agent} config)"
                        f"{did_you_mean(key, sorted(fields))}. A preset takes its config's "
                        f"field names (see `batchrl configs {name}`): "
                        f"{', '.join(sorted(fields))}.")
  values = {**to_dict(exp.config), **changes}
  values = _per_stream(values, exp.run.num_envs, num_streams, name, changes)
  config = from_dict(config_class, values)
  fit = family(exp.agent).fit_schedules
  if fit is not None:
    config = fit(config, lambda period: exp.run.iterations(period * num_streams))
  return exp.agent, to_dict(config)


def _per_stream(values: dict, num_envs: int, num_streams: int, name: str,
                changes: dict) -> dict:
  """The period fields rescaled from the run's ``num_envs`` to ``num_streams``: the same
  transitions per update. A value given in ``changes`` counts steps of this agent's streams
  and is kept as given."""
  if isinstance(num_streams, bool) or not isinstance(num_streams, int) or num_streams < 1:
    raise ConfigError(f"parallel_interactions must be a positive int, got {num_streams!r}.")
  values = dict(values)
  for field in PER_STREAM_PERIODS:
    if field not in values or field in changes or num_envs == num_streams:
      continue
    transitions = values[field] * num_envs
    if transitions % num_streams:
      fits = [n for n in range(1, transitions + 1) if transitions % n == 0]
      raise ConfigError(
          f"preset {name!r} updates every {transitions} transitions ({field}="
          f"{values[field]} steps of {num_envs} envs); parallel_interactions={num_streams} "
          f"does not divide it. Use one of {', '.join(map(str, fits))}, or give {field} "
          "(steps per stream) yourself.")
    values[field] = transitions // num_streams
  return values


def check_preset_arguments(preset: str, agent: Any, network: Any, family_name: str) -> None:
  """A preset fixes the agent type and its networks: ``agent=`` may only repeat the type and
  ``network=`` must be 'auto' (the preset's layout)."""
  if agent is not None and agent != family_name:
    raise ConfigError(f"preset {preset!r} is a {family_name} config; give agent={family_name!r}"
                      f" or leave agent= out (got {agent!r}).")
  if network != "auto":
    raise ConfigError(f"preset {preset!r} builds its own networks (see `batchrl configs "
                      f"{preset}`); change them through its fields (e.g. actor_layers=[64, "
                      "64]) instead of network=.")

