"""The suites of ``batchrl bench``: named configs x environments x seeds, each at a budget,
with the published figures a reader compares them with.

A suite entry is one ``batchrl train`` command without its seed: a named config, the
environment it runs on (``--set env=...``), its budget (``--set steps=...``) and any other
``--set`` it needs. Scores are read at the suite's ``budgets`` (and at each entry's end):
the last greedy evaluation up to the end of the training phase that reached the budget
and the best one up to there (``report.reading_step``).

References are published results with their settings named (library, environment version,
seeds, budget); they are other code on other machines, so they say what a score should
look like, not what this machine must reproduce step for step.
"""
from __future__ import annotations

import dataclasses

from batchrl.configclass import ConfigError
from batchrl.errors import did_you_mean


@dataclasses.dataclass(frozen=True)
class Entry:
  """One ``batchrl train --config CONFIG [--set env=ENV] [--set steps=STEPS] [--set ...]``."""

  config: str  # a named config (``batchrl configs``)
  env: str | None = None  # None: the config's own environment
  steps: int | None = None  # None: the config's own budget
  sets: tuple[str, ...] = ()  # further ``--set key=value`` items
  label: str | None = None  # names its runs where entries share a config and environment

  def overrides(self) -> list[str]:
    """Its ``--set`` items, environment and budget first."""
    given = [f"env={self.env}"] if self.env else []
    given += [f"steps={self.steps}"] if self.steps else []
    return given + list(self.sets)


@dataclasses.dataclass(frozen=True)
class Suite:
  name: str
  description: str
  entries: tuple[Entry, ...]
  budgets: tuple[int, ...] = ()  # steps where scores are read, besides each entry's end
  seeds: int = 3  # default --seeds
  machine: str = "cpu"  # 'gpu': sized for a GPU machine (runs anywhere, slowly)


@dataclasses.dataclass(frozen=True)
class Reference:
  """A published result: ``score`` (± ``spread`` over its seeds where given) at ``steps``."""

  source: str  # who published it, with its settings
  score: float
  steps: int
  spread: float | None = None

  def text(self) -> str:
    spread = "" if self.spread is None else f" ± {self.spread:g}"
    return f"{self.source}: {self.score:g}{spread} at {steps_text(self.steps)}"


def steps_text(steps: int) -> str:
  """300000 -> '300k', 10000000 -> '10M', 4096 -> '4096'."""
  for unit, size in (("M", 1_000_000), ("k", 1_000)):
    if steps >= size and steps % (size // 10) == 0:
      return f"{steps / size:g}{unit}"
  return str(steps)


# ------------------------------------------------------------------ published results

_CLEANRL = "CleanRL (MuJoCo v4, 3 seeds)"
# the SimbaV2 repository's baseline result files (results/baseline/*.csv; MuJoCo v4, 5-10
# seeds): what the off-policy frontier learns in 100k steps
_SIMBAV2_CSV = "SimbaV2 repository's baselines (v4)"
_ZOO = "SB3 rl-zoo (MuJoCo v3, 1 run)"
_M = 1_000_000

# (agent family, environment name without its version) -> results
REFERENCES: dict[tuple[str, str], tuple[Reference, ...]] = {
    ("sac", "HalfCheetah"): (Reference(_CLEANRL, 9635, _M, 1424), Reference(_ZOO, 9535, _M),
        Reference(f"SAC, {_SIMBAV2_CSV}", 6156, 100_000)),
    ("sac", "Hopper"): (Reference(_CLEANRL, 2310, _M, 343), Reference(_ZOO, 2326, _M),
        Reference(f"SAC, {_SIMBAV2_CSV}", 1103, 100_000)),
    ("sac", "Walker2d"): (Reference(_CLEANRL, 3591, _M, 911), Reference(_ZOO, 3863, _M),
        Reference(f"SAC, {_SIMBAV2_CSV}", 690, 100_000)),
    ("sac", "Ant"): (Reference(_ZOO, 4616, _M),
        Reference(f"SAC, {_SIMBAV2_CSV}", 747, 100_000)),
    ("crossq", "HalfCheetah"): (Reference(f"CrossQ, {_SIMBAV2_CSV}", 8112, 100_000),),
    ("crossq", "Hopper"): (Reference(f"CrossQ, {_SIMBAV2_CSV}", 2764, 100_000),),
    ("crossq", "Walker2d"): (Reference(f"CrossQ, {_SIMBAV2_CSV}", 3914, 100_000),),
    ("crossq", "Ant"): (Reference(f"CrossQ, {_SIMBAV2_CSV}", 2299, 100_000),),
    # the SimbaV2 repository's own result files (results/simbaV2_utd8.csv): 8 gradient steps
    # per environment step, as the simbav2 entries of mujoco-100k run
    ("simbav2", "HalfCheetah"): (Reference(f"SimbaV2 (update ratio 8), {_SIMBAV2_CSV}", 7505,
                                           100_000),),
    ("simbav2", "Hopper"): (Reference(f"SimbaV2 (update ratio 8), {_SIMBAV2_CSV}", 2927,
                                      100_000),),
    ("simbav2", "Walker2d"): (Reference(f"SimbaV2 (update ratio 8), {_SIMBAV2_CSV}", 4488,
                                        100_000),),
    ("simbav2", "Ant"): (Reference(f"SimbaV2 (update ratio 8), {_SIMBAV2_CSV}", 3942,
                                   100_000),),
    ("simbav2", "Humanoid"): (Reference(f"SimbaV2 (update ratio 8), {_SIMBAV2_CSV}", 1825,
                                        100_000),),
    ("td3", "HalfCheetah"): (Reference(_CLEANRL, 9583, _M, 126), Reference(_ZOO, 9656, _M)),
    ("td3", "Hopper"): (Reference(_CLEANRL, 3135, _M, 360), Reference(_ZOO, 3606, _M)),
    ("td3", "Walker2d"): (Reference(_CLEANRL, 4058, _M, 659), Reference(_ZOO, 4718, _M)),
    ("td3", "Ant"): (Reference(_ZOO, 5813, _M),),
    ("tqc", "HalfCheetah"): (Reference(_ZOO, 12090, _M),),
    ("ppo", "HalfCheetah"): (Reference("CleanRL ppo_continuous_action (v4)", 1443, _M),
                             Reference("SB3 rl-zoo (v3)", 5819, _M)),
    ("ppo", "Hopper"): (Reference("CleanRL ppo_continuous_action (v4)", 2383, _M),
                        Reference("SB3 rl-zoo (v3)", 2410, _M)),
    ("ppo", "Walker2d"): (Reference("CleanRL ppo_continuous_action (v4)", 2288, _M),
                          Reference("SB3 rl-zoo (v3)", 3479, _M)),
    ("ppo", "Ant"): (Reference("SB3 rl-zoo (v3)", 1327, _M),),
    ("ppo", "CartPole"): (Reference("SB3 rl-zoo", 500, 100_000),
                          Reference("CleanRL ppo.py", 490, 500_000, 6)),
    ("ppo", "Pendulum"): (Reference("SB3 rl-zoo", -172, 100_000),),
    ("trpo", "CartPole"): (Reference("sb3-contrib rl-zoo", 500, 100_000),),
    ("trpo", "Pendulum"): (Reference("sb3-contrib rl-zoo (gSDE)", -175, 100_000),),
    ("a2c", "CartPole"): (Reference("SB3 rl-zoo", 500, 500_000),),
    ("dqn", "CartPole"): (Reference("SB3 rl-zoo", 500, 50_000),
                          Reference("CleanRL dqn_jax", 498, 500_000, 2)),
    ("naf", "Pendulum"): (Reference("Intel Coach (about, from its plot)", -200, 10_000),),
    ("sac", "Pendulum"): (Reference("SB3 rl-zoo settings (2x256), measured", -141, 20_000),),
    ("ppo", "Breakout"): (Reference("CleanRL ppo_atari (8 envs)", 415, 10 * _M, 28),
                          Reference("SB3 rl-zoo", 398, 10 * _M)),
    ("ppo", "Pong"): (Reference("CleanRL ppo_atari (8 envs)", 20.4, 10 * _M, 0.2),
                      Reference("SB3 rl-zoo", 20.99, 10 * _M)),
    ("ppo", "Breakout-MinAtar"): (Reference("gymnax-blines PPO (64 envs), low end of its "
                                            "curves", 23, 10 * _M),),
}


def references(agent: str, env: str) -> tuple[Reference, ...]:
  """The published results for ``agent`` (a family: 'sac', 'ppo', ...) on ``env`` (an id
  such as 'Hopper-v5', 'BreakoutNoFrameskip-v4' or 'Breakout-MinAtar')."""
  return REFERENCES.get((agent, env_family(env)), ())


def env_family(env: str) -> str:
  """'Hopper-v5' -> 'Hopper'; 'BreakoutNoFrameskip-v4' -> 'Breakout'; MinAtar ids stay."""
  if env.endswith("-MinAtar"):
    return env
  name = env.rsplit("-v", 1)[0]
  return name.removesuffix("NoFrameskip")


# ------------------------------------------------------------------ the suites

_MUJOCO = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5")
# the smoke suite's runs: a few seconds each once compiled, evaluated twice
_TINY = ("eval_every=2048", "report_every=2048", "checkpoint_every=4096", "eval_episodes=2")

SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("smoke", "two fused CartPole runs of 4k steps each, for trying the command and "
          "for tests", (Entry("cartpole_fused", steps=4096, sets=_TINY),
                        Entry("pqn_cartpole_fused", steps=4096, sets=_TINY)), seeds=2),
    Suite("classic", "every trainable agent on its classic-control task at its named "
          "config's budget (the in-graph gymnax versions, where one exists)",
          tuple(Entry(name) for name in (
              "cartpole_fused", "pendulum_fused", "vpg_cartpole_fused", "trpo_cartpole_fused",
              "trpo_pendulum_fused", "a2c_cartpole_fused", "dqn_cartpole_fused",
              "ddqn_cartpole", "pqn_cartpole_fused", "naf_pendulum", "dqfd_cartpole",
              "ddpg_pendulum_fused", "td3_pendulum_fused", "sac_pendulum_fused",
              "sac_cartpole_fused"))),
    Suite("minatar", "DQN and PQN on MinAtar Breakout (gymnax) at their named budgets",
          (Entry("dqn_minatar_breakout"), Entry("pqn_minatar_breakout"))),
    Suite("mujoco-100k", "SAC, TD3, TQC, CrossQ, SAC and TQC on SimBa networks, and DroQ with "
          "their published MuJoCo values on five v5 tasks (Humanoid added), 100k steps: how "
          "much each learns per sample",
          tuple(Entry(config, env, 100_000)
                for config in ("sac_mujoco", "td3_mujoco", "tqc_mujoco", "crossq_mujoco",
                               "sac_simba_mujoco", "tqc_simba_mujoco", "droq_mujoco")
                for env in _MUJOCO + ("Humanoid-v5",))),
    # SimbaV2's gradient step is about 28 GFLOP (2 critics of two 512-wide blocks, 4x wide
    # inside): 148 ms a learning step on 2 quiet CPU cores (sac_step.py --algo simbav2,
    # 2026-12-07), so 8 gradient steps per environment step for 100k steps is 1-2 days there
    Suite("simbav2-100k", "SimbaV2 with the reference's values and its published update "
          "ratio (8 gradient steps per environment step) on five MuJoCo v5 tasks, 100k steps: "
          "sized for a GPU machine",
          tuple(Entry("simbav2_mujoco", env, 100_000, sets=("repeat_update=8",))
                for env in _MUJOCO + ("Humanoid-v5",)), machine="gpu"),
    Suite("mujoco-300k", "SAC, TD3 and PPO with the published MuJoCo values on four v5 "
          "tasks, 300k steps", tuple(Entry(config, env, 300_000)
                                     for config in ("sac_mujoco", "td3_mujoco", "ppo_mujoco")
                                     for env in _MUJOCO), budgets=(100_000,)),
    Suite("mujoco-1m", "SAC, TD3 and PPO with the published MuJoCo values on four v5 tasks, "
          "1M steps", tuple(Entry(config, env, _M)
                            for config in ("sac_mujoco", "td3_mujoco", "ppo_mujoco")
                            for env in _MUJOCO), budgets=(100_000, 300_000)),
    Suite("atari-10m", "PPO and DQN on Breakout and Pong, 10M steps (40M frames): sized for "
          "a GPU machine", tuple(Entry(config, env, 10 * _M)
                                 for config in ("ppo_atari", "dqn_atari")
                                 for env in ("BreakoutNoFrameskip-v4", "PongNoFrameskip-v4")),
          budgets=(_M,), machine="gpu"),
)}


def suite(name: str) -> Suite:
  """The suite called ``name``; an unknown name is an error naming the closest ones."""
  found = SUITES.get(name)
  if found is None:
    raise ConfigError(f"unknown suite {name!r}{did_you_mean(name, list(SUITES))}. Suites: "
                      f"{', '.join(SUITES)}.")
  return found


def select(found: Suite, only: str | None) -> Suite:
  """``found`` with only the entries ``only`` names: comma-separated items, each a config
  (``td3_mujoco``), an environment (``Ant-v5``) or both (``sac_mujoco:Ant-v5``); None keeps
  every entry. An item that names no entry is an error listing the suite's entries."""
  if only is None:
    return found
  items = [item.strip() for item in only.split(",") if item.strip()]
  if not items:
    raise ConfigError("--only names no entry: give CONFIG, ENV or CONFIG:ENV items, "
                      "comma-separated.")
  kept = set()
  for item in items:
    matched = {entry for entry in found.entries if _names(entry, item)}
    if not matched:
      raise ConfigError(f"--only {item!r} names no entry of suite {found.name!r}; its "
                        f"entries: {', '.join(entry_name(e) for e in found.entries)}.")
    kept |= matched
  return dataclasses.replace(found, entries=tuple(e for e in found.entries if e in kept))


def entry_name(entry: Entry) -> str:
  """``config:env`` (``config`` alone for an entry on its config's own environment)."""
  where = entry.label or entry.env
  return f"{entry.config}:{where}" if where else entry.config


def _names(entry: Entry, item: str) -> bool:
  config, _, env = item.partition(":")
  wheres = {entry.env, entry.label} - {None}
  if env:
    return config == entry.config and env in wheres
  return item == entry.config or item in wheres


def table() -> str:
  """The suites, one line each: name, runs per seed, default seeds, what it is."""
  width = max(map(len, SUITES))
  return "\n".join(f"{s.name.ljust(width)}  {len(s.entries):2d} runs x {s.seeds} seeds  "
                   f"{s.description}" for s in SUITES.values())
