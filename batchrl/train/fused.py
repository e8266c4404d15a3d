"""The fused driver: whole training runs as compiled programs over in-graph environments.

Model-generic: anything with the ``Model`` interface (``batchrl.agents.core``) and a JAX-native batched env
(``batchrl.envs.jax_env``). One *iteration* is ``agent.period`` fused steps of env + act +
store, then one ``agent.update`` (agents without a fixed period run ``observe`` steps,
updating whenever they are ready). A training run is a ``lax.scan`` of iterations, optionally
``vmap``-ed over seeds::

    sim, infos = train(env, agent, key, num_iterations=100)             # infos: [100]
    sim, infos = train(env, agent, key, num_iterations=100, num_seeds=4)  # infos: [4, 100]

For progress reports and checkpoints, run the same scan in chunks; the results are the
same as one long scan::

    sim = init_sim(env, agent, key)
    run_chunk = make_run_chunk(env, agent)
    sim, infos = run_chunk(sim, 10)   # 10 iterations, infos stacked [10]

Compilation is most of a short run's time on a CPU, so the programs here are compiled by
``jit(fun, kind)`` with ``compiler_options(kind)``: XLA's legacy loop emitters on the CPU
(measured on fused CartPole PPO: the training chunk compiles in about half the time of the
newer fusion emitters and runs as fast), and for programs that run once or briefly
(``"once"``: ``init_sim``, evaluation, summaries) no LLVM optimization as well (init 2.3 ->
0.4 s, evaluation 1.8 -> 0.3 s). ``BATCHRL_FAST_COMPILE=0`` keeps XLA's defaults.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Callable

import jax
import jax.numpy as jnp

from batchrl.agents.core import Model, Transition
from batchrl.simulation import Rollout, SimState, episode_stats, restart, simulate
from batchrl.simulation import init as init_simulation


# XLA options per kind of program (CPU only): "loop" programs run many times (training
# chunks), "once" programs run once or for a moment (init, evaluation, summaries).
_CPU_OPTIONS = {
    "loop": {"xla_cpu_use_fusion_emitters": False},
    "once": {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0},
}
FAST_COMPILE_ENV = "BATCHRL_FAST_COMPILE"  # "0": compile with XLA's defaults


def compiler_options(kind: str) -> dict:
  """The XLA options ``jax.jit(..., compiler_options=...)`` gets for a ``kind`` of program.

  ``kind`` is ``"loop"`` (run many times: keep full optimization) or ``"once"`` (run once
  or briefly: optimize nothing). Empty off the CPU, with ``BATCHRL_FAST_COMPILE=0``, or
  when this jaxlib does not know an option (checked once by compiling a tiny program).
  """
  if kind not in _CPU_OPTIONS:
    raise ValueError(f"Unknown program kind {kind!r}; valid: {', '.join(_CPU_OPTIONS)}.")
  return _CPU_OPTIONS[kind] if _options_apply() else {}


@functools.cache
def _options_apply() -> bool:
  if os.environ.get(FAST_COMPILE_ENV, "1") == "0" or jax.default_backend() != "cpu":
    return False
  every = {k: v for options in _CPU_OPTIONS.values() for k, v in options.items()}
  try:
    jax.jit(lambda: jnp.zeros(()), compiler_options=every).lower().compile()
  except Exception:  # noqa: BLE001  (an unknown option: XLA's defaults still work)
    return False
  return True


def jit(fun: Callable, kind: str, **jit_kwargs) -> Callable:
  """``jax.jit(fun, **jit_kwargs)`` compiled with ``compiler_options(kind)``.

  JAX takes compiler options only on the outermost ``jit``: called inside another
  transformation (any argument a tracer), ``fun`` is jitted plainly and the outer program's
  options apply. ``lower``/``trace``/``eval_shape`` are those of the top-level function.
  """
  options = compiler_options(kind)
  top = jax.jit(fun, compiler_options=options or None, **jit_kwargs)
  if not options:
    return top
  nested = jax.jit(fun, **jit_kwargs)

  @functools.wraps(fun)
  def call(*args, **kwargs):
    traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs)))
    return (nested if traced else top)(*args, **kwargs)

  call.lower, call.trace, call.eval_shape = top.lower, top.trace, top.eval_shape
  return call


def compile_ahead(lower: Callable) -> threading.Thread:
  """Compiles what ``lower()`` lowers (``lambda: program.lower(*args)``, ``program`` a
  ``jit``) in a daemon thread, and returns the thread: ``join()`` it before the program's
  first call with such arguments, which then finds the program in JAX's cache.

  Why: XLA compiles a program on one core, and a run's training chunk (compiling, or
  running on one core) leaves the others idle, so a program needed later (evaluation, the
  Ray learner's update) compiles there for free. A failure loses only the head start: the
  first call compiles as it would have.
  """
  def work():
    try:
      lower().compile()
    except Exception as e:  # noqa: BLE001 - the first call compiles instead
      logging.getLogger("batchrl").debug("not compiled ahead: %s", e)

  thread = threading.Thread(target=work, daemon=True, name="batchrl-compile-ahead")
  thread.start()
  return thread


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
  sim, rollout = simulate(env, agent, sim, agent.period, mode="store")
  agent_state, metrics = agent.update(sim.agent_state)
  return sim._replace(agent_state=agent_state), {**episode_stats(rollout), **metrics}


def _observe(env, agent: Model, num_steps: int, sim: SimState):
  sim, rollout = simulate(env, agent, sim, num_steps, mode="observe")
  metrics = dict(rollout.metrics)
  updated = metrics.pop("updated", jnp.zeros((num_steps,), jnp.float32))
  count = jnp.sum(updated)
  # mean of each metric over the steps that updated (0 when none did)
  means = {name: jnp.sum(value * updated.reshape((-1,) + (1,) * (value.ndim - 1)), axis=0)
           / jnp.maximum(count, 1.0) for name, value in metrics.items()}
  return sim, {**episode_stats(rollout), **means, "updates": count}


def make_evaluate(env, agent: Model, num_steps: int) -> Callable[[SimState], dict]:
  """A pure ``evaluate(sim) -> stats`` of the deterministic policy (the mode).

  Restarts every env, lets the agent know that the running episodes ended (so recurrent
  carries start fresh), runs ``num_steps`` steps in ``"track"`` mode and averages over the
  *first* episode each env finished (later, shorter ones would bias the mean). Returns
  ``episodes`` (how many finished), ``mean_score`` and ``mean_length`` (NaN when none).
  The training state is not changed: use the returned stats only.
  """
  if not isinstance(num_steps, int) or num_steps < 1:
    raise ValueError(f"num_steps must be a positive int, got {num_steps!r}.")

  def evaluate(sim: SimState) -> dict:
    sim = restart(env, sim)
    sim = sim._replace(agent_state=_end_episodes(agent, sim))
    _, rollout = simulate(env, agent, sim, num_steps, mode="track",
                                  deterministic=True)
    return first_episode_stats(rollout)

  return evaluate


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
  mean = lambda x: jnp.where(count > 0, jnp.sum(jnp.where(first, x, 0)) / denom,  # noqa: E731
                             jnp.float32(jnp.nan))
  return {"episodes": count, "mean_score": mean(rollout.episode_return),
          "mean_length": mean(rollout.episode_length)}


def init_sim(env, agent: Model, key: jax.Array, num_seeds: int | None = None) -> SimState:
  """Compiled ``simulation.init``; with ``num_seeds`` a stack of independent runs ``[S, ...]``."""
  if num_seeds is None:
    return jit(functools.partial(init_simulation, env, agent), "once")(key)
  _check_seeds(num_seeds)
  keys = jax.random.split(key, num_seeds)
  return jit(jax.vmap(functools.partial(init_simulation, env, agent)), "once")(keys)


def make_run_chunk(env, agent: Model, *, num_seeds: int | None = None,
                   steps_per_iteration: int | None = None):
  """A compiled ``run_chunk(sim, num_iterations) -> (sim, infos)``.

  Scans ``num_iterations`` (a Python int; each new value compiles once) iterations and
  stacks their infos ``[num_iterations]``; with ``num_seeds`` the sim carries a leading
  seed axis (from ``init_sim(..., num_seeds)``) and infos are ``[num_seeds, num_iterations]``.
  Chunks chain exactly: ``run_chunk(run_chunk(sim, a)[0], b)`` equals ``run_chunk(sim, a + b)``.
  """
  run = _scan_iterations(make_iteration(env, agent, steps_per_iteration))
  if num_seeds is not None:
    _check_seeds(num_seeds)
    run = _over_seeds(run)
  return jit(run, "loop", static_argnums=1)


def train(env, agent: Model, key: jax.Array, num_iterations: int,
          num_seeds: int | None = None, steps_per_iteration: int | None = None):
  """The whole training run as ONE compiled program: init, then a scan of iterations.

  Returns the final ``SimState`` and the stacked infos ``[num_iterations]`` (or
  ``[num_seeds, num_iterations]`` with ``num_seeds``, each seed an independent run).
  """
  if not isinstance(num_iterations, int) or num_iterations < 1:
    raise ValueError(f"num_iterations must be a positive int, got {num_iterations!r}.")
  scan = _scan_iterations(make_iteration(env, agent, steps_per_iteration))

  def run(run_key):
    return scan(init_simulation(env, agent, run_key), num_iterations)

  if num_seeds is None:
    return jit(run, "loop")(key)
  _check_seeds(num_seeds)
  return jit(jax.vmap(run), "loop")(jax.random.split(key, num_seeds))


def _scan_iterations(iteration):
  def run(sim: SimState, num_iterations: int):
    return jax.lax.scan(lambda s, _: iteration(s), sim, None, length=num_iterations)

  return run


def _over_seeds(run):
  def batched(sim: SimState, num_iterations: int):
    return jax.vmap(lambda s: run(s, num_iterations))(sim)

  return batched


def _check_seeds(num_seeds) -> None:
  if not isinstance(num_seeds, int) or num_seeds < 1:
    raise ValueError(f"num_seeds must be None or a positive int, got {num_seeds!r}.")
