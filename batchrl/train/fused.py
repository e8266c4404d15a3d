"""The fused driver: whole training runs as compiled programs over in-graph environments.

Model-generic: anything with the ``Model`` interface (``batchrl.agents.core``) and a JAX-native
batched env (``batchrl.envs.jax_env``). One *iteration* is ``agent.period`` fused steps of env +
act + store, then one ``agent.update`` (agents without a fixed period run ``observe`` steps,
updating whenever they are ready). A training run is a ``lax.scan`` of iterations, optionally
``vmap``-ed over seeds::

    sim, infos = train(env, agent, key, num_iterations=100)             # infos: [100]
    sim, infos = train(env, agent, key, num_iterations=100, num_seeds=4)  # infos: [4, 100]

For progress reports and checkpoints, run the same scan in chunks; the results are the
same as one long scan::

    sim = init_sim(env, agent, key)
    run_chunk = make_run_chunk(env, agent)
    sim, infos = run_chunk(sim, 10)   # 10 iterations, infos stacked [10] (on the host)

The programs are compiled with ``batchrl.programs.jit`` (XLA options per kind of program).
"""
from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from batchrl import programs
from batchrl.agents.core import Model, Transition
from batchrl.simulation import Rollout, SimState, episode_stats, restart, simulate
from batchrl.simulation import init as init_simulation
from batchrl.train import host_update


def make_iteration(env, agent: Model, steps_per_iteration: int | None = None
                   ) -> Callable[[SimState], tuple[SimState, dict]]:
  """A pure ``iteration(sim) -> (sim, info)``: collect experience, then learn.

  Args:
    env: a batched in-graph env.
    agent: any agent. With ``agent.period`` set, an iteration stores ``period`` steps and
      updates once; otherwise it runs ``steps_per_iteration`` ``observe`` steps.
    steps_per_iteration: only for agents without a period.

  ``info`` holds ``episode_stats`` of the collected steps (``episodes``, ``mean_score``,
  ``mean_length``; NaN when no episode ended) and the agent's update metrics.
  """
  if agent.period is not None:
    if steps_per_iteration not in (None, agent.period):
      raise ValueError(f"Model {agent.name!r} updates every {agent.period} steps; "
                       f"steps_per_iteration must be None or {agent.period}, got "
                       f"{steps_per_iteration!r}.")
    return functools.partial(_store_then_update, env, agent)
  if not isinstance(steps_per_iteration, int) or steps_per_iteration < 1:
    raise ValueError(f"Model {agent.name!r} has no fixed update period; pass "
                     f"steps_per_iteration as a positive int, got {steps_per_iteration!r}.")
  return functools.partial(_observe, env, agent, steps_per_iteration)


def _store_then_update(env, agent: Model, sim: SimState):
  sim, stats = _store_rollout(env, agent, sim)
  agent_state, metrics = agent.update(sim.agent_state)
  return sim._replace(agent_state=agent_state), {**stats, **metrics}


def _store_rollout(env, agent: Model, sim: SimState):
  """``agent.period`` steps stored; the new sim and the rollout's episode stats."""
  sim, rollout = simulate(env, agent, sim, agent.period, mode="store")
  return sim, episode_stats(rollout)


def _observe(env, agent: Model, num_steps: int, sim: SimState):
  sim, rollout = simulate(env, agent, sim, num_steps, mode="observe")
  metrics = dict(rollout.metrics)
  updated = metrics.pop("updated", jnp.zeros((num_steps,), jnp.float32))
  count = jnp.sum(updated)
  # mean of each metric over the steps that updated (0 when none did)
  means = {name: jnp.sum(value * updated.reshape((-1,) + (1,) * (value.ndim - 1)), axis=0)
           / jnp.maximum(count, 1.0) for name, value in metrics.items()}
  return sim, {**episode_stats(rollout), **means, "updates": count}


def make_evaluate(env, agent: Model, num_steps: int, episodes: int | None = None,
                  num_seeds: int | None = None) -> Callable[..., dict]:
  """A pure ``evaluate(sim, max_steps=None) -> stats`` of the deterministic policy (the mode).

  Restarts every env, lets the agent know that the running episodes ended (so recurrent
  carries start fresh), then steps every env in ``"track"`` mode until each has finished
  its share of ``episodes`` (spread evenly over the ``B`` envs; None = one per env) or
  ``num_steps`` steps (and ``max_steps``, a traced cap, when given) were taken. Each env
  counts its *first* episodes, so short episodes are not favoured; an env stopped by the
  cap before finishing its share counts its running episode as cut there (its return and
  length so far). Returns ``episodes`` (how many finished), ``cut_episodes`` (how many the
  cap cut), ``mean_score`` and ``mean_length`` over both (NaN only when no step was taken)
  and ``eval_steps`` (steps per env taken). The training state is not changed: use the returned
  stats only. With ``num_seeds``, ``sim`` holds that many runs (``init_sim(..., num_seeds)``), each
  evaluated as above, and every stat has a leading seed axis.
  """
  if not isinstance(num_steps, int) or num_steps < 1:
    raise ValueError(f"num_steps must be a positive int, got {num_steps!r}.")
  if episodes is not None and (not isinstance(episodes, int) or episodes < 1):
    raise ValueError(f"episodes must be None or a positive int, got {episodes!r}.")
  if num_seeds is not None:
    _check_seeds(num_seeds)
  step = functools.partial(simulate, env, agent, num_steps=1, mode="track", deterministic=True)

  def begin(sim: SimState):
    sim = restart(env, sim)
    sim = sim._replace(agent_state=_end_episodes(agent, sim))
    zeros = jnp.zeros(sim.episode_return.shape, jnp.float32)
    return sim, jnp.zeros(zeros.shape, jnp.int32), zeros, zeros, jnp.int32(0)

  def more(cap):
    def going(carry):
      _, count, _, _, t = carry
      return jnp.logical_and(t < cap, jnp.any(count < _shares(count.shape[0], episodes)))
    return going

  def one_step(carry):
    sim, count, score, length, t = carry
    sim, rollout = step(sim=sim)
    counted = jnp.logical_and(rollout.done[0], count < _shares(count.shape[0], episodes))
    score = score + jnp.where(counted, rollout.episode_return[0], 0.0)
    length = length + jnp.where(counted, rollout.episode_length[0], 0.0)
    return sim, count + counted, score, length, t + 1

  def finish(carry) -> dict:
    sim, count, score, length, t = carry
    # An env the cap stopped before it finished its share: its running episode counts as
    # cut there (as a time limit cuts one). Leaving it out would score only the episodes
    # short enough to end in time (a low bias) and nothing at all when none did (NaN).
    cut = jnp.logical_and(count < _shares(count.shape[0], episodes), sim.episode_length > 0)
    score = score + jnp.where(cut, sim.episode_return, 0.0)
    length = length + jnp.where(cut, sim.episode_length, 0.0)
    total = jnp.sum(count) + jnp.sum(cut)
    mean = lambda x: jnp.where(total > 0, jnp.sum(x) / jnp.maximum(total, 1),
                               jnp.float32(jnp.nan))
    return {"episodes": jnp.sum(count), "cut_episodes": jnp.sum(cut),
            "mean_score": mean(score), "mean_length": mean(length), "eval_steps": t}

  def evaluate(sim: SimState, max_steps=None) -> dict:
    cap = num_steps if max_steps is None else jnp.minimum(num_steps, max_steps)
    if num_seeds is None:
      return finish(jax.lax.while_loop(more(cap), one_step, begin(sim)))
    return jax.vmap(finish)(lane_while(more(cap), one_step, jax.vmap(begin)(sim)))

  return evaluate


def lane_while(cond, body, carry):
  """``jax.vmap(lambda c: lax.while_loop(cond, body, c))(carry)`` for a ``carry`` with a
  leading lane axis, with the loop outside the ``vmap``: every lane steps until the last
  one's ``cond`` is false, and a lane whose ``cond`` is false keeps its carry (what JAX's
  own rule computes). Host envs need it: JAX refuses their ordered effects in a ``vmap``-ed
  loop, and their lanes step together (``batchrl.envs.ingraph``, lanes)."""
  lanes_cond, lanes_body = jax.vmap(cond), jax.vmap(body)

  def step(carry):
    going = lanes_cond(carry)
    keep = lambda new, old: jnp.where(
        going.reshape(going.shape + (1,) * (new.ndim - 1)), new, old)
    return jax.tree.map(keep, lanes_body(carry), carry)

  return jax.lax.while_loop(lambda carry: jnp.any(lanes_cond(carry)), step, carry)


def _shares(num_envs: int, episodes: int | None) -> jax.Array:
  """Episodes each env plays in an evaluation: ``episodes`` spread evenly (the first
  ``episodes % num_envs`` envs play one more), one each when None."""
  if episodes is None:
    return jnp.ones((num_envs,), jnp.int32)
  base, extra = divmod(episodes, num_envs)
  return jnp.asarray([base + (i < extra) for i in range(num_envs)], jnp.int32)


def _end_episodes(agent: Model, sim: SimState):
  """Tells the agent (through ``track``) that every running episode was cut."""
  key, act_key = jax.random.split(sim.key)
  action, extras = agent.act(sim.agent_state, sim.obs, act_key, True)
  cut = jnp.ones(sim.episode_return.shape, jnp.bool_)
  transition = Transition(sim.obs, action, jnp.zeros_like(sim.episode_return),
                          jnp.zeros_like(cut), cut, sim.obs, extras)
  return agent.track(sim.agent_state, transition)


def first_episode_stats(rollout: Rollout) -> dict:
  """Mean score and length over the first episode each env finished in ``rollout`` ``[T, B]``."""
  done = rollout.done
  first = jnp.logical_and(done, jnp.cumsum(done.astype(jnp.int32), axis=0) == 1)
  count = jnp.sum(first)
  denom = jnp.maximum(count, 1)
  mean = lambda x: jnp.where(count > 0, jnp.sum(jnp.where(first, x, 0)) / denom,
                             jnp.float32(jnp.nan))
  return {"episodes": count, "mean_score": mean(rollout.episode_return),
          "mean_length": mean(rollout.episode_length)}


def init_sim(env, agent: Model, key: jax.Array, num_seeds: int | None = None) -> SimState:
  """Compiled ``simulation.init``; with ``num_seeds`` a stack of independent runs ``[S, ...]``."""
  if num_seeds is None:
    return programs.jit(functools.partial(init_simulation, env, agent), "once")(key)
  _check_seeds(num_seeds)
  keys = jax.random.split(key, num_seeds)
  return programs.jit(jax.vmap(functools.partial(init_simulation, env, agent)), "once")(keys)


def make_run_chunk(env, agent: Model, *, num_seeds: int | None = None,
                   steps_per_iteration: int | None = None,
                   on_iteration: Callable[[int], None] | None = None,
                   donate: bool = False, kind: str = "loop"):
  """A compiled ``run_chunk(sim, num_iterations, length=None) -> (sim, infos)``.

  Runs ``num_iterations`` iterations and stacks their infos ``[num_iterations]`` (NumPy
  arrays: a call waits for its program and fetches them); with ``num_seeds`` the sim
  carries a leading seed axis (from ``init_sim(..., num_seeds)``) and infos are
  ``[num_seeds, num_iterations]``. The program is compiled once per ``length``
  (default ``num_iterations``) and runs any ``num_iterations <= length`` (a traced count):
  a run's last, shorter train phase reuses the program of its full ones.
  Chunks chain exactly: ``run_chunk(run_chunk(sim, a)[0], b)`` equals ``run_chunk(sim, a + b)``.
  ``on_iteration(done)``, when given, hears from the program how many iterations of the
  chunk are done, about ``TICKS`` times a chunk (a progress bar between reports).
  ``donate``: each call takes over the sim passed in (its arrays are deleted; use the one
  returned): the new sim is written where the old one was, so a replay memory is not copied
  on every call (a 1M-transition MuJoCo memory is ~170 MB, ~0.1-0.2 s to copy).
  ``kind``: how the program compiles (``batchrl.programs.jit``'s kinds).
  """
  if num_seeds is not None:
    _check_seeds(num_seeds)
  if host_update.on_host(agent) and agent.period is not None:
    return _iterate_on_top(env, host_update.schedule(agent), num_seeds, on_iteration)
  iteration = make_iteration(env, agent, steps_per_iteration)
  if num_seeds is not None:
    # the loop outside the vmap (not a vmap of the loop): one program either way, and host
    # envs need it (JAX refuses their ordered effects in a vmap-ed loop); infos [N, S]
    iteration = jax.vmap(iteration)
  run = loop_iterations(iteration, on_iteration)
  compiled = programs.jit(run, kind, static_argnums=2, donate_argnums=0 if donate else ())
  seed_axis = int(num_seeds is not None)

  def run_chunk(sim: SimState, num_iterations: int, length: int | None = None):
    length = num_iterations if length is None else length
    if not 1 <= num_iterations <= length:
      raise ValueError(f"num_iterations must be in [1, length={length}], got "
                       f"{num_iterations!r}.")
    sim, infos = compiled(sim, jnp.int32(num_iterations), length)
    # the rows past the count were never written: cut on the host, where a slice costs
    # nothing (on the device, every new count compiled a slice program, ~50 ms each: ~1.5 s
    # of a fused DQN CartPole run, whose calls vary in length)
    rows = jax.tree.map(lambda x: x[:num_iterations], jax.device_get(infos))
    return sim, jax.tree.map(lambda x: np.swapaxes(x, 0, 1), rows) if seed_axis else rows

  return run_chunk


def _iterate_on_top(env, agent: Model, num_seeds: int | None,
                    on_iteration: Callable[[int], None] | None = None):
  """``run_chunk`` for a model whose update runs from the host (``host_update.on_host``;
  ``agent`` scheduled so): each iteration is one compiled rollout of ``agent.period`` steps,
  then ``agent.update`` as a top-level program, the same computation as
  ``_store_then_update`` in the same order.

  Why: measured on ``ppo_atari`` (2 cores), the host update of 1024 frames takes 2.7 s on
  its own and 4.4 s nested in the chunk's loop, where XLA ran its programs on one core."""
  rollout, update = functools.partial(_store_rollout, env, agent), agent.update
  seeds = num_seeds is not None
  if seeds:
    rollout, update = jax.vmap(rollout), jax.vmap(update)
  rollout, update = programs.jit(rollout, "loop"), programs.jit(update, "loop")

  def run_chunk(sim: SimState, num_iterations: int, length: int | None = None):
    del length  # one program per iteration: any count runs without compiling
    infos = []
    for _ in range(num_iterations):
      sim, stats = rollout(sim)
      # waited for: the update's host callback dispatches programs of its own, and a
      # dispatch from here meanwhile (the next rollout, the stacking below) could deadlock
      agent_state, metrics = jax.block_until_ready(update(sim.agent_state))
      sim = sim._replace(agent_state=agent_state)
      infos.append({**stats, **metrics})
      if on_iteration is not None:
        on_iteration(len(infos))
    # stacked on the host: on the device, every new count compiled a stacking program
    return sim, jax.tree.map(lambda *xs: np.stack(xs, axis=int(seeds)),
                             *jax.device_get(infos))

  return run_chunk


def train(env, agent: Model, key: jax.Array, num_iterations: int,
          num_seeds: int | None = None, steps_per_iteration: int | None = None):
  """The whole training run as ONE compiled program: init, then a loop of iterations.

  Returns the final ``SimState`` and the stacked infos ``[num_iterations]`` (or
  ``[num_seeds, num_iterations]`` with ``num_seeds``, each seed an independent run).
  """
  if not isinstance(num_iterations, int) or num_iterations < 1:
    raise ValueError(f"num_iterations must be a positive int, got {num_iterations!r}.")
  loop = loop_iterations(make_iteration(env, agent, steps_per_iteration))

  def run(run_key):
    return loop(init_simulation(env, agent, run_key), num_iterations, num_iterations)

  if num_seeds is None:
    return programs.jit(run, "loop")(key)
  _check_seeds(num_seeds)
  return programs.jit(jax.vmap(run), "loop")(jax.random.split(key, num_seeds))


TICKS = 50  # progress calls per chunk at most (make_run_chunk's on_iteration)


def loop_iterations(iteration, on_iteration: Callable[[int], None] | None = None):
  """``run(sim, count, length)``: ``count`` (traced) iterations, infos stacked in ``[length]``
  rows (those past ``count`` are zeros): one program for train phases of any length up to
  ``length`` (``make_run_chunk``; ``batchrl tune``'s side-by-side trials). With
  ``on_iteration``, every ``length // TICKS``-th iteration calls it with the iterations done
  (a host callback: it may run on another thread)."""
  iteration = jax.jit(iteration)  # traced once: for the info shapes and for the loop body

  def run(sim: SimState, count: jax.Array, length: int):
    shapes = jax.eval_shape(iteration, sim)[1]
    rows = jax.tree.map(lambda s: jnp.zeros((length, *s.shape), s.dtype), shapes)
    every = max(1, length // TICKS)

    def body(i, carry):
      sim, rows = carry
      sim, info = iteration(sim)
      if on_iteration is not None:
        jax.lax.cond((i + 1) % every == 0,
                     lambda: jax.debug.callback(on_iteration, i + 1), lambda: None)
      return sim, jax.tree.map(lambda r, x: r.at[i].set(x), rows, info)

    return jax.lax.fori_loop(0, count, body, (sim, rows))

  return run


def _check_seeds(num_seeds) -> None:
  if not isinstance(num_seeds, int) or num_seeds < 1:
    raise ValueError(f"num_seeds must be None or a positive int, got {num_seeds!r}.")
