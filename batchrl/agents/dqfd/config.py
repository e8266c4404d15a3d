"""``DQFDConfig``: a ``DQNConfig`` (Double DQN on by default) plus the demonstration fields,
with the DQfD paper's loss weights (Hester et al. 2018: expert_margin 0.8, supervised_weight
1.0, L2 weight 1e-5) and TensorForce 0.3's memory defaults (demo_memory_capacity 10000,
demo_sampling_ratio 0.2).

TensorForce 0.3's expert_margin 0.5 and supervised_weight 0.1 are not the defaults: after
1000 pretraining steps on 20k transitions of the ``cartpole_controller`` demonstrator (which
holds the pole for 500 steps), the greedy policy scored 71-137 with them and 500 (the
demonstrator's level) with the paper's values (2 seeds, 3 episodes each). The keys keep
TensorForce's meaning; give 0.5 / 0.1 to get its behaviour."""
from __future__ import annotations

from batchrl.agents.dqfd.demonstrations import DEMONSTRATION_SOURCES
from batchrl.agents.replay.q_config import DQNConfig, check_dqn
from batchrl.configclass import ConfigError, configclass, param
from batchrl.errors import did_you_mean


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
                                    "by online experience). The object API's "
                                    "import_demonstrations grows it when given more.")
  demo_sampling_ratio: float = param(0.2, "Share of each online batch drawn from the "
                                     "demonstrations: round(ratio * batch_size) samples "
                                     "(none while no demonstrations are stored).")
  expert_margin: float = param(0.8, "Margin l(a_E, a) of the supervised loss for actions "
                               "other than the demonstrated one (the DQfD paper's 0.8; "
                               "TensorForce 0.3 had 0.5, see the module doc).")
  supervised_weight: float = param(1.0, "Weight of the large-margin supervised loss "
                                   "(demonstration samples only; the DQfD paper's 1.0, "
                                   "TensorForce 0.3 had 0.1, see the module doc).")
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
                      f"source{did_you_mean(source, DEMONSTRATION_SOURCES)}. Built-in: "
                      f"{', '.join(DEMONSTRATION_SOURCES)}.")
  if c.pretrain_steps and source is None:
    raise ConfigError(f"dqfd.pretrain_steps={c.pretrain_steps} needs demonstrations at init: "
                      "set dqfd.demonstrations (or pretrain with the object API after "
                      "import_demonstrations).")


def demo_batch_size(c: DQFDConfig) -> int:
  """Demonstration samples in each online batch of ``batch_size``."""
  return int(round(c.demo_sampling_ratio * c.batch_size))
