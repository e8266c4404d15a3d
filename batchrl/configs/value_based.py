"""The value-based agents' config classes (DQN family) and their named configs.

``DQNConfig`` lives here rather than beside the agent (``batchrl.agents.dqn.config``
re-exports it) because ``batchrl.configs`` imports this module while it registers agent
families: defined here, it exists before anything asks for it, whichever module is imported
first.

DQNConfig defaults are TensorForce 0.3's (``reference/tensorforce.md``: Adam 1e-3, discount
0.99, batch 32, a replay memory of 1e5, an update every 4 steps from step 10000 on, a hard
target sync every 10000 steps) plus epsilon-greedy exploration from 1.0 to 0.1 over 10000
steps. Units: ``update_frequency`` counts ``store`` calls (one call stores one transition of
each of the ``num_envs`` environments) and is the model's ``period``; ``first_update``,
``target_update_frequency``, the exploration schedule and ``beta_steps`` count environment
steps summed over environments (transitions stored), as TensorForce's timesteps did.

Named configs for ``batchrl train``:

========================  =========  =======================================================
name                      backend    what
========================  =========  =======================================================
``dqn_cartpole``          gymnasium  CartPole-v1, 8 host envs, 49k steps: the rl-zoo DQN
                                     settings (lr 2.3e-3, batch 64, 128 gradient steps
                                     every 256 env steps, epsilon to 0.04 over 8k steps,
                                     Huber loss) with double-Q targets and a 128x128
                                     network (rl-zoo: 256x256, 3x the compute)
``dqn_cartpole_fused``    gymnax     ``dqn_cartpole``'s settings with a 64x64 network on
                                     CartPole-v1 in the graph, 8 envs, 98k steps; the
                                     whole run is one program
``ddqn_cartpole``         gymnax     the rl-zoo settings (256x256) with double-Q targets
                                     in the graph, 100k steps
``dqn_minatar_breakout``  gymnax     MinAtar Breakout (``Breakout-MinAtar``, 10x10x4
                                     observations), 8 envs, 100k steps: Double DQN on a
                                     small conv network written as JSON
                                     (``MINATAR_NETWORK``, the same as
                                     ``examples/configs/minatar_conv_network.json``)
========================  =========  =======================================================

Measured on the shared 2-core CPU; evaluation is deterministic, the mean over the first
episode of each of 8 envs; tuning seeds are ``jax.random.split`` of keys 0 and 1 (fused
runs, the same dynamics as the host env):

* rl-zoo settings, plain DQN targets: best >= 475 within 49k steps on 4 of 7 seeds.
* with double-Q targets (``ddqn_cartpole``): evaluating every 4k steps, 4 of 4 seeds
  within 45k (first at 29-45k); evaluating every 10k, 2 of 3 other seeds within 100k.
* the same with a 128x128 network (``dqn_cartpole``): evaluating every 4k steps, 7 of 8
  seeds within 49k (first at 33-49k; the eighth peaked at 459), for a third of the
  256x256 network's time (0.33 against 0.85 ms per gradient step). ``batchrl train
  --config dqn_cartpole`` (host envs, seed 0): 500 at 41k steps, 29 s in-process
  (compiling included, load average 4); with 256x256 it reached 500 at 45k in 48 s.
* the same with 128x128, evaluating every 4k steps: 8 of 8 seeds within 100k (first at
  25-53k); with 64x64 (``dqn_cartpole_fused``): 8 of 8 within 100k (first at 20-53k, 7
  within 49k) in half the time again (0.17 ms per gradient step). ``batchrl train
  --config dqn_cartpole_fused`` (seed 0): 500 at 66k steps, 19 s for the whole process;
  with 128x128 500 at 74k in 27 s (load average 3). The host config keeps 128x128: on
  host seed 0, 64x64 peaked at 334 within 49k. Both evaluate every 4k steps: DQN on
  CartPole swings between 500 and 100 from one evaluation to the next (every 10k, the
  128x128 fused seed 0 never showed more than 378). Half the gradient steps (64 per 256
  env steps, as ``dqfd_cartpole``), 128x128: 4 of 4 seeds within 100k, but late
  (33-94k); plain DQN targets with those: 6 of 7, first at 44-78k.

DQN on CartPole oscillates after it first reaches 500, so the configs evaluate often and the
figures are the best evaluation.

* ``dqn_minatar_breakout`` (``batchrl train``, seed 0, greedy evaluation = mean of the
  first episode of 8 envs; a random policy scores about 0.5-1): 2.25 at 20k steps, 5.6 at
  40k, 7.75 at 60k, 8.6 at 80k, 7.5 at 100k; 2 min 9 s for the whole run on the shared
  2-core CPU (load average 3). Before XLA's CPU options changed (other float rounding):
  2.75, 6.5, 8.4, 9.0, 9.0. Published MinAtar DQN runs reach 15-20 after millions of
  steps.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
from typing import Any, Literal

from batchrl.configclass import ConfigError, configclass, param
from batchrl.exploration import ExplorationSpecError, build_exploration

DQN_MEMORIES = ("replay", "prioritized_replay", "naive_prioritized_replay")
DEFAULT_EXPLORATION = json.dumps({"type": "epsilon_anneal", "initial_epsilon": 1.0,
                                  "final_epsilon": 0.1, "timesteps": 10000})


@configclass
class ReplayConfig:
  """What every replay agent (DQN, DDQN, DQFD, NAF) shares: the memory, the update schedule,
  the TD loss and the optimizer. Agent configs add their network and exploration fields."""

  memory: str = param("replay", "Replay memory: 'replay' (uniform), 'prioritized_replay' (sum "
                      "tree) or 'naive_prioritized_replay' (O(N) draws).")
  memory_capacity: int = param(100_000, "Transitions the memory holds (rounded down to whole "
                               "rows of num_envs).")
  prioritization_weight: float = param(0.6, "Prioritized memories: alpha, priority = "
                                       "(|TD error| + constant) ** alpha.")
  prioritization_constant: float = param(1e-6, "Prioritized memories: added to |TD error| so "
                                         "no priority drops to 0.")
  beta_initial: float = param(0.4, "Prioritized memories: importance-weight exponent at the "
                              "start, annealed linearly to 1.")
  beta_steps: int | None = param(None, "Prioritized memories: environment steps over which "
                                 "beta reaches 1 (None: beta stays beta_initial).")

  batch_size: int = param(32, "Transitions per gradient step.")
  update_frequency: int = param(4, "store calls between updates (the model's period); each "
                                "stores num_envs transitions.")
  first_update: int = param(10_000, "Environment steps stored before the first update.")
  repeat_update: int = param(1, "Gradient steps per update (each on a fresh batch).")
  target_update_frequency: int = param(10_000, "Environment steps between target network "
                                       "updates (checked at each update).")
  update_target_weight: float = param(1.0, "tau: target <- tau * online + (1 - tau) * target "
                                      "at each target update (1 = hard copy).")

  discount: float = param(0.99, "Reward discount gamma.")
  clip_loss: float = param(0.0, "If > 0, Huber loss with this linear bound (delta); else "
                           "0.5 * squared TD error.")
  learning_rate: float = param(1e-3, "Adam step size.")
  adam_epsilon: float = param(1e-8, "Adam epsilon.")
  max_grad_norm: float | None = param(None, "Clip gradients to this global norm (None: off).")

  def replace(self, **changes):
    """A copy with ``changes``; unknown keys are errors naming the closest field."""
    names = [f.name for f in dataclasses.fields(self)]
    for key in changes:
      if key not in names:
        close = difflib.get_close_matches(key, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"Unknown {type(self).__name__} field {key!r}.{hint}")
    return dataclasses.replace(self, **changes)


@configclass
class DQNConfig(ReplayConfig):
  """Hyper-parameters of ``make_dqn`` (see the module docstring for units); the memory,
  schedule, loss and optimizer fields are ``ReplayConfig``'s."""

  network: str | None = param(None, "None: an MLP of hidden_layers on a Box observation with one "
                              "Discrete action (the 'flat' layout). Else a network spec as JSON "
                              "text (batchrl.networks.layered) for any states, int/bool actions "
                              "and masks; end it with a 'dueling' layer of size = number of "
                              "Q-values for dueling heads.")
  hidden_layers: tuple[int, ...] = param((64, 64), "Flat layout: hidden sizes of the MLP.")
  activation: Literal["relu", "tanh"] = param("relu", "Flat layout: hidden activation.")
  dueling: bool = param(False, "Dueling head, Q = V + A - mean(A) (Wang et al.); with a network "
                        "spec, ending the spec with a 'dueling' layer does the same.")
  double_dqn: bool = param(False, "Double DQN targets: the online network picks the next "
                           "action, the target network values it.")
  n_step: int = param(1, "n-step returns: sum n discounted rewards, then bootstrap; cut at "
                      "episode ends (bootstrap from the final observation on truncation, "
                      "not on termination).")
  exploration: str | None = param(DEFAULT_EXPLORATION, "Epsilon-greedy exploration inside the "
                                  "model's act, as JSON text of a batchrl.exploration spec "
                                  "(constant, linear_decay, epsilon_anneal, epsilon_decay; "
                                  "timesteps = environment steps stored). None: greedy.")

  def __post_init__(self):
    check_dqn(self, "dqn")


def check_dqn(c: DQNConfig, prefix: str) -> None:
  """``DQNConfig``'s fields (also DQFD's); errors name them as ``<prefix>.<field>``."""
  check_network_fields(c, prefix)
  if c.memory == "sequential":
    raise ConfigError(f"{prefix}.memory 'sequential' samples windows for recurrent networks; "
                      "DQN trains on single transitions (n-step windows come from n_step). "
                      f"Use one of {', '.join(DQN_MEMORIES)}.")
  check_replay(c, prefix)
  if c.n_step < 1:
    raise ConfigError(f"{prefix}.n_step must be >= 1, got {c.n_step!r}.")
  parse_exploration(c.exploration, prefix)


def check_network_fields(c, prefix: str) -> None:
  """``network`` (JSON text or None) and the flat layout's ``hidden_layers``."""
  if c.network is not None:
    try:
      json.loads(c.network)
    except json.JSONDecodeError as e:
      raise ConfigError(f"{prefix}.network is not valid JSON: {e}") from None
  if not c.hidden_layers or any(n < 1 for n in c.hidden_layers):
    raise ConfigError(f"{prefix}.hidden_layers must be positive sizes, got {c.hidden_layers!r}.")


def check_replay(c: ReplayConfig, prefix: str) -> None:
  """The ``ReplayConfig`` fields; errors name them as ``<prefix>.<field>``."""
  if c.memory not in DQN_MEMORIES:
    close = difflib.get_close_matches(c.memory, DQN_MEMORIES, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown {prefix}.memory {c.memory!r}.{hint} Valid: "
                      f"{', '.join(DQN_MEMORIES)}.")
  for name in ("memory_capacity", "batch_size", "update_frequency", "repeat_update",
               "target_update_frequency"):
    if getattr(c, name) < 1:
      raise ConfigError(f"{prefix}.{name} must be >= 1, got {getattr(c, name)!r}.")
  if c.memory_capacity < c.batch_size:
    raise ConfigError(f"{prefix}.memory_capacity ({c.memory_capacity}) is smaller than "
                      f"batch_size ({c.batch_size}): a batch could never be drawn.")
  if c.first_update < 0:
    raise ConfigError(f"{prefix}.first_update must be >= 0, got {c.first_update!r}.")
  if c.beta_steps is not None and c.beta_steps < 1:
    raise ConfigError(f"{prefix}.beta_steps must be None or >= 1, got {c.beta_steps!r}.")
  if not 0.0 <= c.discount <= 1.0:
    raise ConfigError(f"{prefix}.discount must be in [0, 1], got {c.discount!r}.")
  if not 0.0 < c.update_target_weight <= 1.0:
    raise ConfigError(f"{prefix}.update_target_weight (tau) must be in (0, 1], got "
                      f"{c.update_target_weight!r}.")
  for name in ("learning_rate", "adam_epsilon"):
    if not getattr(c, name) > 0:
      raise ConfigError(f"{prefix}.{name} must be > 0, got {getattr(c, name)!r}.")
  for name in ("clip_loss", "prioritization_weight", "prioritization_constant"):
    if getattr(c, name) < 0:
      raise ConfigError(f"{prefix}.{name} must be >= 0, got {getattr(c, name)!r}.")
  if not 0.0 <= c.beta_initial <= 1.0:
    raise ConfigError(f"{prefix}.beta_initial must be in [0, 1], got {c.beta_initial!r}.")
  if c.max_grad_norm is not None and not c.max_grad_norm > 0:
    raise ConfigError(f"{prefix}.max_grad_norm must be None or > 0, got {c.max_grad_norm!r}.")


def parse_exploration(text: str | None, prefix: str = "dqn"):
  """The ``Exploration`` of ``DQNConfig.exploration`` (None when greedy)."""
  if text is None:
    return None
  try:
    spec: Any = json.loads(text)
  except json.JSONDecodeError as e:
    raise ConfigError(f"{prefix}.exploration is not valid JSON: {e}") from None
  try:
    exploration = build_exploration(spec, f"{prefix}.exploration")
    if exploration is not None:
      exploration.check_kind("int")
  except ExplorationSpecError as e:
    raise ConfigError(str(e)) from None
  return exploration


# ----------------------------------------------------------------------------- presets


def cartpole(**changes) -> DQNConfig:
  """CartPole-v1, after the rl-zoo DQN settings (lr 2.3e-3, batch 64, 256x256, epsilon to
  0.04 over 16% of 50k steps, one target sync per update phase), with updates every
  ``update_frequency`` stores of 128 gradient steps. See ``batchrl.configs.value_based``."""
  values = dict(
      hidden_layers=(256, 256), learning_rate=2.3e-3, batch_size=64, memory_capacity=100_000,
      first_update=1000, update_frequency=32, repeat_update=128, target_update_frequency=256,
      discount=0.99, clip_loss=1.0, max_grad_norm=10.0,
      exploration=json.dumps({"type": "epsilon_anneal", "initial_epsilon": 1.0,
                              "final_epsilon": 0.04, "timesteps": 8000}))
  values.update(changes)
  return DQNConfig(**values)


# ----------------------------------------------------------------------- named configs


def _run(**values):
  from batchrl.configs import RunConfig
  return RunConfig(**values)


def _experiment(name: str, run, config):
  from batchrl.configs import Experiment
  return Experiment(name, run, config, agent="dqn")


def dqn_cartpole():
  """Host CartPole-v1 (gymnasium, stepped in the main process) with the rl-zoo DQN values
  but a 128x128 network: as reliable within 50k steps (module docstring), a third of the
  compute, which is most of this run's time."""
  return _experiment("dqn_cartpole", _run(
      env="CartPole-v1", backend="gymnasium", num_envs=8, num_workers=0, max_length=500,
      normalize_ranges=False, steps=49_152, report_every=4_096, eval_every=4_096,
      checkpoint_every=24_576),  # whole updates: 8 envs x 32
      cartpole(double_dqn=True, hidden_layers=(128, 128)))


def dqn_cartpole_fused():
  """``dqn_cartpole``'s settings (rl-zoo's, double-Q targets) with a 64x64 network on
  gymnax CartPole-v1: the training run is one compiled program."""
  return _experiment("dqn_cartpole_fused", _run(
      env="CartPole-v1", backend="gymnax", num_envs=8, num_workers=0, steps=98_304,
      report_every=4_096, eval_every=4_096, checkpoint_every=49_152),
      cartpole(double_dqn=True, hidden_layers=(64, 64)))  # whole updates: 8 envs x 32


def ddqn_cartpole():
  """The rl-zoo settings (256x256) with Double DQN targets on gymnax CartPole-v1."""
  return _experiment("ddqn_cartpole", _run(
      env="CartPole-v1", backend="gymnax", num_envs=8, num_workers=0, steps=99_840,
      report_every=9_984, eval_every=9_984, checkpoint_every=49_920),
      cartpole(double_dqn=True))


# conv 16 x 3x3 (valid: 10x10 -> 8x8), dense 128: the MinAtar paper's DQN network
MINATAR_NETWORK = [
    {"type": "conv2d", "size": 16, "window": 3, "stride": 1, "padding": "valid",
     "activation": "relu"},
    {"type": "flatten"},
    {"type": "dense", "size": 128, "activation": "relu"},
]


def minatar(**changes) -> DQNConfig:
  """MinAtar (10x10xC observations, a few actions) for short runs: ``MINATAR_NETWORK``,
  Double DQN, Adam 5e-4, batch 32, a 50k-transition memory, learning from step 5000 with
  one gradient step per 4 env steps (2 per store of 8 envs), a hard target sync every 1000
  steps, epsilon 1.0 -> 0.05 over 50k steps. A memory item holds two 400-float
  observations, so 50k items take 160 MB."""
  values = dict(
      network=json.dumps(MINATAR_NETWORK), memory_capacity=50_000, batch_size=32,
      first_update=5_000, update_frequency=1, repeat_update=2, target_update_frequency=1_000,
      learning_rate=5e-4, clip_loss=1.0, double_dqn=True, max_grad_norm=10.0,
      exploration=json.dumps({"type": "epsilon_anneal", "initial_epsilon": 1.0,
                              "final_epsilon": 0.05, "timesteps": 50_000}))
  values.update(changes)
  return DQNConfig(**values)


def dqn_minatar_breakout():
  """gymnax MinAtar Breakout: Double DQN on a small conv network, 100k steps, one compiled
  program (see the module docstring for the figures)."""
  return _experiment("dqn_minatar_breakout", _run(
      env="Breakout-MinAtar", backend="gymnax", num_envs=8, num_workers=0, steps=100_000,
      report_every=10_000, eval_every=20_000, checkpoint_every=50_000), minatar())


NAMED = {"dqn_cartpole": dqn_cartpole, "dqn_cartpole_fused": dqn_cartpole_fused,
         "ddqn_cartpole": ddqn_cartpole, "dqn_minatar_breakout": dqn_minatar_breakout}


def _make_dqn(config: DQNConfig):
  from batchrl.agents.dqn import make_dqn
  return make_dqn(config)


def register(registry, register_model) -> None:
  """Registers the DQN model type and the named configs (called by ``batchrl.configs``)."""
  register_model("dqn", DQNConfig, _make_dqn)
  for name, factory in NAMED.items():
    registry.register(name, factory, _DESCRIPTIONS[name])


_DESCRIPTIONS = {
    "dqn_cartpole": "CartPole-v1, host envs, Double DQN with the rl-zoo settings and a "
                    "128x128 network (50k steps)",
    "dqn_cartpole_fused": "CartPole-v1 in gymnax, Double DQN (64x64) as one compiled "
                          "program (98k steps)",
    "ddqn_cartpole": "CartPole-v1 in gymnax, Double DQN with the rl-zoo settings (100k steps)",
    "dqn_minatar_breakout": "MinAtar Breakout in gymnax, Double DQN on a small conv network "
                            "from JSON (100k steps)",
}
