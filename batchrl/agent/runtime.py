"""The compiled side of ``batchrl.Agent``: a model with its adapters (``Runtime``) and the
programs compiled for them.

A ``Runtime`` holds no per-agent state: ``Agent`` passes its ``AgentState`` in and out, and
its seed. So agents whose specs differ only in the seed share one runtime (``build_runtime``
keeps the last ``SHARED_RUNTIMES`` built) and compile each program once. Programs are
cached on their runtime (``Runtime.memo``) and go with it, once no agent holds it and it
has left the shared cache. In a steady loop a program is found by what changes its shapes
(commit mode, update mode, ...), so nothing retraces.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import json
import threading
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from batchrl import programs
from batchrl.agent import interaction
from batchrl.agent.adapters import Adapters, build_adapters
from batchrl.agent.errors import AgentUsageError
from batchrl.agent.interaction import AgentParts, AgentState
from batchrl.agents import spaces
from batchrl.agents.families import api_type, family_of_type
from batchrl.agents.family import BuildContext
from batchrl.configclass import ConfigError, from_dict
from batchrl.errors import UserInputError
from batchrl.export import Policy, check_format, export_policy, space_policy
from batchrl.specs import EnvSpec
from batchrl.train import host_update

STAGE_DEPTH = 8  # how many steps one stream may run ahead of the others
SHARED_RUNTIMES = 8  # runtimes (with their programs) kept for agents of the same structure


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: hashed by identity (cache keys)
class Runtime:
  spec: dict  # the agent spec without its seed: all a runtime depends on
  adapters: Adapters
  parts: AgentParts
  programs: dict = dataclasses.field(default_factory=dict, init=False, repr=False)

  @property
  def action_space(self) -> gym.Space:
    return self.adapters.action_space

  def memo(self, key, make: Callable[[], Any]):
    """``make()``, made once per ``key`` for this runtime (compiled programs, constants).

    What ``make`` returns must not hold the runtime (close over its adapters and parts
    instead): then a runtime no one holds is freed at once, not by the cycle collector.
    """
    value = self.programs.get(key)
    if value is None:
      value = self.programs[key] = make()
    return value

  # ---------------------------------------------------------------- state

  def init_state(self, seed: int) -> AgentState:
    return self._built(lambda init: init(jax.random.key(seed)))

  def state_shapes(self, seed: int) -> AgentState:
    """The initial state's shapes and dtypes: its program traced (and the trace kept for the
    first ``init_state``), not compiled."""
    return self._built(lambda init: init.eval_shape(jax.random.key(seed)))

  def _built(self, use: Callable):
    """``use(init)`` of the initial state's program: a spec the model cannot build raises
    ``ConfigError`` (its first trace is where it shows)."""
    init = self.memo("init", lambda: _init_program(self.adapters, self.parts))
    try:
      return use(init)
    except (TypeError, ValueError) as e:
      raise ConfigError(f"cannot build agent {self.spec['type']!r} for these states/actions: "
                        f"{e}") from e

  @functools.cached_property
  def _model_shapes(self):
    return jax.eval_shape(functools.partial(_init_model, self.adapters, self.parts),
                          jax.random.key(0))

  @property
  def recurrent(self) -> bool:
    return bool(jax.tree.leaves(getattr(self._model_shapes, "carry", ())))

  def initial_internals(self):
    if not self.recurrent:
      return {}
    return {"carry": jax.tree.map(lambda c: np.zeros((1,) + c.shape[1:], c.dtype),
                                  self._model_shapes.carry)}

  # ---------------------------------------------------------------- compiled calls

  def act(self, state, obs, idx, reward, terminal, next_held, has_next, reset, *, commit,
          slots, flush, update, deterministic):
    """``interaction.act_step`` for the streams ``idx``: ``(state, action[k], updated)``."""
    fn = self.memo(("act", commit, flush, update, deterministic), lambda: _act_program(
        self.parts, commit, flush, update, deterministic))
    if slots is None:
      slots = np.zeros(len(idx), np.int32)
    return fn(state, obs, idx, reward, terminal, next_held, has_next, reset, slots)

  def held_next(self, state, stored: dict, idx):
    """``([k] next states given for cut steps, has_next[k])`` for this act's streams."""
    k = len(idx)
    present = [int(i) in stored for i in idx]
    if not any(present):
      return self._zeros_next(k), np.zeros(k, bool)
    zero = self._zeros_next(1)
    rows = [stored[int(i)] if p else zero for i, p in zip(idx, present)]
    return jax.tree.map(lambda *r: jnp.concatenate(r), *rows), np.asarray(present)

  def _zeros_next(self, k: int):
    return self.memo(("zeros_next", k), lambda: spaces.zeros_like_space(
        self.adapters.processed_space, (k,)))

  def process_next(self, state, obs, idx):
    fn = self.memo("process_next", lambda: jax.jit(functools.partial(
        interaction.process_next, self.parts)))
    return fn(state, obs, idx)

  @staticmethod
  def row(rows, j: int):
    return jax.tree.map(lambda x: x[j:j + 1], rows)

  def act_independent(self, state, obs, deterministic: bool, internals, *, seed: int,
                      count: int):
    """Actions for states outside the training streams; ``count``: the agent's independent
    acts so far, this one included (each gets its own key)."""
    if self.recurrent and internals is None:
      raise AgentUsageError("This policy is recurrent: independent acting needs internals= "
                            "(start from agent.initial_internals()); it returns (actions, "
                            "internals).")
    with_carry = internals is not None
    fn = self.memo(("independent", bool(deterministic), with_carry),
                   lambda: _independent_program(self.adapters, self.parts.model,
                                                bool(deterministic), with_carry))
    key = jax.random.fold_in(jax.random.key(seed + 1), count)
    carry = internals["carry"] if with_carry else ()
    action, new_carry = fn(state, obs, key, carry)
    return action, ({"carry": new_carry} if with_carry else None)


# ---------------------------------------------------------------- building

_shared: collections.OrderedDict[str, Runtime] = collections.OrderedDict()
_shared_lock = threading.Lock()  # agents may be created from several threads


def build_runtime(spec: dict) -> Runtime:
  """The runtime of an agent spec: the one an agent of the same spec but for its seed got,
  if it is among the last ``SHARED_RUNTIMES`` built, else a new one. Bad specs raise before
  anything is built."""
  structure = {k: v for k, v in spec.items() if k != "seed"}
  key = json.dumps(structure, sort_keys=True)
  with _shared_lock:
    runtime = _shared.get(key)
    if runtime is not None:
      _shared.move_to_end(key)
      return runtime
  runtime = _build(structure)
  with _shared_lock:
    runtime = _shared.setdefault(key, runtime)  # another thread may have built it too
    _shared.move_to_end(key)
    while len(_shared) > SHARED_RUNTIMES:
      _shared.popitem(last=False)
  return runtime


def _build(spec: dict) -> Runtime:
  n = spec.get("parallel_interactions", 1)
  if isinstance(n, bool) or not isinstance(n, int) or n < 1:
    raise ConfigError(f"parallel_interactions must be a positive int, got {n!r}.")
  adapters = build_adapters(spec)
  agent_type = api_type(spec["type"])
  context = BuildContext(n, spec.get("network", "auto"), adapters.action_space,
                                  spec.get("max_episode_timesteps"))
  if spec.get("preset") is not None:  # the whole config of a preset (``batchrl.presets``)
    model = _config_model(spec["type"], spec["config"])
  else:
    model = agent_type.build(dict(spec.get("config") or {}), context)
  # the update as batchrl's drivers run it (``batchrl.train.host_update``: from the host
  # where the model's config asks for it, e.g. PPO's update_loop='auto' on the CPU)
  model = host_update.schedule(model)
  parts = AgentParts(model, n, STAGE_DEPTH, adapters.preprocess, adapters.reward_preprocess,
                adapters.explore, adapters.explore_init)
  return Runtime(spec, adapters, parts)


def _config_model(agent_type: str, config: dict):
  """The model of a spec that gives its family's whole config (field names, not keys)."""
  found = family_of_type(agent_type)
  return found.make(from_dict(found.config_class, config))


# ---------------------------------------------------------------- programs
#
# Each closes over adapters and parts only, never the runtime that caches it (``memo``).


def _init_model(adapters: Adapters, parts: AgentParts, key):
  env_spec = EnvSpec(adapters.processed_space, adapters.action_space, parts.num_streams)
  return parts.model.init(jax.random.fold_in(key, 0), env_spec)


# The programs holding the model's work compile with batchrl's options for their kind
# (``programs``). Init runs once ("once": no LLVM optimization). The act step, and the fast
# path's act and commit (``fast_path``), are the whole of a user's training ("long": the
# fusion emitters), and compile alike so that both paths give the same bits. Measured cold
# against XLA's defaults, PPO on CartPole, 600 steps with the first updates: 6.8 -> 5.3 s
# of CPU, an update 9.5 against 9.0 ms; "loop" (legacy emitters) compiled in 4.3 s but
# updated in 12.5 ms. Agent.create('ppo') with a Nature CNN to its first update: 24.5 ->
# 20.7 s. The small programs that only move data (key chains, packing, ``process_next``) and
# the independent act keep a plain ``jax.jit``: their cost is dispatch, a few microseconds.
def _init_program(adapters: Adapters, parts: AgentParts):
  """The initial state from the agent's seed key (an argument: agents of one runtime
  differ in it)."""
  n = parts.num_streams

  def init(key):
    model = _init_model(adapters, parts, key)
    obs = adapters.allow_all(spaces.zeros_like_space(adapters.processed_space, (n,)))
    action, extras = parts.model.act(model, obs, jax.random.fold_in(key, 1), False)
    stage = interaction.empty_stage(parts, obs, action, extras)
    return AgentState(model, adapters.preprocess_init(n), adapters.reward_stack.init(n),
                      adapters.explore_init(n), jax.random.fold_in(key, 2), obs, action,
                      extras, stage, jnp.int32(0))

  return programs.jit_now(init, "once")


def _act_program(parts: AgentParts, commit: str, flush: int, update: str, deterministic: bool):
  step = functools.partial(interaction.act_step, parts, commit=commit, flush=flush,
                           update=update, deterministic=deterministic)
  return programs.jit_now(step, "long", donate_argnums=0)


def act_fresh(adapters: Adapters, model, state: AgentState, obs, key, deterministic: bool):
  """``(action, extras)`` for states seen as episode starts, learned statistics kept: the
  computation of independent acts, and of exported policies (``agent_policy``)."""
  processed = adapters.preprocess_fresh(state.preprocess, obs)
  return model.act(state.model, processed, key, deterministic)


def agent_policy(runtime: Runtime, state: AgentState) -> Policy:
  """The policy of a ``batchrl.Agent`` (its runtime and device state): its deterministic
  independent act, as ``batchrl.export`` writes it."""
  if runtime.recurrent:
    raise UserInputError("exporting a recurrent policy is not supported (its carry would "
                         "be an input and an output); export a feed-forward agent.")
  adapters, model = runtime.adapters, runtime.parts.model
  key = jax.random.key(0)  # a deterministic act draws nothing: the key is only an argument

  def act(states):
    return act_fresh(adapters, model, state, states, key, True)[0]

  return space_policy(act, adapters.raw_space)


def export_agent(runtime: Runtime, state: AgentState, path, format: str = "onnx") -> Path:
  """``agent.export``: the policy of a ``batchrl.Agent`` written to ``path``."""
  check_format(format)
  return export_policy(agent_policy(runtime, state), path, format)


def _independent_program(adapters: Adapters, model, deterministic: bool, with_carry: bool):
  def run(state: AgentState, obs, key, carry):
    if with_carry:
      state = state._replace(model=state.model._replace(carry=carry))
    action, extras = act_fresh(adapters, model, state, obs, key, deterministic)
    return action, extras.get("carry", ()) if with_carry else ()

  return jax.jit(run)
