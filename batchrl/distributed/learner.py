"""The learner side of a distributed run: what is shipped to runners, and the compiled update.

The learner holds the agent state for all N×M envs, in the same ``SimState`` a local host
run checkpoints (so a distributed run resumes locally and the other way round). Each round it
sends runners the *shared* leaves (``shared_index``) and receives ``[K·T, M]`` rollouts; it
concatenates them along the env axis into ``[K·T, N·M]`` and runs ``learn``: for each of
the K iterations, ``period`` stores and one update, exactly the calls a local run makes on
the same experience.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from batchrl import programs
from batchrl.agents.act_reads import act_reads
from batchrl.agents.core import Model
from batchrl.envs.ingraph import _structs
from batchrl.envs.jax_env import EnvStep
from batchrl.simulation import Rollout, SimState, episode_stats, simulate
from batchrl.specs import EnvSpec


def obs_structs(space, batch: int):
  """``ShapeDtypeStruct``s of a batch of observations, as in-graph envs carry them."""
  return _structs(space, batch)


def env_axes(agent: Model, spec: EnvSpec) -> list[int | None]:
  """Per model-state leaf: the axis that indexes envs (recurrent carries, rollout buffers),
  or None for leaves shared by all envs (parameters, optimizer, memories, counters).
  Found by initialising for B and 2B envs (2B keeps batch-size divisibility checks happy)."""
  other = dataclasses.replace(spec, num_envs=2 * spec.num_envs)
  key = jax.random.key(0)
  state = jax.eval_shape(lambda k: agent.init(k, spec), key)
  state_other = jax.eval_shape(lambda k: agent.init(k, other), key)
  axes = []
  b = spec.num_envs
  for leaf, other_leaf in zip(jax.tree.leaves(state), jax.tree.leaves(state_other)):
    # the env axis goes from B to 2B; other axes may grow too (VPG's episode buffer is
    # longer for more envs): such a leaf is sliced along its env axis only
    envs = [i for i, (x, y) in enumerate(zip(leaf.shape, other_leaf.shape))
            if x == b and y == 2 * b]
    axes.append(envs[-1] if envs else None)
  return axes


def shared_index(agent: Model, spec: EnvSpec, axes: list[int | None]) -> tuple[int, ...]:
  """Flat indices of the model-state leaves a runner needs from the learner each round:
  those ``act`` reads that are shared by all envs. Per-env leaves stay with the runner that
  steps those envs; PRNG keys stay with each runner."""
  state = jax.eval_shape(lambda k: agent.init(k, spec), jax.random.key(0))
  reads = act_reads(agent, state, obs_structs(spec.observation_space, spec.num_envs))
  return tuple(i for i, (leaf, axis, read) in enumerate(zip(jax.tree.leaves(state), axes, reads))
               if axis is None and read and not _is_key(leaf))


def _is_key(leaf) -> bool:
  return jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)


@dataclasses.dataclass(frozen=True)
class Placeholder:
  """A leaf a runner makes itself: zeros of this shape (a new key where ``key``)."""

  shape: tuple
  dtype: str
  key: bool = False


def runner_state(agent_state, axes: list[int | None], runner: int, num_envs: int):
  """The agent state runner ``runner`` starts from: its slice of every per-env leaf, and
  placeholders for shared leaves (sent each round when ``act`` reads them, else unused), so
  a runner never allocates or receives the learner's memories."""
  def part(leaf, axis):
    if axis is not None:
      start = runner * num_envs
      return np.asarray(jax.device_get(leaf)).take(range(start, start + num_envs), axis=axis)
    if _is_key(leaf):
      return Placeholder((), "key", key=True)
    return Placeholder(tuple(leaf.shape), np.dtype(leaf.dtype).name)
  leaves, treedef = jax.tree.flatten(agent_state)
  return jax.tree.unflatten(treedef, [part(x, a) for x, a in zip(leaves, axes)])


def fill_placeholders(state, seed: int):
  """``runner_state``'s result with placeholders made real (on the runner)."""
  def real(leaf):
    if not isinstance(leaf, Placeholder):
      return leaf
    return jax.random.key(seed) if leaf.key else np.zeros(leaf.shape, leaf.dtype)
  return jax.tree.map(real, state, is_leaf=lambda x: isinstance(x, Placeholder))


def init_sim(agent: Model, spec: EnvSpec, key: jax.Array) -> SimState:
  """The learner's ``SimState``: the agent for all envs, and the same environment fields
  (a step counter, observations, running returns) a local host run carries and saves."""
  def init(key):
    _, agent_key, key = jax.random.split(key, 3)
    obs = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                       obs_structs(spec.observation_space, spec.num_envs))
    zeros = jnp.zeros((spec.num_envs,), jnp.float32)
    return SimState(jnp.int32(0), obs, agent.init(agent_key, spec), key, zeros,
                    zeros.astype(jnp.int32))
  return programs.jit(init, "once")(key)


def make_learn(agent: Model, kind: str = "loop"):
  """A compiled ``learn(sim, rollout[K, T, B]) -> (sim, infos[K])``: per iteration, ``T``
  stores and one update; infos as a local run reports them (episode stats + update metrics).
  ``kind``: how it compiles (``batchrl.programs.jit``'s kinds; the trainer gives the kind a
  local run's chunk would have, ``batchrl.train.build.chunk_kind``)."""
  def iteration(agent_state, rollout: Rollout):
    agent_state = jax.lax.scan(lambda s, t: (agent.store(s, t), None), agent_state,
                               rollout.transitions)[0]
    agent_state, metrics = agent.update(agent_state)
    return agent_state, {**episode_stats(rollout), **metrics}

  def learn(sim: SimState, rollout: Rollout):
    agent_state, infos = jax.lax.scan(iteration, sim.agent_state, rollout)
    return sim._replace(agent_state=agent_state), infos

  return programs.jit(learn, kind, donate_argnums=0)


class _ShapeEnv:
  """A batched in-graph env with ``spec``'s spaces and zeros for values, only ever traced:
  it gives the shapes of what runners send before any runner exists (``batch_structs``)."""

  def __init__(self, spec: EnvSpec):
    self.num_envs = spec.num_envs
    self.single_observation_space = spec.observation_space
    self.single_action_space = spec.action_space

  def _obs(self):
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                        obs_structs(self.single_observation_space, self.num_envs))

  def reset(self, key):
    del key
    return self._obs(), jnp.int32(0)

  def step(self, key, state, action):
    del key, action
    reward = jnp.zeros((self.num_envs,), jnp.float32)
    ended = jnp.zeros((self.num_envs,), bool)
    obs = self._obs()
    return EnvStep(obs, state, reward, ended, ended, obs, {})


def batch_structs(agent: Model, spec: EnvSpec, sim: SimState, iterations: int) -> Rollout:
  """``ShapeDtypeStruct``s of the ``[K, T, N·M]`` batch ``gather`` makes of the runners'
  rollouts (``spec`` for all N·M envs, ``sim`` the learner's), so ``learn`` can be compiled
  while the runners start."""
  length = iterations * agent.period
  flat = jax.eval_shape(
      lambda sim: simulate(_ShapeEnv(spec), agent, sim, length, mode="track")[1], sim)
  return jax.tree.map(
      lambda s: jax.ShapeDtypeStruct((iterations, agent.period) + s.shape[1:], s.dtype),
      flat._replace(metrics={}))


def gather(rollouts: list[Rollout], iterations: int) -> Rollout:
  """Runners' ``[K·T, M]`` rollouts -> one ``[K, T, N·M]`` batch (runner 0's envs first)."""
  def join(*xs):
    x = np.concatenate(xs, axis=1)
    return x.reshape((iterations, x.shape[0] // iterations) + x.shape[1:])
  return jax.tree.map(join, *[r._replace(metrics={}) for r in rollouts])


def shared_values(sim: SimState, index) -> list:
  """The shared leaves as numpy arrays (what goes into Ray's object store)."""
  leaves = jax.tree.leaves(sim.agent_state)
  return [np.asarray(jax.device_get(leaves[i])) for i in index]
