"""``DQNConfig``: the replay fields (``batchrl.agents.replay.config.ReplayConfig``) plus DQN's
network, targets (double, n-step, dueling) and epsilon-greedy exploration. DQN's config and
DQFD's base (``DQFDConfig`` extends it), so it lives with the replay agents' shared parts.

Defaults are TensorForce 0.3's (``reference/tensorforce.md``: Adam 1e-3, discount 0.99, batch
32, a replay memory of 1e5, an update every 4 steps from step 10000 on, a hard target sync
every 10000 steps) plus epsilon-greedy exploration from 1.0 to 0.1 over 10000 steps.
"""
from __future__ import annotations

import json
from typing import Literal

from batchrl.agents.replay import config as replay_config
from batchrl.agents.replay.config import MEMORIES, ReplayConfig, check_network_fields, check_replay
from batchrl.configclass import ConfigError, configclass, param

DEFAULT_EXPLORATION = json.dumps({"type": "epsilon_anneal", "initial_epsilon": 1.0,
                                  "final_epsilon": 0.1, "timesteps": 10000})


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
                      f"Use one of {', '.join(MEMORIES)}.")
  check_replay(c, prefix)
  if c.n_step < 1:
    raise ConfigError(f"{prefix}.n_step must be >= 1, got {c.n_step!r}.")
  parse_exploration(c.exploration, prefix)


def parse_exploration(text: str | None, prefix: str = "dqn"):
  """The epsilon-greedy ``ExplorationSpec`` of ``DQNConfig.exploration`` (None when greedy)."""
  return replay_config.parse_exploration(text, f"{prefix}.exploration", "int")
