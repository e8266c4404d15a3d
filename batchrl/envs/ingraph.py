"""``InGraphBatchEnv``: a host batch of environments callable from inside ``jax.jit``.

The seeds' InGraphBatchEnv made a Python batch env a TensorFlow op. Here the host env is
reached through ``batchrl.envs.host_call`` (``io_callback(ordered=True)`` without its
per-call wrapping of the arguments; ordered, so steps happen in program order), and it
speaks the batched in-graph protocol of ``batchrl.envs.jax_env``; the same
``simulate`` loop therefore runs with gymnax envs and with Gymnasium envs in processes.

The host env must follow the Gymnasium vector API with same-step auto-reset (``BatchEnv``
does; so does ``gymnasium.vector.SyncVectorEnv(..., autoreset_mode=SAME_STEP)``): after an
episode ends, ``step`` returns the first observation of the next episode and
``infos["final_obs"]`` / ``infos["_final_obs"]`` hold the finished one's last observation.

Lanes (``lanes=S``, what ``batchrl train --seeds S`` builds for host envs): the host batch
of ``S x N`` envs is ``S`` independent lanes of ``N`` envs each, stepped under ``jax.vmap``
over the lanes. The lanes' actions then cross to the host together, in ONE call, and the
whole batch steps there: S runs in one program pay for one crossing a step, not S. On a
GPU it is meant to let several host runs share the device better than separate processes
do (docs/gpu.md; not measured there yet). Such an env must
be stepped under a ``vmap`` of axis size ``S`` (``jax.custom_batching.custom_vmap``; JAX
refuses ordered effects under ``vmap`` otherwise) and never inside a ``vmap``-ed loop: loop
outside, ``vmap`` the loop's body (``batchrl.train.fused`` does).

Limits: array action spaces only (Box, Discrete, MultiDiscrete, MultiBinary); observations
may also be a ``Dict`` of array spaces (e.g. a state and its ``action_mask``), carried as a
dict of arrays. float64/int64 values are carried as float32/int32 unless JAX's x64 mode is
on.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from jax import custom_batching

from batchrl.envs.host_call import host_call
from batchrl.envs.jax_env import EnvStep

_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                 gym.spaces.MultiBinary)


def _graph_dtype(space: gym.Space) -> np.dtype:
  """The dtype a space's values have inside the graph (canonicalised for x32 JAX)."""
  dtype = np.dtype(space.dtype)
  return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


def _check_space(space: gym.Space, what: str, allow_dict: bool = False) -> None:
  if allow_dict and isinstance(space, gym.spaces.Dict):
    for sub in space.spaces.values():
      _check_space(sub, what, allow_dict)
    return
  if not isinstance(space, _ARRAY_SPACES):
    kinds = "Box, Discrete, MultiDiscrete, MultiBinary" + (", or a Dict of them" * allow_dict)
    raise TypeError(f"InGraphBatchEnv supports array {what} spaces ({kinds}), got "
                    f"{type(space).__name__}. Flatten the space with a wrapper (e.g. "
                    "gymnasium.wrappers.FlattenObservation).")


def _structs(space: gym.Space, batch: int):
  """``ShapeDtypeStruct``s of a batch of ``space``'s values (a dict for a Dict space)."""
  if isinstance(space, gym.spaces.Dict):
    return {name: _structs(sub, batch) for name, sub in space.spaces.items()}
  return jax.ShapeDtypeStruct((batch,) + tuple(space.shape), _graph_dtype(space))


def _as_graph(structs, values):
  """Host values -> numpy arrays of the graph's dtypes, in the structure of ``structs``."""
  if isinstance(structs, dict):
    return {name: _as_graph(sub, values[name]) for name, sub in structs.items()}
  return np.asarray(values, structs.dtype)


def _put_rows(batch, rows: dict[int, Any]):
  """A copy of ``batch`` with row ``i`` replaced by ``rows[i]`` (same nested structure)."""
  if isinstance(batch, dict):
    return {name: _put_rows(sub, {i: row[name] for i, row in rows.items()})
            for name, sub in batch.items()}
  batch = batch.copy()
  for i, row in rows.items():
    batch[i] = row
  return batch


def _check_autoreset(batch_env) -> None:
  """The in-graph step reads ``final_obs`` after an automatic reset in the same step: a batch
  env in another auto-reset mode would hand it wrong transitions without an error."""
  mode = getattr(batch_env, "metadata", {}).get("autoreset_mode")
  name = getattr(mode, "name", mode)
  if mode is not None and name not in ("SAME_STEP", "SameStep"):
    raise ValueError(f"InGraphBatchEnv needs a batch env with autoreset_mode=SAME_STEP (final "
                     f"observations in the step that ends an episode); got {name}.")


@dataclasses.dataclass(eq=False)
class InGraphBatchEnv:
  """Wraps a host batch env (``BatchEnv``) as a batched in-graph env.

  The in-graph ``state`` is a step counter; the real environment state lives in the host
  env. ``reset(key)`` seeds the host env from ``key`` (reproducible for the same key).
  ``lanes``: the host env's envs split into that many lanes of ``num_envs`` each, stepped
  under ``jax.vmap`` over the lanes (the module doc); one lane too (``--seeds 1``). None
  (the default): a plain batch, never under ``vmap``.
  """

  batch_env: Any
  lanes: int | None = None

  def __post_init__(self):
    _check_autoreset(self.batch_env)
    _check_space(self.single_observation_space, "observation", allow_dict=True)
    _check_space(self.single_action_space, "action")
    total = int(self.batch_env.num_envs)
    if self.lanes is not None and (not isinstance(self.lanes, int) or self.lanes < 1
                                   or total % self.lanes):
      raise ValueError(f"lanes must be None or a positive int dividing the host env's {total} "
                       f"envs, got {self.lanes!r}.")
    self._obs_struct = _structs(self.single_observation_space, total)
    self._float = jax.ShapeDtypeStruct((total,), np.float32)
    self._bool = jax.ShapeDtypeStruct((total,), np.bool_)
    if self.lanes is not None:  # every lane's reset and step in one host call under vmap
      self._vmapped_reset = _over_lanes(self._reset_all_lanes, self.lanes, self._unbatched)
      self._vmapped_step = _over_lanes(self._step_all_lanes, self.lanes, self._unbatched)

  @property
  def num_envs(self) -> int:
    """Envs per lane (all of the host env's with one lane)."""
    return int(self.batch_env.num_envs) // (self.lanes or 1)

  @property
  def single_observation_space(self) -> gym.Space:
    return self.batch_env.single_observation_space

  @property
  def single_action_space(self) -> gym.Space:
    return self.batch_env.single_action_space

  # -- host side ------------------------------------------------------------------------

  def _host_reset(self, seed):
    obs, _ = self.batch_env.reset(seed=int(seed))
    return _as_graph(self._obs_struct, obs)

  def _host_step(self, action):
    action = np.asarray(action, self.single_action_space.dtype)
    obs, reward, terminated, truncated, infos = self.batch_env.step(action)
    obs = _as_graph(self._obs_struct, obs)
    mask = np.asarray(infos.get("_final_obs", False), bool)
    # no episode ended (most steps): the observations themselves, not a copy (the results
    # are copied into the program's buffers anyway)
    final_obs = obs if not mask.any() else _put_rows(
        obs, {int(i): infos["final_obs"][i] for i in np.flatnonzero(mask)})
    return (obs, np.asarray(reward, np.float32), np.asarray(terminated, np.bool_),
            np.asarray(truncated, np.bool_), final_obs)

  def _unbatched(self, *args):
    raise RuntimeError(f"This InGraphBatchEnv holds {self.lanes} lanes of {self.num_envs} "
                       "envs: step and reset it under jax.vmap over its lanes.")

  # -- graph side -----------------------------------------------------------------------

  def reset(self, key):
    return self._batch_reset(key) if self.lanes is None else self._vmapped_reset(key)

  def step(self, key, state, action) -> EnvStep:
    if self.lanes is None:
      return self._batch_step(key, state, action)
    return self._vmapped_step(key, state, action)

  def _batch_reset(self, key):
    """The whole host batch reset in one call."""
    seed = jax.random.randint(key, (), 0, np.iinfo(np.int32).max)
    obs = host_call(self._host_reset, self._obs_struct, seed)
    return obs, jnp.int32(0)

  def _batch_step(self, key, state, action) -> EnvStep:
    """The whole host batch stepped in one call."""
    del key  # the host envs own their randomness (seeded at reset)
    structs = (self._obs_struct, self._float, self._bool, self._bool, self._obs_struct)
    obs, reward, terminated, truncated, final_obs = host_call(self._host_step, structs, action)
    return EnvStep(obs, state + 1, reward, terminated, truncated, final_obs, {})

  def _reset_all_lanes(self, keys):
    """``reset`` of every lane at once: one host reset of the whole batch, seeded from the
    first lane's key (the host env seeds each of its envs apart)."""
    obs, _ = self._batch_reset(keys[0])
    return _split_lanes(obs, self.lanes), jnp.zeros((self.lanes,), jnp.int32)

  def _step_all_lanes(self, keys, state, action) -> EnvStep:
    """``step`` of every lane at once: their actions ``[S, N, ...]`` in one host call."""
    out = self._batch_step(keys, state, _join_lanes(action))
    lanes = lambda x: _split_lanes(x, self.lanes)
    return EnvStep(lanes(out.obs), out.state, lanes(out.reward), lanes(out.terminated),
                   lanes(out.truncated), lanes(out.final_obs), {})


def _split_lanes(tree, lanes: int):
  """``[S * N, ...]`` leaves -> ``[S, N, ...]``."""
  return jax.tree.map(lambda x: x.reshape((lanes, x.shape[0] // lanes) + x.shape[1:]), tree)


def _join_lanes(tree):
  """``[S, N, ...]`` leaves -> ``[S * N, ...]``."""
  return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), tree)


def _broadcast(tree, lanes: int):
  """Every leaf repeated along a new leading axis of ``lanes``."""
  return jax.tree.map(lambda x: jnp.broadcast_to(x, (lanes,) + jnp.shape(x)), tree)


def _over_lanes(batched, lanes: int, unbatched):
  """``batched`` (every lane's arguments with a leading lane axis) as a function of one
  lane's arguments that runs under ``jax.vmap`` over the ``lanes`` lanes, called once for
  all of them; called outside ``vmap``, it raises (``unbatched``) when the program runs.

  ``custom_vmap`` traces the one-lane function too: it must trace, so its body is a host
  call of the right shapes that raises if it ever runs."""

  @custom_batching.custom_vmap
  def one_lane(*args):
    structs = jax.eval_shape(lambda *a: jax.tree.map(lambda x: x[0], batched(
        *_broadcast(a, lanes))), *args)
    return host_call(unbatched, structs)

  @one_lane.def_vmap
  def rule(axis_size, in_batched, *args):
    if axis_size != lanes:
      raise ValueError(f"an env of {lanes} lanes runs under jax.vmap over its lanes, "
                       f"got an axis of {axis_size}.")
    args = [jax.tree.map(lambda y, b: y if b else _broadcast(y, lanes), x, batched_x)
            for x, batched_x in zip(args, in_batched)]
    out = batched(*args)
    return out, jax.tree.map(lambda _: True, out)

  return one_lane
