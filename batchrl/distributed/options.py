"""``RayOptions``: how a run is spread over Ray (launch settings, not part of the experiment).

The experiment's ``run.num_envs`` is always ``runners × envs_per_runner``: the learner's
batch is the one a local run with that many envs makes. ``resolve`` fills in the missing
one of the two from the experiment.
"""
from __future__ import annotations

import dataclasses
import math
import os

from batchrl.configclass import ConfigError


@dataclasses.dataclass(frozen=True)
class RayOptions:
  """Settings of a distributed run.

  Attributes:
    address: a Ray head's ``HOST:PORT`` (or ``'auto'``) to join; None starts a local
      instance whose temp dir is the run directory's ``ray/``.
    runners: N, env-runner actors.
    envs_per_runner: M, envs each runner steps (None: ``run.num_envs / N``).
    runner_timeout: seconds a runner may take for one rollout or evaluation before it is
      counted as hung, killed and replaced.
    start_timeout: extra seconds allowed for a runner's first answer (start, compile).
    max_restarts: runner replacements allowed over the run; one more stops it with an
      error (its checkpoints are kept).
    refresh_every: replay agents: updates between parameter refreshes (K); None picks K
      so that each runner call collects about ``min_round_steps`` env steps.
    min_round_steps: see ``refresh_every``.
    runner_cpus: CPUs Ray reserves per runner.
    local_cpus: CPUs of a local instance (None: enough for every runner, at least the
      machine's count).
  """

  address: str | None = None
  runners: int = 2
  envs_per_runner: int | None = None
  runner_timeout: float = 300.0
  start_timeout: float = 300.0
  max_restarts: int = 5
  refresh_every: int | None = None
  min_round_steps: int = 512
  runner_cpus: float = 1.0
  local_cpus: int | None = None

  def __post_init__(self):
    for name in ("runners", "max_restarts", "min_round_steps"):
      value = getattr(self, name)
      least = 0 if name == "max_restarts" else 1
      if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"RayOptions.{name} must be an int >= {least}, got {value!r}.")
    for name in ("envs_per_runner", "refresh_every", "local_cpus"):
      value = getattr(self, name)
      if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                or value < 1):
        raise ConfigError(f"RayOptions.{name} must be None or an int >= 1, got {value!r}.")
    for name in ("runner_timeout", "start_timeout", "runner_cpus"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"RayOptions.{name} must be a number > 0, got {value!r}.")

  def resolve(self, num_envs: int) -> "RayOptions":
    """With ``envs_per_runner`` set from the experiment's ``num_envs`` when it is None."""
    if self.envs_per_runner is not None:
      return self
    if num_envs % self.runners:
      raise ConfigError(f"run.num_envs={num_envs} does not split evenly over {self.runners} "
                        "runners; give --envs-per-runner M (the run then has runners x M "
                        "envs) or another --runners.")
    return dataclasses.replace(self, envs_per_runner=num_envs // self.runners)

  def instance_cpus(self) -> int:
    """CPUs of a local instance: ``local_cpus``, else the machine's count, but always
    enough for every runner (so runners start on a machine with fewer cores)."""
    return self.local_cpus or max(os.cpu_count() or 1,
                                  math.ceil(self.runners * self.runner_cpus))

  def overrides(self) -> list[str]:
    """The ``--set`` overrides that make the experiment's env count ``runners × M``."""
    if self.envs_per_runner is None:
      return []
    return [f"run.num_envs={self.runners * self.envs_per_runner}"]
