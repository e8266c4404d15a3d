"""A2C (synchronous advantage actor-critic) and TensorForce's AC as one family over the
policy-gradient rollout, networks and critic (``batchrl.agents.policy_gradient``): ``ac`` is
``a2c`` with the policy gradient weighted by the critic's return estimate instead of the
advantage (``A2CConfig.advantage``), as in TensorForce 0.6 (see ``keys.py``)."""
from batchrl.agents.a2c.config import A2CConfig
from batchrl.agents.a2c.keys import a2c_config, a2c_keys
from batchrl.agents.a2c.model import make_a2c
from batchrl.agents.a2c.presets import cartpole
from batchrl.agents.family import AgentFamily, AgentType, anneal_over_run


def _api_type(name: str, description: str) -> AgentType:
  return AgentType(name, description,
                   lambda kwargs, context: make_a2c(a2c_config(kwargs, context, name)),
                   a2c_keys())


FAMILY = AgentFamily(
    "a2c", "Synchronous advantage actor-critic (A2C) and actor-critic (AC)",
    api_types=(
        _api_type("a2c", "Advantage actor-critic: n-step returns or GAE, a critic of its "
                  "own or a shared value head, RMSprop or Adam"),
        _api_type("ac", "Actor-critic: the policy gradient weighted by the critic-"
                  "bootstrapped return (no advantage)")),
    config_class=A2CConfig, make=make_a2c,
    fit_schedules=anneal_over_run)

__all__ = ["A2CConfig", "FAMILY", "cartpole", "make_a2c"]
