"""NAF and DQFD: their config classes, demonstration sources and named configs.

The config classes live here rather than beside the agents (``batchrl.agents.naf.config``
and ``batchrl.agents.dqfd.config`` re-export them) for the reason ``value_based`` gives:
``batchrl.configs`` imports this module while it registers agent families, so they exist
before anything asks for them.

Units (as DQN's): ``update_frequency`` counts ``store`` calls (each stores one transition
of every one of the ``num_envs`` environments) and is the model's ``period``;
``first_update``, ``target_update_frequency``, exploration schedules and ``beta_steps``
count environment steps summed over environments.

``NAFConfig`` defaults are TensorForce 0.3's memory-agent ones (batch 32, replay memory of
1e5, an update every 4 steps from step 10000 on, a hard target sync every 10000 steps, Adam
1e-3, discount 0.99) with its Ornstein-Uhlenbeck exploration (sigma 0.3, theta 0.15).
``DQFDConfig`` is a ``DQNConfig`` (Double DQN on by default) plus the demonstration fields
with TensorForce 0.3's DQFD defaults (expert_margin 0.5, supervised_weight 0.1,
demo_memory_capacity 10000, demo_sampling_ratio 0.2) and the DQfD paper's L2 weight 1e-5.

Demonstration sources (``DQFDConfig.demonstrations``): a path to an ``.npz`` file with the
arrays ``states``, ``actions``, ``rewards``, ``terminals`` (0 continue, 1 terminated, 2
truncated) and optionally ``next_states``; or the name of a built-in source:

=======================  ==================================================================
``cartpole_controller``  CartPole-v1 driven by a fixed controller that pushes toward the
                         pole's lean, ``action = int(theta + 0.5 * theta_dot > 0)``: it
                         holds the pole for the full 500 steps from every start tried
=======================  ==================================================================

Named configs for ``batchrl train``:

===================  =======  ============================================================
name                 backend  what
===================  =======  ============================================================
``naf_pendulum``     gymnax   Pendulum-v1, 4 envs, 30k steps: NAF with a 2x128 MLP, one
                              gradient step per environment step, soft target updates
``dqfd_cartpole``    gymnax   CartPole-v1, 8 envs, 50k steps: ``dqn_cartpole``'s agent
                              with half its gradient steps, plus 20k demonstration
                              transitions of ``cartpole_controller`` and 2000
                              pretraining steps at init
===================  =======  ============================================================

Measured figures are in each factory's docstring.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import json
from typing import Literal

import numpy as np

from batchrl.configclass import ConfigError, configclass, param
from batchrl.configs.value_based import (DQNConfig, ReplayConfig, cartpole, check_dqn,
                                         check_network_fields, check_replay)
from batchrl.exploration import ExplorationSpecError, build_exploration

DEFAULT_NAF_EXPLORATION = json.dumps({"type": "ornstein_uhlenbeck", "sigma": 0.3, "mu": 0.0,
                                      "theta": 0.15})


def _did_you_mean(value, valid) -> str:
  close = difflib.get_close_matches(str(value), list(valid), n=1)
  return f" Did you mean {close[0]!r}?" if close else ""


# ---------------------------------------------------------------------------------- NAF


@configclass
class NAFConfig(ReplayConfig):
  """Hyper-parameters of ``make_naf`` (see the module docstring for units); the memory,
  schedule, loss and optimizer fields are ``ReplayConfig``'s, shared with DQN."""

  network: str | None = param(None, "None: an MLP of hidden_layers on a Box observation (the "
                              "'flat' layout). Else a network spec as JSON text "
                              "(batchrl.networks.layered) for any states; the NAF heads (V, "
                              "mu, L) sit on its output.")
  hidden_layers: tuple[int, ...] = param((64, 64), "Flat layout: hidden sizes of the MLP "
                                         "shared by the V, mu and L heads.")
  activation: Literal["relu", "tanh"] = param("relu", "Flat layout: hidden activation.")
  exploration: str | None = param(DEFAULT_NAF_EXPLORATION, "Noise inside the model's act, as "
                                  "JSON text of a batchrl.exploration spec for float actions "
                                  "(ornstein_uhlenbeck, gaussian, constant, linear_decay, "
                                  "epsilon_decay: the noise scale). It is added to the action "
                                  "in normalized units (finite bounds mapped to [-1, 1]), "
                                  "then clipped. None: no noise.")

  def __post_init__(self):
    check_network_fields(self, "naf")
    check_replay(self, "naf")
    parse_naf_exploration(self.exploration)


def parse_naf_exploration(text: str | None):
  """The ``Exploration`` of ``NAFConfig.exploration`` (None without noise)."""
  if text is None:
    return None
  try:
    spec = json.loads(text)
  except json.JSONDecodeError as e:
    raise ConfigError(f"naf.exploration is not valid JSON: {e}") from None
  try:
    exploration = build_exploration(spec, "naf.exploration")
    if exploration is not None:
      exploration.check_kind("float")
  except ExplorationSpecError as e:
    raise ConfigError(str(e)) from None
  return exploration


# --------------------------------------------------------------------------------- DQFD


@configclass
class DQFDConfig(DQNConfig):
  """``DQNConfig`` plus the demonstration memory and the DQfD loss (Hester et al. 2018).

  Loss on a batch of ``batch_size`` transitions, ``round(demo_sampling_ratio *
  batch_size)`` of them from the demonstration memory: the (double) Q-learning TD loss
  (1-step) + ``nstep_weight`` x the n-step TD loss (when ``n_step > 1``) +
  ``supervised_weight`` x the large-margin loss ``max_a [Q(s, a) + expert_margin * (a !=
  a_E)] - Q(s, a_E)`` on the demonstration samples + ``l2_regularization`` x the sum of
  squared weights.
  """

  double_dqn: bool = param(True, "Double DQN targets (DQfD's 'double-Q TD' loss).")
  demo_memory_capacity: int = param(10_000, "Demonstration transitions the demonstration "
                                    "memory holds (a memory of its own, never overwritten "
                                    "by online experience).")
  demo_sampling_ratio: float = param(0.2, "Share of each online batch drawn from the "
                                     "demonstrations: round(ratio * batch_size) samples "
                                     "(none while no demonstrations are stored).")
  expert_margin: float = param(0.5, "Margin l(a_E, a) of the supervised loss for actions "
                               "other than the demonstrated one.")
  supervised_weight: float = param(0.1, "Weight of the large-margin supervised loss "
                                   "(demonstration samples only).")
  nstep_weight: float = param(1.0, "Weight of the n-step TD loss (used when n_step > 1; the "
                             "1-step TD loss is always there).")
  l2_regularization: float = param(1e-5, "Weight of the L2 penalty on all network weights.")
  pretrain_target_update_frequency: int = param(100, "Pretraining: gradient steps between "
                                                "target network updates (by "
                                                "update_target_weight).")
  demonstrations: str | None = param(None, "Demonstrations imported at init: a path to an "
                                     ".npz file (states, actions, rewards, terminals, "
                                     "optional next_states) or a built-in source ("
                                     "'cartpole_controller', filled to demo_memory_capacity)."
                                     " None: give them with import_demonstrations / "
                                     "set_demonstrations.")
  pretrain_steps: int = param(0, "Gradient steps on the demonstrations alone made by init "
                              "(needs demonstrations); the object API also has pretrain().")

  def __post_init__(self):
    check_dqn(self, "dqfd")
    _check_dqfd(self)


def _check_dqfd(c: DQFDConfig) -> None:
  for name in ("demo_memory_capacity", "pretrain_target_update_frequency"):
    if getattr(c, name) < 1:
      raise ConfigError(f"dqfd.{name} must be >= 1, got {getattr(c, name)!r}.")
  if c.pretrain_steps < 0:
    raise ConfigError(f"dqfd.pretrain_steps must be >= 0, got {c.pretrain_steps!r}.")
  if not 0.0 <= c.demo_sampling_ratio <= 1.0:
    raise ConfigError(f"dqfd.demo_sampling_ratio must be in [0, 1], got "
                      f"{c.demo_sampling_ratio!r}.")
  for name in ("expert_margin", "supervised_weight", "nstep_weight", "l2_regularization"):
    if getattr(c, name) < 0:
      raise ConfigError(f"dqfd.{name} must be >= 0, got {getattr(c, name)!r}.")
  if c.demo_memory_capacity < c.batch_size:
    raise ConfigError(f"dqfd.demo_memory_capacity ({c.demo_memory_capacity}) is smaller than "
                      f"batch_size ({c.batch_size}): pretraining draws whole batches from it.")
  source = c.demonstrations
  if source is not None and not source.endswith(".npz") and source not in DEMONSTRATION_SOURCES:
    raise ConfigError(f"dqfd.demonstrations {source!r} is neither an .npz file nor a built-in "
                      f"source.{_did_you_mean(source, DEMONSTRATION_SOURCES)} Built-in: "
                      f"{', '.join(DEMONSTRATION_SOURCES)}.")
  if c.pretrain_steps and source is None:
    raise ConfigError(f"dqfd.pretrain_steps={c.pretrain_steps} needs demonstrations at init: "
                      "set dqfd.demonstrations (or pretrain with the object API after "
                      "import_demonstrations).")


def demo_batch_size(c: DQFDConfig) -> int:
  """Demonstration samples in each online batch of ``batch_size``."""
  return int(round(c.demo_sampling_ratio * c.batch_size))


# -------------------------------------------------------------------- demonstrations


def cartpole_action(state: np.ndarray) -> np.ndarray:
  """The demonstrator: push toward the pole's lean, ``int(theta + 0.5 theta_dot > 0)``.

  ``state[..., 4]`` (x, x_dot, theta, theta_dot) -> ``int[...]``."""
  state = np.asarray(state)
  return (state[..., 2] + 0.5 * state[..., 3] > 0).astype(np.int64)


@functools.lru_cache(maxsize=4)
def cartpole_controller(count: int, seed: int = 0) -> dict:
  """``count`` transitions of ``cartpole_action`` on gymnasium CartPole-v1 (500-step limit),
  as TensorForce arrays: ``states [M, 4]``, ``actions``, ``rewards``, ``terminals`` (2 at the
  time limit) and ``next_states``."""
  import gymnasium as gym
  env = gym.make("CartPole-v1")
  states, actions, rewards, terminals, next_states = [], [], [], [], []
  state, _ = env.reset(seed=seed)
  episode = 0
  while len(states) < count:
    action = int(cartpole_action(state))
    following, reward, terminated, truncated, _ = env.step(action)
    states.append(state)
    actions.append(action)
    rewards.append(reward)
    terminals.append(1 if terminated else (2 if truncated else 0))
    next_states.append(following)
    state = following
    if terminated or truncated:
      episode += 1
      state, _ = env.reset(seed=seed + episode)
  env.close()
  return {"states": np.asarray(states, np.float32), "actions": np.asarray(actions, np.int64),
          "rewards": np.asarray(rewards, np.float32), "terminals": np.asarray(terminals),
          "next_states": np.asarray(next_states, np.float32)}


DEMONSTRATION_SOURCES = {"cartpole_controller": cartpole_controller}


def load_demonstrations(source: str, count: int) -> dict:
  """The demonstrations ``DQFDConfig.demonstrations`` names, as a dict of arrays (the
  plural TensorForce names ``batchrl.memories.transitions_from_observations`` takes)."""
  if source in DEMONSTRATION_SOURCES:
    return dict(DEMONSTRATION_SOURCES[source](count))
  try:
    with np.load(source, allow_pickle=False) as data:
      arrays = {name: np.asarray(data[name]) for name in data.files}
  except (OSError, ValueError) as e:
    raise ConfigError(f"dqfd.demonstrations: cannot read {source!r}: {e}") from None
  required = ("states", "actions", "rewards", "terminals")
  missing = [k for k in required if k not in arrays]
  if missing:
    raise ConfigError(f"dqfd.demonstrations {source!r} lacks the arrays {missing}; it needs "
                      f"{', '.join(required)} (next_states optional), has {sorted(arrays)}.")
  return arrays


# ----------------------------------------------------------------------- named configs


def _run(**values):
  from batchrl.configs import RunConfig
  return RunConfig(**values)


def _experiment(name: str, run, config, agent: str):
  from batchrl.configs import Experiment
  return Experiment(name, run, config, agent=agent)


def pendulum_naf(**changes) -> NAFConfig:
  """NAF for Pendulum-v1 with 4 envs: a 2x128 MLP, batch 128, one gradient step per
  environment step (4 per store of 4 envs) from step 1000 on, a soft target update
  (tau 0.005) after each update, and Gaussian noise of scale 1.0 (normalized units: half
  the action range) decaying to 0.05 over 15k steps.

  The wide early noise matters: with 0.3 the data stay near the initial mu, the quadratic
  advantage learns no useful direction, and on 1 of 3 seeds mu saturated at a bound
  (tanh) and never left it within 30k steps; with 1.0 all 3 seeds learned by 15k."""
  values = dict(
      hidden_layers=(128, 128), memory_capacity=100_000, batch_size=128, first_update=1000,
      update_frequency=1, repeat_update=4, target_update_frequency=1,
      update_target_weight=0.005, discount=0.99, learning_rate=1e-3, max_grad_norm=10.0,
      exploration=json.dumps({"type": "linear_decay", "initial_value": 1.0,
                              "final_value": 0.05, "timesteps": 15_000}))
  values.update(changes)
  return NAFConfig(**values)


def naf_pendulum():
  """gymnax Pendulum-v1 (200-step episodes), NAF, 30k steps; the run is one compiled
  program.

  Measured (fused, 3 seeds vmapped, greedy evaluation = mean of each env's first episode):
  -1300 at 5k steps, -535 / -579 / -133 at 10k, -158 / -121 / -203 at 15k; each seed's
  best evaluation within 30k >= -250 (tests/test_naf.py, slow). About 2 minutes for the 3
  seeds on 2 shared CPU cores."""
  return _experiment("naf_pendulum", _run(
      env="Pendulum-v1", backend="gymnax", num_envs=4, num_workers=0, steps=30_000,
      report_every=2_000, eval_every=5_000, checkpoint_every=10_000), pendulum_naf(), "naf")


def cartpole_dqfd(**changes) -> DQFDConfig:
  """``dqn_cartpole``'s agent (double-Q, 128x128) with 64 gradient steps per 256 env steps
  (not 128), plus 20k transitions of ``cartpole_controller``, 2000 pretraining steps
  at init, a quarter of each batch from the demonstrations, the DQfD paper's 10-step
  returns (weight 1) beside the 1-step ones, and epsilon from 0.1 (not 1.0) down to 0.01:
  the pretrained policy already acts well.

  With DQN's epsilon 1.0 -> 0.04 the greedy policy, at 500 after pretraining, fell to
  about 10 by 5k steps (the first online updates on random-policy data) and came back to
  500 by 20k (2 seeds). With 0.1 -> 0.01 but 1-step returns only, 2 of 4 seeds collapsed
  to about 10 after 12-15k online steps (a lower learning rate, a larger demonstration
  share or a slower target only delayed it); with 10-step returns all 4 stayed at 439-500
  over 20k steps (evaluated every 2.5k)."""
  base = cartpole(hidden_layers=(128, 128), repeat_update=64)
  values = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
  values.update(double_dqn=True, demo_memory_capacity=20_000, demo_sampling_ratio=0.25,
                expert_margin=0.8, supervised_weight=1.0, demonstrations="cartpole_controller",
                pretrain_steps=2_000, n_step=10, nstep_weight=1.0,
                exploration=json.dumps({"type": "epsilon_anneal", "initial_epsilon": 0.1,
                                        "final_epsilon": 0.01, "timesteps": 8000}))
  values.update(changes)
  return DQFDConfig(**values)


def dqfd_cartpole():
  """gymnax CartPole-v1, DQFD with demonstrations of a fixed controller, 50k steps.

  Measured (fused, 4 seeds vmapped, greedy evaluation): 500 on every seed right after init
  (the pretraining alone, no environment step), then 439-500 at every evaluation every
  2.5k steps up to 20k (mostly 500). DQN with the same network and gradient steps
  (``dqn_cartpole_fused`` with ``hidden_layers=[128,128]``, ``repeat_update=64``, 1-step)
  first reaches 475 after 33-94k steps (4 seeds)."""
  return _experiment("dqfd_cartpole", _run(
      env="CartPole-v1", backend="gymnax", num_envs=8, num_workers=0, steps=50_000,
      report_every=5_000, eval_every=5_000, checkpoint_every=25_000), cartpole_dqfd(), "dqfd")


NAMED = {"naf_pendulum": naf_pendulum, "dqfd_cartpole": dqfd_cartpole}
_DESCRIPTIONS = {
    "naf_pendulum": "Pendulum-v1 in gymnax, NAF (30k steps)",
    "dqfd_cartpole": "CartPole-v1 in gymnax, DQFD with a controller's demonstrations (50k "
                     "steps)",
}


def _make_naf(config: NAFConfig):
  from batchrl.agents.naf import make_naf
  return make_naf(config)


def _make_dqfd(config: DQFDConfig):
  from batchrl.agents.dqfd import make_dqfd
  return make_dqfd(config)


def register(registry, register_model) -> None:
  """Registers the ``naf`` and ``dqfd`` model types and their named configs."""
  register_model("naf", NAFConfig, _make_naf)
  register_model("dqfd", DQFDConfig, _make_dqfd)
  for name, factory in NAMED.items():
    registry.register(name, factory, _DESCRIPTIONS[name])
