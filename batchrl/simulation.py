"""The fused step: environment step + the agent's act + its observe, as one compiled function.

Like the seeds' ``simulate()``, one call advances a batch of environments and the agent
together; ``simulate`` scans that step ``num_steps`` times inside ``jax.lax.scan`` and
returns time-major transitions and episode statistics. It runs with any batched env of the
``batchrl.envs.jax_env`` protocol: a ``VecEnv`` of JAX-native envs (millions of steps/s),
or an ``InGraphBatchEnv`` wrapping host environments.

Modes (what is done with each transition):
  ``"observe"`` - ``agent.observe``: store, and update whenever the agent is ready.
  ``"store"``   - ``agent.store`` only; the caller runs ``agent.update`` (fused training
                  loops scan ``agent.period`` stores, then update once).
  ``"track"``   - ``agent.track``: no learning, internals advance (evaluation).
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from batchrl.agents.core import Model, Transition
from batchrl.specs import EnvSpec

MODES = ("observe", "store", "track")


class SimState(NamedTuple):
  """Everything the loop carries between steps; a pytree (checkpointable, vmappable)."""

  env_state: Any
  obs: Any  # [B, ...] the observation to act on
  agent_state: Any
  key: jax.Array
  episode_return: jax.Array  # [B] return of the running episodes so far
  episode_length: jax.Array  # [B] steps of the running episodes so far


class Rollout(NamedTuple):
  """What ``simulate`` returns, time-major ``[T, B]`` (metrics ``[T]``)."""

  transitions: Transition
  done: jax.Array  # [T, B] an episode ended at this step
  episode_return: jax.Array  # [T, B] return of the episode that ended (0 where not done)
  episode_length: jax.Array  # [T, B] length of the episode that ended (0 where not done)
  metrics: dict  # agent update metrics per step ("observe" mode), else empty


def env_spec(env) -> EnvSpec:
  """The EnvSpec of a batched env (observation/action of one env, and the batch size)."""
  return EnvSpec(env.single_observation_space, env.single_action_space, int(env.num_envs))


def init(env, agent: Model, key: jax.Array, agent_state=None) -> SimState:
  """Resets all envs and (unless given) initialises the agent from the env's spec."""
  env_key, agent_key, key = jax.random.split(key, 3)
  obs, env_state = env.reset(env_key)
  if agent_state is None:
    agent_state = agent.init(agent_key, env_spec(env))
  zeros = jnp.zeros((env.num_envs,), jnp.float32)
  return SimState(env_state, obs, agent_state, key, zeros, zeros.astype(jnp.int32))


def restart(env, sim: SimState) -> SimState:
  """Forces a reset of every env (the seeds' ``reset=True``), keeping the agent state."""
  env_key, key = jax.random.split(sim.key)
  obs, env_state = env.reset(env_key)
  zeros = jnp.zeros_like(sim.episode_return)
  return sim._replace(env_state=env_state, obs=obs, key=key, episode_return=zeros,
                      episode_length=zeros.astype(jnp.int32))


def step(env, agent: Model, sim: SimState, *, mode: str = "observe",
         deterministic: bool = False) -> tuple[SimState, Rollout]:
  """One fused step: act on ``sim.obs``, step the envs, hand the transition to the agent."""
  key, act_key, env_key = jax.random.split(sim.key, 3)
  action, extras = agent.act(sim.agent_state, sim.obs, act_key, deterministic)
  out = env.step(env_key, sim.env_state, action)
  transition = Transition(sim.obs, action, out.reward, out.terminated, out.truncated,
                          out.final_obs, extras)
  agent_state, metrics = _hand_over(agent, sim.agent_state, transition, mode)
  done = jnp.logical_or(out.terminated, out.truncated)
  # Scores: an env whose reward or episodes are shaped for learning (Atari: clipped rewards,
  # a lost life ends the agent's episode) reports the raw ones in info (envs.preprocessed).
  score_reward = out.info.get("score_reward", out.reward)
  done = out.info.get("game_over", done)
  ep_return = sim.episode_return + score_reward
  ep_length = sim.episode_length + 1
  new_sim = SimState(out.state, out.obs, agent_state, key,
                     jnp.where(done, 0.0, ep_return), jnp.where(done, 0, ep_length))
  rollout = Rollout(transition, done, jnp.where(done, ep_return, 0.0),
                    jnp.where(done, ep_length, 0), metrics)
  return new_sim, rollout


def _hand_over(agent: Model, state, transition: Transition, mode: str):
  if mode == "observe":
    return agent.observe(state, transition)
  if mode == "store":
    return agent.store(state, transition), {}
  if mode == "track":
    return agent.track(state, transition), {}
  raise ValueError(f"Unknown simulate mode {mode!r}; valid: {', '.join(MODES)}.")


def simulate(env, agent: Model, sim: SimState, num_steps: int, *, mode: str = "observe",
             deterministic: bool = False) -> tuple[SimState, Rollout]:
  """Scans ``step`` ``num_steps`` times; returns the final state and the ``[T, B]`` rollout.

  Pure and traceable: wrap it in ``jax.jit`` (with env/agent/num_steps/mode static, e.g.
  via ``functools.partial``) or call it inside a larger compiled training loop.
  """
  if mode not in MODES:
    raise ValueError(f"Unknown simulate mode {mode!r}; valid: {', '.join(MODES)}.")
  if not isinstance(num_steps, int) or num_steps < 1:
    raise ValueError(f"num_steps must be a positive int, got {num_steps!r}.")
  body = functools.partial(step, env, agent, mode=mode, deterministic=deterministic)
  return jax.lax.scan(lambda s, _: body(s), sim, None, length=num_steps)


def episode_stats(rollout: Rollout) -> dict:
  """Mean score/length over the episodes that finished in a rollout (NaN when none did)."""
  count = jnp.sum(rollout.done)
  denom = jnp.maximum(count, 1)
  nan = jnp.float32(jnp.nan)
  mean_score = jnp.where(count > 0, jnp.sum(rollout.episode_return) / denom, nan)
  mean_length = jnp.where(count > 0, jnp.sum(rollout.episode_length) / denom, nan)
  return {"episodes": count, "mean_score": mean_score, "mean_length": mean_length}
