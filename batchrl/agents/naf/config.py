"""``NAFConfig``: the replay fields (``batchrl.agents.replay.config.ReplayConfig``, shared with
DQN) plus NAF's network and its exploration noise.

Defaults are TensorForce 0.3's memory-agent ones (batch 32, replay memory of 1e5, an update
every 4 steps from step 10000 on, a hard target sync every 10000 steps, Adam 1e-3, discount
0.99) with its Ornstein-Uhlenbeck exploration (sigma 0.3, theta 0.15).
"""
from __future__ import annotations

import json
from typing import Literal

from batchrl.agents.replay import config as replay_config
from batchrl.agents.replay.config import ReplayConfig, check_network_fields, check_replay
from batchrl.configclass import configclass, param

DEFAULT_NAF_EXPLORATION = json.dumps({"type": "ornstein_uhlenbeck", "sigma": 0.3, "mu": 0.0,
                                      "theta": 0.15})


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
  """The ``ExplorationSpec`` of ``NAFConfig.exploration`` (None without noise)."""
  return replay_config.parse_exploration(text, "naf.exploration", "float")
