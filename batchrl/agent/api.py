"""``batchrl.Agent``: the object users drive themselves (TensorForce's act / observe API).

    agent = Agent.create(agent='ppo', environment='CartPole-v1', batch_size=1024)
    state = env.reset()
    while True:
      action = agent.act(state)
      state, terminal, reward = env.execute(action)
      agent.observe(reward=reward, terminal=terminal)

In TensorForce's words this object is the *Agent* (interaction: preprocessing, exploration,
streams, checkpoints) and ``batchrl.agents.core.Model`` the *Model* (actions and updates).
All of the agent's state is one pytree on the device (``batchrl.agent.interaction``); a
step is one compiled call (``act``), ``observe`` only records the reward on the host. A
transition is handed to the model once its next state is known, at the stream's next
``act`` (or, on the fast path below, with many others a little later, but always before
anything reads the model); updates therefore run inside ``act`` (``observe`` reports them).

Streams: ``parallel_interactions=N`` lets one agent act for ``N`` environments. Give a batch
of states with ``parallel=[...]`` (default: streams ``0..k-1``); one call acts for all.
Their host-side bookkeeping is ``batchrl.agent.streams``; the spec and its file,
``batchrl.agent.spec``.

Terminal values: 0/False continue; 1/True the episode ended (no value after it); 2 cut short
(time limit): the update bootstraps from the next state, which ``observe(...,
next_states=...)`` may give (``Runner`` does); without it, from the last state acted on.

Speed: when all streams act in each call and the model's ``act`` reads nothing its
``store`` changes (feed-forward policies without observation normalization, e.g. PPO's
defaults), an act runs alone and transitions wait on the host, stored many at a time
(``batchrl.agent.fast_path``); the results are the same. With one stream and a float
vector state, ``act`` and ``observe`` keep their bookkeeping in scalar reads and writes
(``Streams.act_one``, ``Streams.observe_one``) and hand anything unusual to the general path.
Creating the first agent also turns JAX's CPU async dispatch off
(``batchrl.agent.dispatch``): an act computes for microseconds, less than handing it to
another thread costs. Set ``BATCHRL_ASYNC_DISPATCH=1`` to keep JAX's default.

Creating an agent compiles nothing: its initial state is traced (so a spec the model
cannot build fails there) and made at first use, when the act programs compile too; they go
into JAX's persistent compilation cache as ``batchrl train``'s do
(``dispatch.prefer_compilation_cache``). Rewards and terminals may be Python or numpy
scalars or 0-d arrays (Gymnasium's ``np.float64`` rewards): one stream's scalar path takes
them all and stores what the general path would.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np

from batchrl import checkpoint, presets
from batchrl.agent import spec as agent_spec
from batchrl.agent.dispatch import prefer_compilation_cache, prefer_inline_dispatch
from batchrl.agent.errors import AgentUsageError
from batchrl.agent.fast_path import DeferredCommits, fast_plan
from batchrl.agent.runtime import build_runtime, export_agent
from batchrl.agent.streams import Streams, one_stream_shape, update_ran
from batchrl.agents.core import Model
from batchrl.agents.families import FAMILIES, family_of_type
from batchrl.configclass import ConfigError

__all__ = ["Agent"]


class Agent:
  """An agent driven by ``act`` / ``observe``; build it with ``Agent.create`` or ``Agent.load``."""

  # ------------------------------------------------------------------------ creating

  @classmethod
  def create(cls, agent: Any = None, environment: Any = None, *, states: dict | None = None,
             actions: dict | None = None, max_episode_timesteps: int | None = None,
             network: Any = "auto", preprocessing: Any = None,
             reward_preprocessing: Any = None, exploration: Any = None,
             seed: int | None = None, parallel_interactions: int = 1,
             preset: str | None = None, **agent_kwargs) -> Agent:
    """Builds an agent.

    Args:
      agent: an agent name (``batchrl.agents.families.api_names()``: 'ppo', 'random',
        'constant', ...), a dict with ``type`` and the agent's keys, or a JSON file path
        (None: 'ppo', or the agent of ``preset``).
      environment: takes states, actions and the episode limit from a
        ``batchrl.envs.Environment``, a Gymnasium id or a Gymnasium env.
      states: a spec dict (``batchrl.specs``): one spec or a dict of named specs. A bool
        state ``<action>_mask`` of shape ``action.shape + (num_values,)`` masks an int
        action (True = allowed; ``action_mask`` for the single unnamed action).
      actions: a spec dict (``batchrl.specs``): one spec or a dict of named specs.
      max_episode_timesteps: episode limit (checked in ``observe``; Runner cuts there).
      network: 'auto', a layer list, a ``branches`` dict, or a JSON file path
        (``batchrl.networks.layered``).
      preprocessing: per-state preprocessing (``batchrl.preprocessing``).
      reward_preprocessing: preprocessing of rewards.
      exploration: action exploration (``batchrl.exploration``), off when deterministic.
      seed: seeds parameters, sampling and exploration (None: a random seed, recorded in
        ``agent.spec``).
      parallel_interactions: number of streams one agent acts for.
      preset: a named config of ``batchrl train`` (``batchrl configs`` lists them, e.g.
        'sac_pendulum'): the agent gets that run's agent values and networks, its update
        schedule kept per transition for these streams (``batchrl.presets``).
      **agent_kwargs: the agent's own keys (each agent's ``keys.py``, e.g.
        ``batchrl.agents.ppo.keys``); with ``preset``, changes to the preset's config fields
        (as ``batchrl configs NAME`` lists them).

    Networks: ``network='auto'`` builds, for each state, a dense(64, tanh) branch (a
    convolution stack for images), then two dense(64) layers (``batchrl.networks.layered``);
    each agent puts its own layers on top: a linear head per output (PPO, VPG, TRPO, DQN,
    the SAC/TD3/DDPG actors), and for the DDPG, TD3 and SAC critics two dense(256) layers on
    [features, action] (``critic_layers``). ``agent.summary()`` lists what was built, with
    parameter counts. ``batchrl train``'s named configs choose their own sizes (e.g.
    ``sac_pendulum``: 2x64 MLPs), so an agent with these defaults is not that run:
    ``preset='sac_pendulum'`` gives that run's agent (or give ``network=`` and the agent's
    keys).

    Compilation: creating an agent traces its initial state; that program and the act
    programs compile at first use (seconds for SAC or TD3 on a CPU). Compiled programs are
    kept in JAX's persistent compilation cache for the next process, as ``batchrl train``
    keeps them (``batchrl.agent.dispatch.prefer_compilation_cache``).
    """
    if preset is not None:
      name, kwargs = presets.preset_config(preset, agent_kwargs, parallel_interactions)
      presets.check_preset_arguments(preset, agent, network, name)
    else:
      with agent_spec.naming_spec_files(agent, network):
        name, kwargs = agent_spec.resolve_agent("ppo" if agent is None else agent, agent_kwargs)
    if environment is not None:
      if states is not None or actions is not None:
        raise ConfigError("give environment= or states=/actions=, not both.")
      states, actions, env_limit = agent_spec.env_specs(environment)
      max_episode_timesteps = max_episode_timesteps or env_limit
    if states is None or actions is None:
      raise ConfigError("Agent.create needs states= and actions= (spec dicts) or "
                        "environment=.")
    if seed is None:
      seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
    with agent_spec.naming_spec_files(agent, network):
      spec = dict(type=name, states=states, actions=actions,
                  max_episode_timesteps=max_episode_timesteps,
                  network=agent_spec.resolve_network(network), preprocessing=preprocessing,
                  reward_preprocessing=reward_preprocessing, exploration=exploration,
                  seed=seed, parallel_interactions=parallel_interactions, config=kwargs)
      if preset is not None:
        spec["preset"] = preset
      return cls(agent_spec.jsonable(spec))

  def __init__(self, spec: dict):
    """Use ``Agent.create`` or ``Agent.load``; ``spec`` is what ``agent.spec`` returns."""
    prefer_inline_dispatch()  # before anything below starts JAX's backend
    prefer_compilation_cache()
    self.spec = spec
    self._rt = build_runtime(spec)  # shared with agents of this spec but for the seed
    self._seed = int(spec["seed"])
    # the state's program is traced now (a spec the model cannot build raises here) and
    # compiled at first use (``_device``): compiling it is most of a creation's time
    self._rt.state_shapes(self._seed)
    n = self.parallel_interactions
    self._streams = Streams(n, spec["max_episode_timesteps"], self._rt.parts.model.period)
    self._fast = None  # DeferredCommits once an act of all streams found the agent fit
    self._fast_refusal: str | None = None  # why the agent cannot take the fast path
    self._independent_acts = 0  # each independent act gets its own key
    self._one = one_stream_shape(self._rt.adapters.raw_space) if n == 1 else None

  @functools.cached_property
  def _device(self):
    """The whole device state (``interaction.AgentState``), made at its first read and
    assigned after each call that changes it; read it through ``_state``, which first
    stores what the fast path holds."""
    return self._rt.init_state(self._seed)

  @functools.cached_property
  def _learned(self) -> int | None:
    """``_learning_updates`` of the state as the last act left it (``_update_learned``)."""
    return _learning_updates(self._rt.parts.model, self._device.model)

  # ------------------------------------------------------------------------ properties

  @property
  def states(self) -> dict:
    return self.spec["states"]

  @property
  def actions(self) -> dict:
    return self.spec["actions"]

  @property
  def parallel_interactions(self) -> int:
    return int(self.spec["parallel_interactions"])

  @property
  def max_episode_timesteps(self) -> int | None:
    return self.spec["max_episode_timesteps"]

  # counts over all streams (``updates``: those that learned, see ``_update_learned``)
  timesteps = property(lambda self: self._streams.timesteps, doc="Timesteps acted.")
  episodes = property(lambda self: self._streams.episodes, doc="Episodes ended.")
  updates = property(lambda self: self._streams.updates, doc="Updates that learned.")

  @property
  def timesteps_per_update(self) -> int | None:
    """Timesteps (over all streams) from one update to the next where that is fixed and
    every update learns (PPO's ``batch_size``); None where the first learning update waits
    for something else (a replay agent's ``first_update``, whole episodes)."""
    period = self._streams.period
    if period is None or self._rt.parts.model.learned_updates is not None:
      return None
    return period * self._streams.n

  @property
  def _state(self):
    """The whole device state (``interaction.AgentState``); first stores the transitions
    the fast path still holds on the host, so it is exactly the fused path's state."""
    self._sync()
    return self._device

  def _sync(self) -> None:
    if self._fast is not None:
      self._device = self._fast.sync(self._device)

  def summary(self) -> str:
    """What the agent is, in a few lines: its type, states, actions and streams, then each
    network with its parameter count and weight shapes (what ``network='auto'`` and the
    agent's defaults built: see ``Agent.create``). Needs no compilation."""
    shapes = self._rt.state_shapes(self._seed)  # its trace is cached
    spec = self.spec
    streams = self.parallel_interactions
    built = (f"preset={spec['preset']!r}" if spec.get("preset") is not None
             else f"network={json.dumps(spec['network'])}")
    head = (f"{spec['type']} agent: states {_spec_text(spec['states'])}, actions "
            f"{_spec_text(spec['actions'])}, {streams} stream{'s' if streams > 1 else ''}, "
            f"{built}, seed {spec['seed']}")
    nets = agent_spec.describe_networks(getattr(shapes.model, "params", ()))
    return "\n".join([head, *(f"  {line}" for line in nets)])

  def __repr__(self) -> str:
    return (f"Agent(type={self.spec['type']!r}, parallel_interactions="
            f"{self.parallel_interactions}, timesteps={self.timesteps}, "
            f"updates={self.updates})")

  # ------------------------------------------------------------------------ acting

  def act(self, states, deterministic: bool = False, independent: bool = False,
          parallel=None, internals=None):
    """Actions for one state or a batch (see the module docstring).

    Returns a Python scalar for one scalar action, an ``np.ndarray`` otherwise, a dict for
    several actions; with ``independent=True`` and ``internals`` (recurrent policies),
    ``(actions, internals)``.
    """
    if (self._one is not None and self._fast is not None and parallel is None
        and not independent and internals is None):  # one stream's float vector state
      taken = self._streams.act_one(self._fast, self._device, states, self._one, deterministic)
      if taken is not None:
        self._device, action = taken
        return action
    obs, batched = self._rt.adapters.check_states(states)
    k = len(obs) if type(obs) is np.ndarray else len(next(iter(obs.values())))
    if independent:
      return self._act_independent(obs, batched, deterministic, internals)
    if internals is not None:
      raise AgentUsageError("internals= is only for independent=True acting; the training "
                            "streams keep their own.")
    streams = self._streams
    idx, rows, held = streams.begin_act(parallel, k, batched,
                                        obs.shape if type(obs) is np.ndarray else None)
    every = isinstance(rows, slice) and k == streams.n  # all streams, in order
    commit, slots, flush = streams.plan_commit(idx, held, every, self._rt)
    update = streams.plan_update(commit)
    fast = self._fast_path(every, commit, update)
    if fast is not None:
      self._device = fast.act(self._device, obs, streams.start, streams.reward,
                              streams.terminal, commit, bool(deterministic))
      streams.after_act(idx, rows, held, False)
      return fast.last_action(batched)
    self._sync()
    next_held, has_next = self._rt.held_next(self._device, streams.next, idx)
    self._device, action, updated = self._rt.act(
        self._device, obs, idx, streams.reward[idx], streams.terminal[idx] * held, next_held,
        has_next, streams.start[idx], commit=commit, slots=slots, flush=flush, update=update,
        deterministic=bool(deterministic))
    if self._fast is not None:
      self._fast.forget()  # this act changed the device state: key, timestep, last act
    ran = update_ran(commit, flush, update, updated) and self._update_learned()
    streams.after_act(idx, rows, held, ran)
    return self._rt.adapters.to_user(action, batched)

  def _update_learned(self) -> bool:
    """Whether the update that just ran learned. Replay models (DQN, NAF, DQFD) call
    ``update`` every period but learn only from ``first_update`` steps on, counting the
    updates that did in their state; ``agent.updates`` counts those."""
    count = _learning_updates(self._rt.parts.model, self._device.model)
    if count is None:
      return True
    learned = count != self._learned
    self._learned = count
    return learned

  def _fast_path(self, every: bool, commit: str, update: str):
    """The fast path (``DeferredCommits``) when this act may take it, else None.

    It may when all streams act, in order, no update is due in this act, no cut step waits
    with its given next state (those commit inside the act, fused), and the agent is fit
    for it (``fast_plan``, checked once).
    """
    if not every or self._streams.next:
      return None
    if not (commit == "none" or (commit == "direct" and update == "store")):
      return None
    if self._fast is None and self._fast_refusal is None:
      plan = fast_plan(self._rt, self._device)
      if isinstance(plan, str):
        self._fast_refusal = plan
      else:
        self._fast = DeferredCommits(self._rt, plan)
    return self._fast

  def _act_independent(self, obs, batched, deterministic, internals):
    # no sync: act reads nothing that the held transitions would change (fast_plan)
    self._independent_acts += 1
    actions, new_internals = self._rt.act_independent(
        self._device, obs, deterministic, internals, seed=self._seed,
        count=self._independent_acts)
    result = self._rt.adapters.to_user(actions, batched)
    return (result, new_internals) if internals is not None else result

  # ------------------------------------------------------------------------ observing

  def observe(self, reward, terminal=False, parallel=None, next_states=None) -> bool:
    """Records the reward of the last ``act`` of each stream; returns whether an update ran
    during this step (in its ``act``)."""
    streams = self._streams
    if streams.n == 1 and parallel is None and next_states is None:
      # one number and one terminal (Python, numpy or 0-d): scalar bookkeeping
      updated = streams.observe_one(reward, terminal)
      if updated is not None:
        return updated
    idx, rows, rewards, terminals = streams.begin_observe(reward, terminal, parallel)
    if next_states is not None:
      self._store_next(next_states, idx, np.broadcast_to(terminals, (len(idx),)))
    return streams.observe(idx, rows, rewards, terminals)

  def _store_next(self, next_states, idx, terminals) -> None:
    obs, _ = self._rt.adapters.check_states(next_states)
    rows = self._rt.process_next(self._device, obs, idx)  # preprocessing state is current
    for j, i in enumerate(idx):
      if terminals[j] == 2:
        self._streams.next[int(i)] = self._rt.row(rows, j)

  def reset(self) -> None:
    """Ends every running episode: an un-observed act is dropped; a step observed without
    a terminal is kept as cut short (terminal 2, bootstrapped from its own state)."""
    self._streams.reset()

  def initial_internals(self):
    """Internal state (recurrent carries) for ``act(..., independent=True, internals=...)``
    of one stream; ``{}`` for feed-forward policies."""
    return self._rt.initial_internals()

  # ---------------------------------------------------------------- replay memories

  def import_observations(self, observations) -> None:
    """Replay agents (dqn, ddqn, dqn_nstep, naf, dqfd): fills the replay memory with
    recorded experience (TensorForce's name); DQFD's demonstrations go through
    ``import_demonstrations`` instead.

    ``observations``: a list of dicts (``state``, ``action``, ``reward``, ``terminal`` with
    2 = cut short, ``internal`` empty), consecutive entries being consecutive steps, or a
    dict of arrays (``states``, ``actions``, ``rewards``, ``terminals``, optional
    ``next_states``). States and actions are checked against the specs first; an error
    names the field and index. With ``parallel_interactions=N`` the count must be a
    multiple of N (each of N consecutive chunks fills one stream's column). Imported steps
    do not count as timesteps (``first_update``, exploration schedules)."""
    self._host_method("import_observations", observations)

  def import_demonstrations(self, demonstrations) -> None:
    """DQFD: adds demonstrations to the demonstration memory (TensorForce's name).

    ``demonstrations``: as ``import_observations``'s ``observations``; checked the same
    way. More than the memory holds grows it (``spec["config"]["demo_memory_capacity"]``
    follows, so ``save``/``load`` keep them all; the next act compiles again)."""
    self._respec(self._host_method("import_demonstrations", demonstrations))

  def set_demonstrations(self, batch) -> None:
    """DQFD: replaces the stored demonstrations by ``batch`` (as ``import_demonstrations``)."""
    self._respec(self._host_method("set_demonstrations", batch))

  def _respec(self, changes: dict | None) -> None:
    """After a host method that changed the model's config (``changes``: agent keys and
    values, e.g. a grown demonstration memory): the spec, and the runtime built from it,
    follow; the state (already of the new shapes) is kept."""
    if not changes:
      return
    self._sync()
    self.spec = {**self.spec, "config": {**(self.spec.get("config") or {}), **changes}}
    self._rt = build_runtime(self.spec)
    self._streams.period = self._rt.parts.model.period
    self._fast, self._fast_refusal = None, None  # both belong to the old runtime

  def pretrain(self, steps: int) -> dict[str, float]:
    """DQFD: ``steps`` updates on the demonstrations alone; returns their mean metrics.
    Without demonstrations it is an error that says how to add them."""
    metrics = self._host_method("pretrain", steps)
    return {k: float(v) for k, v in metrics.items()}

  def _host_method(self, name: str, argument):
    """Runs the agent family's host method ``name`` (``AgentFamily.host_methods``) on the
    model state; agents whose family has none get an error naming the agents that do."""
    method = family_of_type(self.spec["type"]).host_methods.get(name)
    if method is None:
      offered = [t.name for f in FAMILIES if name in f.host_methods for t in f.api_types]
      which = ", ".join(repr(t) for t in offered) + (" agents" if len(offered) > 1 else " agent")
      raise AgentUsageError(f"{name} is for the {which}; this agent is {self.spec['type']!r}.")
    if self.spec.get("preprocessing"):
      raise AgentUsageError("imported experience is stored as the model sees states; with "
                            "state preprocessing configured, give it to an agent without it.")
    state = self._state  # commits what the fast path holds
    model, result = method(state.model, argument)
    self._device = state._replace(model=model)
    if self._fast is not None:
      self._fast.forget()
    return result

  # ------------------------------------------------------------------------ checkpoints

  def save(self, directory, keep: int | None = 5) -> str:
    """Writes a checkpoint (``ckpt-<timesteps>``) and the agent spec (``agent.json``) into
    ``directory``; returns the checkpoint path. ``Agent.load(directory)`` needs nothing else."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    agent_spec.write_spec(directory, self.spec)
    path = checkpoint.save(directory, self.timesteps, self._state, config=self.spec,
                           counters=self._streams.saved(), keep=keep)
    return str(path)

  def export(self, path, format: str = "onnx") -> str:
    """Writes the deterministic policy (``act(..., deterministic=True, independent=True)``,
    preprocessing and normalization included) to ``path`` as a file that runs without
    batchrl: ``format="onnx"`` (onnxruntime; needs ``pip install "batchrl[export]"``) or
    ``"jax"`` (``jax.export`` StableHLO). Returns the path; see ``batchrl.export``."""
    return str(export_agent(self._rt, self._state, path, format))

  @classmethod
  def load(cls, directory) -> Agent:
    """The agent saved in ``directory`` (its newest good checkpoint)."""
    agent = cls(agent_spec.read_spec(directory))
    agent.restore(directory)
    return agent

  def restore(self, directory) -> None:
    """Restores this agent's state from the newest good checkpoint in ``directory`` (saved
    by an agent of the same spec)."""
    saved = agent_spec.read_spec(directory)
    if agent_spec.comparable(saved) != agent_spec.comparable(self.spec):
      raise ConfigError(f"the agent saved in {directory} has another spec; use "
                        "Agent.load(directory) to rebuild it.")
    state, manifest = checkpoint.restore(directory, self._device)
    self._device = state
    if self._fast is not None:
      self._fast.forget()  # what it held belongs to the state just replaced
    self._streams.restore(manifest.get("counters") or {})
    self._learned = _learning_updates(self._rt.parts.model, state.model)

  def close(self) -> None:
    """Stores the transitions the fast path holds. The compiled programs belong to the
    runtime, shared by agents of the same spec but for the seed: they go once no agent
    holds it and it has left ``batchrl.agent.runtime``'s small cache of recent runtimes."""
    self._sync()


def _spec_text(spec: dict) -> str:
  """A state or action spec in short (``float (3,)``, ``int (2 values)``), or several by
  name."""
  if "type" not in spec:
    return "{" + ", ".join(f"{name}: {_spec_text(s)}" for name, s in spec.items()) + "}"
  text, shape = spec["type"], tuple(spec.get("shape", ()))
  if shape:
    text += f" {shape}"
  values = spec.get("num_values", spec.get("num_actions"))
  return text + (f" ({values} values)" if values is not None else "")


def _learning_updates(model: Model, state) -> int | None:
  """The count of updates that learned, for models whose ``update`` may skip learning
  (``Model.learned_updates``); None for models that learn in every update."""
  return None if model.learned_updates is None else int(model.learned_updates(state))
