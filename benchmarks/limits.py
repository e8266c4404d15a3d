"""Host environments at the speed limit: how close training gets to stepping the simulator.

Run by hand (not a test). For each environment (HalfCheetah-v5 / ``ppo_mujoco``, Pendulum-v1
/ ``pendulum``, Breakout / ``ppo_atari``, CartPole-v1 / ``a2c_cartpole``), in ONE process and
one run:

- the floor: the raw Gymnasium env stepped in this process with random actions (no
  wrappers of ours), and EnvPool's steps/s where it is installed and has the task;
- the named config's own env (its wrapper stack) stepped in a loop, and ``BatchEnv`` with 0, 1 and
  2 workers at the named config's env count (``n/a`` where there are fewer envs than workers);
- the policy's ``act`` and the ``update`` alone, in microseconds per env step (compiled, on
  the agent's initial state; each act's observation depends on the previous action, so XLA
  cannot hoist the network out of the loop: before, on one constant observation, the act
  row timed only the sampling, 2.2 us per step for Breakout's Nature CNN, now ~3 ms per
  agent step of 8 envs);
- a short training run (the ``LocalTrainer``'s compiled chunk: ``fused.make_run_chunk`` over
  the named config's host env) in env steps/s, and its time split into *env* (inside
  ``BatchEnv.step``), *act*, *update* (the alone-figures times the steps / updates run) and
  *else*, everything the run spends besides: the ``host_call`` crossing between the
  compiled program and Python, the conversions around ``BatchEnv.step`` and the agent's
  ``store``, each also measured alone and printed under the table.

Every row is measured once per repeat; the table shows the median rate and the median of
the per-repeat ratios to the raw env of the same repeat (so machine load that changes
between repeats cancels in the ratios). Use ``nice -n 10`` on a shared machine::

    python benchmarks/limits.py --quick                 # about a minute, Atari model rows off
    python benchmarks/limits.py                         # 3 repeats, 2 training iterations each
    python benchmarks/limits.py --envs HalfCheetah-v5 --repeats 5 --iterations 5
    python benchmarks/limits.py --envs CartPole-v1 --iterations 200 --xla-threads 1

``--xla-threads N`` starts JAX with N threads in XLA's CPU pool (``run.xla_threads``, see
``batchrl.train.cpu_threads``; one process, so one setting for every row).

CartPole-v1 / ``a2c_cartpole`` (8 envs in this process; 2-core CPU, load 3-5; per agent
step of 8 envs), before and after the work of 2026-11-26 (issue 17's A2C target):
``ConvertTo32Bit`` took ~10 us per env step for CartPole's ~5 (an ``np.errstate`` context
and a general NaN/inf walk per observation and reward; now one cast and one dot product),
and XLA's 2-thread pool moved the compiled step and its host callback between threads and
cores at every step (``run.xla_threads=1``). The named config's wrapped env 0.41 -> 0.64-0.69 of the
raw env's steps/s; ``BatchEnv`` 0 workers 0.36 -> 0.46-0.57; a training step (act, store,
update/5, the callback, 8 env steps) about 265-340 us of CPU -> 190-205 us, of which
``_host_step`` (``BatchEnv.step`` and its conversions) is ~110 and the compiled program
with its crossing the rest (27 us of it in-graph compute with one thread, 45 with two).

HalfCheetah-v5 / ``ppo_mujoco`` (1 env, ``--xla-threads 1``, load 2-3), before and after
the second session of 2026-11-26 (``BatchEnv(infos=False)`` in training, ``RangeNormalize``
computing its maps once): training run 6,021 -> 8,210 steps/s, 0.25 -> 0.33 of the raw
env's 24-25k; its env part 110.5 -> 73.6 us per step (merging HalfCheetah's four info
floats into vector infos every step, and float64 range maps for a [-1, 1] action range),
the named config's wrapped env 0.76 -> 0.81 of the raw env. Per training step now: raw
simulation about 40 us, our wrapper stack ~10, ``BatchEnv`` ~9, the update 14.3 (its
share of a 2048-step update), the crossing 11.6, conversions 4.4, act 2.5, store 1.3, and
about 14 not accounted for. The update and the env alone are already more than 1.5x the
raw env (issue 18's whole-process target): PPO's update cannot overlap the env steps of the
next rollout without acting on stale parameters.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import statistics
import sys
import time
from typing import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax
import jax.numpy as jnp
from jax.experimental import io_callback

from batchrl import simulation
from batchrl.configs import get
from batchrl.envs import host_call
from batchrl.envs.batch import BatchEnv
from batchrl.envs.core import make_gym
from batchrl.envs.ingraph import InGraphBatchEnv
from batchrl.envs.jax_env import EnvStep
from batchrl.train import fused
from batchrl.train.build import build_env, build_model, close_env, make_host_env
from batchrl.train.cpu_threads import start_cpu_backend

NAMED_CONFIGS = {"HalfCheetah-v5": "ppo_mujoco", "Pendulum-v1": "pendulum",
           "BreakoutNoFrameskip-v4": "ppo_atari", "CartPole-v1": "a2c_cartpole"}
ENVPOOL_IDS = {"BreakoutNoFrameskip-v4": "Breakout-v5"}  # EnvPool's Atari ids (its own
# preprocessing: frame skip 4, 84x84, 4 frames; so one of its steps is 4 emulator frames)
ACTION_BLOCK = 512


def measure(step: Callable[[int], None], per_call: int, seconds: float) -> float:
  """Steps/s of ``step(k)`` (``per_call`` env steps a call) over ``seconds`` after a warm-up."""
  for k in range(3):
    step(k)
  calls, start, k = 0, time.perf_counter(), 3
  while True:
    step(k)
    k, calls = k + 1, calls + 1
    now = time.perf_counter()
    if now - start >= seconds:
      return calls * per_call / (now - start)


# ------------------------------------------------------------------------- env rows


class SingleEnv:
  """One Gymnasium env stepped in a loop with a block of random actions."""

  def __init__(self, env):
    self.env = env
    env.action_space.seed(0)
    self.actions = [env.action_space.sample() for _ in range(ACTION_BLOCK)]
    env.reset(seed=0)

  def __call__(self, k: int) -> None:
    _, _, terminated, truncated, _ = self.env.step(self.actions[k % ACTION_BLOCK])
    if terminated or truncated:
      self.env.reset()

  def close(self) -> None:
    self.env.close()


class VectorEnv:
  """A vector env (BatchEnv, EnvPool) stepped with a block of random batched actions."""

  def __init__(self, env, num_envs: int):
    self.env, self.num_envs = env, num_envs
    env.action_space.seed(0)
    if isinstance(env, BatchEnv):  # a batched action space
      self.actions = [env.action_space.sample() for _ in range(ACTION_BLOCK)]
      env.reset(seed=0)
    else:  # EnvPool: its action space is one env's
      self.actions = [np.stack([env.action_space.sample() for _ in range(num_envs)])
                      for _ in range(ACTION_BLOCK)]
      env.reset()

  def __call__(self, k: int) -> None:
    self.env.step(self.actions[k % ACTION_BLOCK])

  def close(self) -> None:
    self.env.close()


def envpool_env(env_id: str, num_envs: int):
  """EnvPool's env for ``env_id`` at ``num_envs``, or the reason there is none."""
  try:
    import envpool  # optional: pip install envpool
  except ImportError:
    return "not installed (pip install envpool)"
  pool_id = ENVPOOL_IDS.get(env_id, env_id)
  if pool_id not in envpool.list_all_envs():
    return f"no task {pool_id} in envpool {envpool.__version__}"
  return envpool.make_gymnasium(pool_id, num_envs=num_envs, seed=0)


def env_rows(env_id: str, exp) -> dict[str, tuple[Callable[[], object], int]]:
  """Row name -> (constructor of a stepper, env steps per call); a string: unavailable."""
  run = exp.run
  n = run.num_envs
  host = functools.partial(make_host_env, run.env, run.max_length, run.normalize_ranges,
                           atari=run.atari)
  rows = {
      "raw env, one process": (lambda: SingleEnv(make_gym(env_id)), 1),
      "named config's wrapped env, one process": (lambda: SingleEnv(host()), 1),
  }
  for count in (1, n):
    pool = envpool_env(env_id, count)
    name = f"EnvPool, {count} env{'s' * (count > 1)}"
    rows[name] = pool if isinstance(pool, str) else (
        lambda pool=pool, count=count: VectorEnv(pool, count), count)
    if count == n:
      break
  for workers in (0, 1, 2):
    name = f"BatchEnv {n} env{'s' * (n > 1)}, {workers} workers"
    if workers > n:
      rows[name] = f"n/a ({n} env)"
      continue
    rows[name] = (lambda w=workers: VectorEnv(
        BatchEnv([host] * n, num_workers=w, seed=0), n), n)
  return rows


# ------------------------------------------------------------------ model and training


@dataclasses.dataclass
class Timer:
  """Accumulated seconds inside a wrapped function (the host side of a training run)."""

  seconds: float = 0.0

  def wrap(self, fn):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
      start = time.perf_counter()
      try:
        return fn(*args, **kwargs)
      finally:
        self.seconds += time.perf_counter() - start

    return timed


def find_ingraph(env) -> InGraphBatchEnv:
  """The ``InGraphBatchEnv`` under a named config's env (behind preprocessing, if any)."""
  while not isinstance(env, InGraphBatchEnv):
    env = env.env
  return env


def per_step_us(fn, state, steps: int, tries: int = 3) -> float:
  """Microseconds per step of the compiled ``fn(state)`` that does ``steps`` steps (the
  fastest of ``tries`` calls: other load only ever adds time)."""
  jax.block_until_ready(fn(state))
  best = float("inf")
  for _ in range(tries):
    start = time.perf_counter()
    jax.block_until_ready(fn(state))
    best = min(best, time.perf_counter() - start)
  return best / steps * 1e6


class ConstantEnv:
  """An in-graph env of the named config's shapes that returns zeros: from the graph
  (``via=None``), or from Python through ``"host_call"`` or ``"io_callback"`` (the crossing
  alone)."""

  def __init__(self, like, via: str | None):
    self.like, self.via = like, via
    self.num_envs = like.num_envs
    self.single_observation_space = like.single_observation_space
    self.single_action_space = like.single_action_space

  def step(self, key, state, action):
    del key
    obs = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), self.like._obs_struct)
    structs = (obs, self.like._float, self.like._bool, self.like._bool, obs)
    zeros = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), structs)
    if self.via == "io_callback":
      out = io_callback(lambda a: zeros, structs, action, ordered=True)
    elif self.via == "host_call":
      out = host_call.host_call(lambda a: zeros, structs, action)
    else:
      out = jax.tree.map(jnp.asarray, zeros)
    return EnvStep(out[0], state + 1, *out[1:], {})


def model_parts(env, agent, sim, period: int) -> dict[str, float]:
  """Microseconds per agent step of act, act+store, and act+store+callback crossing, each in
  a compiled scan of at least 200 steps; and of the update (one per ``period`` agent steps)
  per env step, from a scan of updates covering at least 1000 env steps. Long scans: the
  dispatch of a call must not count for a cheap env such as CartPole's."""
  ingraph = find_ingraph(env)
  out = {}
  steps = max(period, 200)

  def acts(sim):
    def body(carry, _):
      key, obs = carry
      key, act_key = jax.random.split(key)
      action = agent.act(sim.agent_state, obs, act_key, False)[0]
      # The next observation depends on this action, so the network stays in the loop: on
      # the same observation every step XLA hoisted the policy's forward pass out of the
      # scan and timed only the sampling (Breakout's Nature CNN printed 2.2 us per env step).
      nudge = sum(jnp.sum(jnp.asarray(a, jnp.float32)) for a in jax.tree.leaves(action))
      obs = jax.tree.map(lambda o: jnp.where(nudge < -1e30, jnp.zeros_like(o), o), obs)
      return (key, obs), action
    return jax.lax.scan(body, (sim.key, sim.obs), None, length=steps)[1]

  out["act"] = per_step_us(jax.jit(acts), sim, steps)
  if env is ingraph:  # the constant envs have the host env's raw shapes
    for name, via in (("act+store", None), ("act+store+crossing", "host_call"),
                      ("act+store+io_callback", "io_callback")):
      const = ConstantEnv(ingraph, via)
      run = jax.jit(lambda s, c=const: simulation.simulate(c, agent, s, steps, mode="store")[0])
      out[name] = per_step_us(run, sim, steps)
  repeats = max(1, 1000 // (period * env.num_envs))
  update = jax.jit(lambda s: jax.lax.scan(lambda state, _: (agent.update(state)[0], None),
                                          s.agent_state, None, length=repeats)[0])
  out["update"] = per_step_us(update, sim, repeats) / (period * env.num_envs)
  return out


class Training:
  """The named config's compiled training chunk over its host env, ``iterations`` per call
  (``lean=False``: its host env reached through ``io_callback``, as before ``host_call``)."""

  def __init__(self, exp, iterations: int, lean: bool = True):
    host_call.LEAN = lean  # read when the chunk is traced, below
    try:
      self._build(exp, iterations)
    finally:
      host_call.LEAN = True

  def _build(self, exp, iterations: int):
    self.env = build_env(exp.run)
    self.agent = build_model(exp)
    ingraph = find_ingraph(self.env)
    self.env_time, self.callback_time = Timer(), Timer()
    ingraph.batch_env.step = self.env_time.wrap(ingraph.batch_env.step)
    ingraph._host_step = self.callback_time.wrap(ingraph._host_step)
    self.sim = fused.init_sim(self.env, self.agent, jax.random.key(exp.run.seed))
    self.run_chunk = fused.make_run_chunk(self.env, self.agent)
    self.steps = exp.run.num_envs * self.agent.period
    self.iterations = iterations
    start = time.perf_counter()
    self.iterate()  # compiles
    self.compile_seconds = time.perf_counter() - start

  def iterate(self) -> None:
    """``iterations`` iterations in ONE compiled call, as the trainer's chunks run (one
    call per iteration would time the dispatch of a call, not the run, for a cheap env)."""
    self.sim, infos = self.run_chunk(self.sim, self.iterations)
    jax.block_until_ready(infos)

  def timed(self) -> dict[str, float]:
    env0, cb0 = self.env_time.seconds, self.callback_time.seconds
    iterations = self.iterations
    start = time.perf_counter()
    self.iterate()
    total = time.perf_counter() - start
    return {"total": total, "env": self.env_time.seconds - env0,
            "callback": self.callback_time.seconds - cb0, "steps": iterations * self.steps,
            "updates": iterations}

  def close(self) -> None:
    close_env(self.env)


# ---------------------------------------------------------------------------- report


def median(values):
  values = [v for v in values if v is not None]
  return statistics.median(values) if values else None


def bench_env(env_id: str, args) -> None:
  exp = get(NAMED_CONFIGS[env_id])
  if env_id != exp.run.env:
    exp = dataclasses.replace(exp, run=dataclasses.replace(exp.run, env=env_id))
  print(f"\n== {env_id}  (named config {exp.name}: {exp.run.num_envs} env(s), "
        f"{exp.config.rollout_length} steps per env per update)", flush=True)
  rows = env_rows(env_id, exp)
  live = {name: build() for name, (build, _) in
          ((k, v) for k, v in rows.items() if not isinstance(v, str))}
  model = not (args.quick and exp.run.atari)
  training = Training(exp, args.iterations) if model else None
  before = Training(exp, args.iterations, lean=False) if model and args.before else None
  parts = (model_parts(training.env, training.agent, training.sim, exp.config.rollout_length)
           if model else {})
  rates: dict[str, list] = {name: [] for name in rows}
  ratios: dict[str, list] = {name: [] for name in rows}
  splits = []
  try:
    for _ in range(args.repeats):
      measured = {name: measure(step, rows[name][1], args.seconds)
                  for name, step in live.items()}
      floor = measured["raw env, one process"]
      if training is not None:
        split = training.timed()
        measured["training run"] = split["steps"] / split["total"]
        splits.append(split)
      if before is not None:
        split = before.timed()
        measured["training run, io_callback (before)"] = split["steps"] / split["total"]
      for name, rate in measured.items():
        rates.setdefault(name, []).append(rate)
        ratios.setdefault(name, []).append(rate / floor)
  finally:
    for stepper in live.values():
      stepper.close()
    for run in (training, before):
      if run is not None:
        run.close()
  print(f"{'':40s}{'steps/s':>12s}{'x raw env':>11s}")
  for name in rates:
    if isinstance(rows.get(name), str):
      print(f"  {name:38s}{rows[name]:>23s}")
      continue
    print(f"  {name:38s}{median(rates[name]):12,.0f}{median(ratios[name]):11.2f}")
  if training is None:
    print("  training run, act, update: skipped (--quick; an Atari update takes minutes on a CPU)")
    return
  print_split(splits, parts, training)


def print_split(splits: list[dict], parts: dict, training: Training) -> None:
  """The training time split, per env step, medians over repeats (shares within a repeat)."""
  n = training.env.num_envs
  shares = {key: [] for key in ("env", "act", "update", "else")}
  micro = {key: [] for key in shares}
  for s in splits:
    per = {"env": s["env"], "act": parts["act"] * 1e-6 * s["steps"] / n,
           "update": parts["update"] * 1e-6 * s["steps"]}
    per["else"] = s["total"] - sum(per.values())
    for key, value in per.items():
      shares[key].append(value / s["total"])
      micro[key].append(value / s["steps"] * 1e6)
  print(f"  training split per env step (compile {training.compile_seconds:.1f} s, not counted):")
  for key in shares:
    print(f"    {key:8s}{median(micro[key]):9.1f} us  {100 * median(shares[key]):5.1f} %")
  conversions = median([(s["callback"] - s["env"]) / s["steps"] * 1e6 for s in splits])
  print(f"  'else', each part alone (us per agent step of {n} env(s)):")
  print(f"    conversions around BatchEnv.step (InGraphBatchEnv._host_step)  {conversions:8.1f}")
  if "act+store" in parts:
    store = parts["act+store"] - parts["act"]
    crossing = parts["act+store+crossing"] - parts["act+store"]
    print(f"    agent store (in the compiled step)                            {store:8.1f}")
    before = parts["act+store+io_callback"] - parts["act+store"]
    print(f"    host_call crossing (a callback returning constants)           {crossing:8.1f}")
    print(f"      the same through io_callback (before host_call)             {before:8.1f}")
  print(f"    act {parts['act']:.1f} us per agent step; update {parts['update']:.2f} us per env "
        "step (both alone, compiled)")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--envs", nargs="+", default=list(NAMED_CONFIGS), choices=list(NAMED_CONFIGS))
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--seconds", type=float, default=2.0, help="per env row and repeat")
  parser.add_argument("--iterations", type=int, default=2,
                      help="training iterations (updates) timed per repeat")
  parser.add_argument("--quick", action="store_true",
                      help="2 repeats of 0.5 s, 1 iteration; Atari model rows skipped")
  parser.add_argument("--no-before", dest="before", action="store_false",
                      help="skip the training row through io_callback (the state before "
                      "host_call)")
  parser.add_argument("--xla-threads", type=int, default=None,
                      help="threads of XLA's CPU pool (run.xla_threads); default JAX's")
  args = parser.parse_args()
  if args.xla_threads is not None and not start_cpu_backend(args.xla_threads):
    print(f"--xla-threads {args.xla_threads}: not applied (JAX already started, not below "
          "the CPU count, or no CPU affinity here)")
  if args.quick:
    args.repeats, args.seconds, args.iterations = 2, 0.5, 1
  print(f"jax {jax.__version__} on {jax.default_backend()}, {os.cpu_count()} CPUs; "
        f"{args.repeats} repeats")
  for env_id in args.envs:
    bench_env(env_id, args)


if __name__ == "__main__":
  main()
