"""The table the agent contract (``test_contract.py``) runs over: one row per name that
``Agent.create(agent=...)`` accepts (and a row per ``variant`` of a name that learns
different action spaces differently: SAC's discrete one).

A row is how the contract drives that agent, which nothing in the family says: an
environment, keys small enough that an update runs within ``STEPS`` steps, a misspelt key
with the key it should suggest, and out-of-range values the agent must refuse. A name without
a row fails ``test_the_table_covers_every_agent_type``, which names it.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from batchrl import Agent

CARTPOLE = "CartPole-v1"
PENDULUM = "Pendulum-v1"

NETWORK = [{"type": "dense", "size": 16}]  # every learning agent's network: compiles fast
STEPS = 100  # act/observe steps of the shared agent; every learning row updates within them

_REPLAY = dict(first_update=32, update_frequency=4, memory_capacity=1000, batch_size=16)
_ACTOR_CRITIC = dict(_REPLAY, critic_layers=[16])
_BASELINE = {"type": "mlp", "sizes": [16]}
_OUT_OF_RANGE = (("discount", 2), ("learning_rate", -1))


@dataclasses.dataclass(frozen=True)
class AgentCase:
  """One ``Agent.create`` name and how the contract tests drive it."""

  name: str
  env: str
  keys: dict[str, Any]
  typo: tuple[str, str | None]  # a misspelt key, and the valid key the error must suggest
  out_of_range: tuple[tuple[str, Any], ...]  # (key, value) pairs the agent must refuse
  learns: bool = True
  variant: str = ""  # a second row of one name (another action space): its label
  network: Any = dataclasses.field(default_factory=lambda: NETWORK)  # Agent.create's network=

  @property
  def id(self) -> str:
    """The row's key in ``AGENTS``: the name, or ``<name>_<variant>``."""
    return f"{self.name}_{self.variant}" if self.variant else self.name

  @property
  def spec(self) -> dict:
    return {"type": self.name, **self.keys}


AGENTS: dict[str, AgentCase] = {case.id: case for case in (
    AgentCase("ppo", CARTPOLE, dict(batch_size=64, optimizer_batch_size=32, epochs=2),
              ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("vpg", CARTPOLE, dict(batch_size=64, baseline=_BASELINE),
              ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("trpo", CARTPOLE, dict(batch_size=64, baseline=_BASELINE, cg_iterations=5),
              ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("a2c", CARTPOLE, dict(batch_size=64, critic_network=_BASELINE),
              ("horizn", "horizon"), _OUT_OF_RANGE),
    AgentCase("ac", CARTPOLE, dict(batch_size=64, critic_network=_BASELINE),
              ("critic_netwrk", "critic_network"), _OUT_OF_RANGE),
    AgentCase("dqn", CARTPOLE, _REPLAY, ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("ddqn", CARTPOLE, _REPLAY, ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("dqn_nstep", CARTPOLE, _REPLAY, ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("pqn", CARTPOLE, dict(batch_size=32, num_minibatches=4, epochs=2),
              ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("naf", PENDULUM, _REPLAY, ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("dpg", PENDULUM, _ACTOR_CRITIC, ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("ddpg", PENDULUM, _ACTOR_CRITIC, ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("td3", PENDULUM, _ACTOR_CRITIC, ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("sac", PENDULUM, _ACTOR_CRITIC, ("discont", "discount"), _OUT_OF_RANGE),
    AgentCase("sac", CARTPOLE, _ACTOR_CRITIC, ("discont", "discount"), _OUT_OF_RANGE,
              variant="discrete"),
    AgentCase("tqc", PENDULUM, dict(_ACTOR_CRITIC, num_quantiles=5),
              ("num_quantile", "num_quantiles"),
              _OUT_OF_RANGE + (("drop_quantiles", 5),)),
    AgentCase("crossq", PENDULUM, dict(_ACTOR_CRITIC, policy_delay=2),
              ("polcy_delay", "policy_delay"),
              _OUT_OF_RANGE + (("update_target_weight", 0.01),)),
    # its networks are its own: network='auto' only; blocks of 16
    AgentCase("simbav2", PENDULUM, dict(_ACTOR_CRITIC, num_bins=11),
              ("num_bin", "num_bins"), _OUT_OF_RANGE + (("num_bins", 1),), network="auto"),
    AgentCase("dqfd", CARTPOLE, dict(_REPLAY, demo_memory_capacity=64),
              ("discont", "discount"), _OUT_OF_RANGE),
    # takes no keys at all: every key is unknown, and there is nothing out of range
    AgentCase("random", PENDULUM, {}, ("discont", None), (), learns=False),
    AgentCase("constant", CARTPOLE, dict(action_values=1), ("action_value", "action_values"),
              (("action_values", 5),), learns=False),
)}

def probe_states(case: AgentCase) -> np.ndarray:
  """Fixed states ``[8, ...]`` inside the environment's observation space."""
  space = gym.make(case.env).observation_space
  rng = np.random.default_rng(0)
  low = np.maximum(space.low, -1.0)
  high = np.minimum(space.high, 1.0)
  return rng.uniform(low, high, (8,) + space.shape).astype(np.float32)


def terminal_code(terminated: bool, truncated: bool) -> int:
  """The ``observe`` terminal of a gymnasium step: 1 ended, 2 cut short, 0 going on."""
  return 1 if terminated else 2 if truncated else 0


def run_steps(agent: Agent, env_id: str, steps: int, seed: int = 0) -> list[bool]:
  """``steps`` act/observe steps on a gymnasium env; returns what each ``observe`` said
  (whether an update ran). Cut-short steps hand the agent their next state."""
  env = gym.make(env_id)
  obs, _ = env.reset(seed=seed)
  reported = []
  try:
    for _ in range(steps):
      action = agent.act(obs)
      assert env.action_space.contains(np.asarray(action, env.action_space.dtype)), action
      obs, reward, terminated, truncated, _ = env.step(action)
      terminal = terminal_code(terminated, truncated)
      reported.append(agent.observe(float(reward), terminal=terminal,
                                    next_states=obs if terminal == 2 else None))
      if terminal:
        obs, _ = env.reset()
  finally:
    env.close()
  return reported


@pytest.fixture(scope="module", params=sorted(AGENTS))
def case(request) -> AgentCase:
  return AGENTS[request.param]


@pytest.fixture(scope="module")
def trained(case):
  """``case``'s agent, created from its name, keys and environment id, after ``STEPS``
  act/observe steps, and what each ``observe`` returned. Shared by the tests of one agent:
  agents of the same spec but for the seed share its compiled programs, so the agents the
  tests build beside it (``states=``/``actions=``, ``Agent.load``) compile nothing."""
  agent = Agent.create(case.name, environment=case.env, network=case.network, seed=0,
                       **case.keys)
  return agent, run_steps(agent, case.env, STEPS)
