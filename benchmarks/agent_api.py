"""Object-API benchmark (not a test): the cost of ``agent.act`` + ``agent.observe`` in the
loops users write, against SB3's ``predict`` and against ``batchrl train``'s host loop.

    python benchmarks/agent_api.py                  # everything (minutes)
    python benchmarks/agent_api.py --skip-learning  # no learning run to the CartPole targets
    python benchmarks/agent_api.py --quick          # fewer steps everywhere
    python benchmarks/agent_api.py --only user      # the user's loops only (quick start, SAC)

The user's loops, timed as written:

- quick start: PPO with its defaults on ``batchrl.envs.make("CartPole-v1")``, ``states,
  terminal, reward = environment.execute(actions)`` passed straight to ``observe``; the
  same loop on a Gymnasium env (its numpy rewards as they come); and the quick start's loop
  with the reward and terminal turned into ``np.float64`` / ``np.bool_``. Rows give
  act + observe per step, timed from the first update's end on: without the steps that ran
  an update (what SB3's ``predict`` does: it does not learn) and with them (updates spread
  over all steps). SB3 2.9's PPO ``predict`` on the same env (2x64 MLP, torch with one
  thread, as ``benchmarks/peers`` runs it) runs in the peers' venv (``python
  benchmarks/peers/setup.py``) in a subprocess during the same run; the ratio is ours / SB3,
  of CPU time (the process's, on every thread) and of wall time. On a shared machine the two
  sides run at different moments of a changing load: CPU time moves less with it.
- SAC on Pendulum-v1 through ``Agent``: ``Agent.create`` time, the first steps (the state
  and the act programs compile there), then per step with one gradient step each, against
  ``batchrl train --config sac_pendulum``'s host loop (``LocalTrainer``: 4 envs, 4 gradient
  steps per store of 4, so one per env step) with the agent's own networks, timed over the
  same number of env steps. Both learn from step 256 on (the benchmark's choice, so updates
  start soon). A last row compares what a user would pair by name:
  ``Agent.create(preset='sac_pendulum')`` (one stream: 4 gradient steps every 4 steps)
  against ``sac_pendulum`` as named (2x64 MLPs both). Compiled programs come from JAX's persistent
  cache where an earlier run left them (``Agent`` and ``batchrl train`` both use it): run with
  ``BATCHRL_COMPILATION_CACHE=0`` for a cold start.

Per-step rows with floats (kept from before) time warm calls only: compilation and the steps
that run an update are kept out (``batch_size`` is larger than all timed steps). Each is the
median of several blocks of steps, as wall time and as CPU time of the calling thread (with
JAX's async dispatch off, as ``Agent`` sets it, the compiled calls run on that thread).
"fast path" rows are what the agent takes by itself; the "fused path" row forces the path of
models whose ``act`` reads what ``store`` writes. The "floor" rows are the JAX dispatch cost
of a donated identity ``jit`` over the same state pytree and of a one-array ``jit``.
Compare ratios within one run; on a shared machine absolute numbers drift between runs
(the load average is printed with the table).

Imports only the standard library and numpy before ``--sb3-predict`` is handled: that mode
runs in the peers' interpreter, which has no batchrl.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SB3_MODE = "--sb3-predict"


def sb3_predict_main(steps: int) -> None:
  """SB3's PPO ``predict`` in a CartPole loop (runs in the peers' venv): one JSON line with
  the microseconds per ``predict`` call, wall and CPU (of this process: torch runs on one
  thread)."""
  import gymnasium as gym
  import torch
  from stable_baselines3 import PPO
  torch.set_num_threads(1)  # as benchmarks/peers runs SB3: its default spins on a busy machine
  env = gym.make("CartPole-v1")
  model = PPO("MlpPolicy", env, policy_kwargs=dict(net_arch=[64, 64]), device="cpu", seed=0)
  obs, _ = env.reset(seed=0)
  spent = spent_cpu = 0.0
  for i in range(steps + 200):  # the first 200 calls warm up
    start, cpu = time.perf_counter(), time.process_time()
    action, _ = model.predict(obs)
    if i >= 200:
      spent += time.perf_counter() - start
      spent_cpu += time.process_time() - cpu
    obs, _, terminated, truncated, _ = env.step(int(action))
    if terminated or truncated:
      obs, _ = env.reset()
  import stable_baselines3
  print(json.dumps({"predict_us": spent / steps * 1e6, "cpu_us": spent_cpu / steps * 1e6,
                    "steps": steps,
                    "sb3": stable_baselines3.__version__, "torch": torch.__version__}))


if __name__ == "__main__" and SB3_MODE in sys.argv:  # the peers' interpreter: no batchrl
  sb3_predict_main(int(sys.argv[sys.argv.index(SB3_MODE) + 1]))
  sys.exit(0)

import jax  # noqa: E402  (after the peers' mode above)

sys.path.insert(0, os.path.dirname(HERE))
import batchrl.envs  # noqa: E402  (after the path tweak above)
from batchrl import Agent  # noqa: E402  (after the path tweak above)

STATES = dict(type="float", shape=(4,))
ACTIONS = dict(type="int", num_values=2)
MLP_64 = [dict(type="dense", size=64), dict(type="dense", size=64)]
UNTIMED_BATCH = 65536  # timesteps per update: larger than any timed run, so no update runs
QUICK_START = dict(batch_size=4096, gae_lambda=0.97, learning_rate=1e-3,
                   entropy_penalty=0.01, epochs=5, optimizer_batch_size=512,
                   loss_clipping=0.2,
                   network=[dict(type="dense", size=32), dict(type="dense", size=32)])
TARGETS = (195.0, 475.0)  # mean return of the last 100 episodes


# ------------------------------------------------------------------------- per step


BLOCKS = 5  # timed blocks per row; rows report the median block


def step_cost(streams: int, steps: int, warmup: int, seed: int = 0,
              fused: bool = False) -> dict:
  """Microseconds per act + observe pair for ``streams`` streams acting in one call.

  Returns ``act_us``, ``observe_us``, ``pair_us`` (per call, wall), ``cpu_us`` (per pair,
  CPU time of this thread) and ``per_stream_us`` (``pair_us / streams``), each the median
  of ``BLOCKS`` blocks; ``leaves``: arrays in the agent's state pytree; ``path``.
  """
  agent = Agent.create("ppo", states=STATES, actions=ACTIONS, network=MLP_64,
                       batch_size=UNTIMED_BATCH, parallel_interactions=streams, seed=seed)
  if fused:
    agent._fast_refusal = "benchmark: the fused path on purpose"
  if warmup + steps > UNTIMED_BATCH // streams:
    raise SystemExit(f"{warmup + steps} steps of {streams} streams would run an update; "
                     f"time fewer steps (at most {UNTIMED_BATCH // streams - warmup}).")
  rng = np.random.default_rng(seed)
  batched = streams > 1
  states = rng.normal(size=(64, streams, 4)).astype(np.float32)
  if not batched:
    states = states[:, 0]
  parallel = list(range(streams)) if batched else None
  rewards = np.ones(streams, np.float32) if batched else 1.0
  terminals = np.zeros(streams, np.int64) if batched else False
  timer = time.perf_counter
  for i in range(warmup):
    agent.act(states[i % 64], parallel=parallel)
    agent.observe(reward=rewards, terminal=terminals, parallel=parallel)
  block = max(steps // BLOCKS, 1)
  rows = []
  for b in range(BLOCKS):
    act_s = observe_s = 0.0
    cpu = time.thread_time()
    for i in range(b * block, (b + 1) * block):
      t0 = timer()
      agent.act(states[i % 64], parallel=parallel)
      t1 = timer()
      agent.observe(reward=rewards, terminal=terminals, parallel=parallel)
      t2 = timer()
      act_s += t1 - t0
      observe_s += t2 - t1
    rows.append((act_s + observe_s, act_s, observe_s, time.thread_time() - cpu))
  if agent.updates:
    raise RuntimeError("an update ran during the timed steps; raise UNTIMED_BATCH")
  pair_s, act_s, observe_s, cpu_s = sorted(rows)[len(rows) // 2]  # the median block
  act_us, observe_us = act_s / block * 1e6, observe_s / block * 1e6
  return {"act_us": act_us, "observe_us": observe_us, "pair_us": act_us + observe_us,
          "cpu_us": cpu_s / block * 1e6, "per_stream_us": (act_us + observe_us) / streams,
          "leaves": len(jax.tree.leaves(agent._state)),
          "path": "fast path" if getattr(agent, "_fast", None) is not None else "fused path"}


def dispatch_floor(leaves: int, calls: int) -> dict:
  """Microseconds per call of a donated identity jit over ``leaves`` small arrays, and of a
  jit over one array, each followed by reading one result on the host."""
  import jax
  import jax.numpy as jnp

  def median_of(fn, repeats: int = BLOCKS) -> tuple[float, float]:
    """(wall, CPU) microseconds per call, medians of ``repeats`` blocks."""
    walls, cpus = [], []
    for _ in range(repeats):
      start, cpu = time.perf_counter(), time.thread_time()
      for _ in range(calls):
        fn()
      walls.append((time.perf_counter() - start) / calls * 1e6)
      cpus.append((time.thread_time() - cpu) / calls * 1e6)
    return sorted(walls)[repeats // 2], sorted(cpus)[repeats // 2]

  identity = jax.jit(lambda tree, x: (tree, x + 1), donate_argnums=0)
  box = [[jnp.zeros((8,), jnp.float32) + i for i in range(leaves)]]
  x = np.zeros(4, np.float32)

  def tree_call():
    box[0], y = identity(box[0], x)
    np.asarray(y)

  one = jax.jit(lambda x: x + 1)

  def one_call():
    np.asarray(one(x))

  for fn in (tree_call, one_call):
    fn()
  (tree_us, tree_cpu), (one_us, one_cpu) = median_of(tree_call), median_of(one_call)
  return {"tree_us": tree_us, "tree_cpu_us": tree_cpu, "one_us": one_us,
          "one_cpu_us": one_cpu}


def sb3_predict(steps: int) -> dict | None:
  """``sb3_predict_main`` in the peers' venv (None, with the reason printed, when it is not
  there or fails)."""
  python = os.path.join(HERE, ".peers-venv", "bin", "python")
  if not os.path.exists(python):
    print("SB3: no peers venv (python benchmarks/peers/setup.py)", flush=True)
    return None
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
  proc = subprocess.run([python, os.path.abspath(__file__), SB3_MODE, str(steps)],
                        capture_output=True, text=True, env=env)
  lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
  if proc.returncode or not lines:
    print(f"SB3 predict failed:\n{proc.stderr[-2000:]}", flush=True)
    return None
  return json.loads(lines[-1])


# ----------------------------------------------------------------- the user's loops


def quick_start_loop(steps: int, values: str = "as returned", seed: int = 0) -> dict:
  """The TensorForce quick start as a user writes it, PPO with its defaults::

      environment = batchrl.envs.make("CartPole-v1")   # values="gymnasium": gym.make
      agent = Agent.create(agent="ppo", environment=environment)
      states = environment.reset()
      while ...:
        actions = agent.act(states)
        states, terminal, reward = environment.execute(actions)
        agent.observe(reward=reward, terminal=terminal)

  ``values``: "as returned"; "numpy" (reward ``np.float64``, terminal ``np.bool_``);
  "gymnasium" (a Gymnasium env: reward and ``terminated`` as ``env.step`` returns them,
  terminal 2 on truncation). Returns microseconds of act + observe per step without and
  with the steps whose act ran an update, and the count of updates.
  """
  gymnasium = values == "gymnasium"
  if gymnasium:
    import gymnasium as gym
    env = gym.make("CartPole-v1")
    agent = Agent.create(agent="ppo", environment=env, seed=seed)
    states, _ = env.reset(seed=seed)
  else:
    env = batchrl.envs.make("CartPole-v1")
    agent = Agent.create(agent="ppo", environment=env, seed=seed)
    states = env.reset(seed=seed)
  wall, cpu = time.perf_counter, time.process_time
  plain, updating = [], []  # (wall, CPU) seconds of act + observe per step
  done = 0
  while done < steps:
    w0, c0 = wall(), cpu()
    actions = agent.act(states)
    w1, c1 = wall(), cpu()
    if gymnasium:
      states, reward, terminated, truncated, _ = env.step(actions)
      terminal = 2 if truncated and not terminated else terminated
    else:
      states, terminal, reward = env.execute(actions)
      if values == "numpy":
        reward, terminal = np.float64(reward), np.bool_(terminal)
    w2, c2 = wall(), cpu()
    updated = agent.observe(reward=reward, terminal=terminal)
    w3, c3 = wall(), cpu()
    if agent.updates > 1:  # warm: past the first update (it compiles) and one more
      (updating if updated else plain).append((w1 - w0 + w3 - w2, c1 - c0 + c3 - c2))
      done += 1
    if terminal:
      states = env.reset()[0] if gymnasium else env.reset()
  env.close()
  every = plain + updating
  return {"plain_us": float(np.mean([w for w, _ in plain])) * 1e6,
          "plain_cpu_us": float(np.mean([c for _, c in plain])) * 1e6,
          "all_us": float(np.mean([w for w, _ in every])) * 1e6,
          "all_cpu_us": float(np.mean([c for _, c in every])) * 1e6,
          "updates": len(updating), "steps": steps}


SAC_FIRST_UPDATE = 256  # learning starts here on both sides (one batch stored)


def sac_agent_cost(steps: int, seed: int = 0, **keys) -> dict:
  """SAC through ``Agent`` on Pendulum-v1 with its defaults but ``first_update`` (and
  ``keys``, ``preset=`` among them): create time, the first two steps (compilation), then
  wall and CPU seconds per step of the user's loop (env step included) over ``steps`` steps
  that run a gradient step each (a preset's ``update_frequency`` steps run as many in one
  update)."""
  env = batchrl.envs.make("Pendulum-v1")
  start = time.perf_counter()
  agent = Agent.create(agent="sac", environment=env, seed=seed,
                       first_update=SAC_FIRST_UPDATE, **keys)
  create_s = time.perf_counter() - start
  every = agent.spec["config"].get("update_frequency", 1) if "preset" in keys else 1
  steps -= steps % every
  states = env.reset(seed=seed)

  def step():
    nonlocal states
    actions = agent.act(states)
    states, terminal, reward = env.execute(actions)
    agent.observe(reward=reward, terminal=terminal)
    if terminal:
      states = env.reset()

  first = []
  for _ in range(2):
    start = time.perf_counter()
    step()
    first.append(time.perf_counter() - start)
  while agent.updates < 20:  # past the first update's compilation
    step()
  before = agent.updates
  start, cpu = time.perf_counter(), time.process_time()
  for _ in range(steps):
    step()
  wall, cpu = time.perf_counter() - start, time.process_time() - cpu
  if agent.updates - before != steps // every:
    raise RuntimeError(f"{agent.updates - before} of {steps} timed steps updated")
  env.close()
  networks = ", ".join(line.strip().split(";")[0] for line in agent.summary().splitlines()[1:])
  return {"create_s": create_s, "first_steps_s": first, "step_ms": wall / steps * 1e3,
          "cpu_ms": cpu / steps * 1e3, "networks": networks, "agent": agent}


def sac_cli_cost(agent: Agent | None, steps: int, seed: int = 0) -> dict:
  """``batchrl train --config sac_pendulum``'s host loop (``LocalTrainer``: 4 Pendulum envs
  in this process, a store of 4 then 4 gradient steps) with ``agent``'s SAC config (its
  networks, batch, rates; None: the named config's own, 2x64 MLPs), learning from
  ``SAC_FIRST_UPDATE`` on, timed over ``steps`` env steps that each come with a gradient
  step; the evaluation program compiling ahead is waited for first."""
  from batchrl import configs
  from batchrl.agents.family import BuildContext
  from batchrl.agents.sac.keys import sac_config
  from batchrl.train.local import LocalTrainer

  named = configs.get("sac_pendulum")
  if agent is None:
    config = dataclasses.replace(named.config, first_update=SAC_FIRST_UPDATE)
  else:
    spec = agent.spec
    context = BuildContext(1, spec["network"], agent._rt.action_space,
                           spec["max_episode_timesteps"])
    config = dataclasses.replace(sac_config(dict(spec["config"]), context),
                                 update_frequency=1, repeat_update=4,
                                 first_update=SAC_FIRST_UPDATE)
  exp = dataclasses.replace(named, config=config, run=dataclasses.replace(named.run, seed=seed))
  with tempfile.TemporaryDirectory() as run_dir:
    trainer = LocalTrainer(exp, run_dir)
    try:
      warm = SAC_FIRST_UPDATE // 4 + 20  # compiles, fills, then 20 learning iterations
      trainer.train_phase(warm)
      trainer._eval_compiling.join()  # it would compile during the timing
      iterations = max(1, steps // 4)
      start, cpu = time.perf_counter(), time.process_time()
      trainer.train_phase(iterations)
      wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
      trainer.close()
  return {"step_ms": wall / (iterations * 4) * 1e3, "cpu_ms": cpu / (iterations * 4) * 1e3}


def user_rows(steps: int, sac_steps: int) -> list[tuple[str, str]]:
  rows = []
  print("timing the quick-start loop (PPO, CartPole) ...", flush=True)
  loops = {values: quick_start_loop(steps, values)
           for values in ("as returned", "numpy", "gymnasium")}
  print("timing SB3 predict in the peers' venv ...", flush=True)
  sb3 = sb3_predict(steps)
  for values, r in loops.items():
    name = {"as returned": "batchrl.envs.make, values as returned",
            "numpy": "reward np.float64, terminal np.bool_",
            "gymnasium": "gymnasium env, values as returned"}[values]
    ratio = ""
    if sb3 is not None:
      ratio = (f"; CPU {r['plain_cpu_us'] / sb3['cpu_us']:.3f}x SB3 predict "
               f"({r['all_cpu_us'] / sb3['cpu_us']:.3f}x with updates), wall "
               f"{r['plain_us'] / sb3['predict_us']:.3f}x")
    rows.append((f"quick start PPO: act + observe ({name})",
                 f"CPU {r['plain_cpu_us']:.1f} us per step without an update, "
                 f"{r['all_cpu_us']:.1f} us with the {r['updates']} updates of "
                 f"{r['steps']} steps; wall {r['plain_us']:.1f} / {r['all_us']:.1f} us"
                 f"{ratio}"))
  if sb3 is not None:
    rows.append((f"SB3 {sb3['sb3']} PPO predict(obs), 2x64 MLP, torch 1 thread",
                 f"CPU {sb3['cpu_us']:.1f} us, wall {sb3['predict_us']:.1f} us per call "
                 "(act only, no learning)"))
  print("timing SAC through Agent (Pendulum) ...", flush=True)
  ours = sac_agent_cost(sac_steps)
  print("timing batchrl train's host loop with the same SAC ...", flush=True)
  cli = sac_cli_cost(ours["agent"], sac_steps)
  first = ", ".join(f"{s:.2f}" for s in ours["first_steps_s"])
  rows.append(("SAC Pendulum: Agent.create (defaults)",
               f"{ours['create_s']:.2f} s; first two steps {first} s (programs compile); "
               f"{ours['networks']}"))
  rows.append((f"SAC Pendulum: per step with a gradient step, Agent loop ({sac_steps} steps)",
               f"{ours['step_ms']:.2f} ms wall, {ours['cpu_ms']:.2f} ms CPU"))
  rows.append(("SAC Pendulum: per env step, batchrl train host loop, same networks",
               f"{cli['step_ms']:.2f} ms wall, {cli['cpu_ms']:.2f} ms CPU"))
  rows.append(("SAC Pendulum: Agent / batchrl train per step",
               f"{ours['step_ms'] / cli['step_ms']:.2f}x wall, "
               f"{ours['cpu_ms'] / cli['cpu_ms']:.2f}x CPU"))
  print("timing Agent.create(preset='sac_pendulum') against sac_pendulum as named ...",
        flush=True)
  preset = sac_agent_cost(sac_steps, preset="sac_pendulum")
  named = sac_cli_cost(None, sac_steps)
  rows.append(("SAC Pendulum, preset: Agent.create(preset='sac_pendulum') / batchrl train "
               "sac_pendulum (2x64 MLPs both, one gradient step per env step)",
               f"{preset['step_ms']:.2f} / {named['step_ms']:.2f} ms wall, "
               f"{preset['cpu_ms']:.2f} / {named['cpu_ms']:.2f} ms CPU per step: "
               f"{preset['step_ms'] / named['step_ms']:.2f}x wall, "
               f"{preset['cpu_ms'] / named['cpu_ms']:.2f}x CPU; create "
               f"{preset['create_s']:.2f} s; {preset['networks']}"))
  return rows


# ---------------------------------------------------------------------- quick start


def quick_start(max_timesteps: int, seed: int = 0) -> dict:
  """PPO on CartPole-v1 with the seed's quick-start settings until the mean return of the
  last 100 episodes reaches each of ``TARGETS`` (or ``max_timesteps``)."""
  agent = Agent.create(agent="ppo", environment="CartPole-v1", seed=seed, **QUICK_START)
  reached: dict[float, tuple[int, int, float]] = {}
  start = time.perf_counter()
  returns: list[float] = []

  def record(episode_return: float, timesteps: int) -> bool:
    returns.append(float(episode_return))
    mean = float(np.mean(returns[-100:]))
    for target in TARGETS:
      if target not in reached and len(returns) >= 100 and mean >= target:
        reached[target] = (len(returns), timesteps, time.perf_counter() - start)
    return len(reached) < len(TARGETS)

  try:
    from batchrl.execution.runner import Runner
  except ImportError:
    Runner = None
  if Runner is not None:
    runner = Runner(agent, environment="CartPole-v1", seed=seed)
    try:
      runner.run(num_timesteps=max_timesteps, progress=False,
                 callback=lambda r: record(r.episode_rewards[-1], agent.timesteps))
    finally:
      runner.close()
    driver = "Runner"
  else:
    _gym_loop(agent, max_timesteps, seed, record)
    driver = "gymnasium loop"
  return {"driver": driver, "reached": reached, "episodes": len(returns),
          "timesteps": agent.timesteps, "wall_s": time.perf_counter() - start,
          "last_mean": float(np.mean(returns[-100:])) if returns else float("nan")}


def _gym_loop(agent, max_timesteps: int, seed: int, record) -> None:
  """The plain act/observe loop: terminal 1 on termination, 2 (with next_states) when the
  time limit cut the episode."""
  import gymnasium as gym
  env = gym.make("CartPole-v1")
  obs, _ = env.reset(seed=seed)
  episode_return = 0.0
  try:
    while agent.timesteps < max_timesteps:
      obs, reward, terminated, truncated, _ = env.step(agent.act(obs))
      episode_return += reward
      if terminated:
        agent.observe(reward=reward, terminal=1)
      elif truncated:
        agent.observe(reward=reward, terminal=2, next_states=obs)
      else:
        agent.observe(reward=reward, terminal=0)
      if terminated or truncated:
        if not record(episode_return, agent.timesteps):
          return
        episode_return = 0.0
        obs, _ = env.reset()
  finally:
    env.close()


# ----------------------------------------------------------------------------- main


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="fewer timed steps, shorter cap")
  parser.add_argument("--skip-learning", action="store_true", help="per-step costs only")
  parser.add_argument("--only", choices=("user", "floats"), default=None,
                      help="user: the user's loops (quick start vs SB3, SAC vs batchrl "
                           "train); floats: the per-step rows with Python floats")
  parser.add_argument("--streams", default="8,64", help="comma list of batched stream counts")
  parser.add_argument("--max-timesteps", type=int, default=None,
                      help="quick-start cap (default 300k, 100k with --quick)")
  args = parser.parse_args()
  steps, warmup = (1000, 100) if args.quick else (5000, 200)
  rows: list[tuple[str, str]] = []
  if args.only != "floats":
    rows.extend(user_rows(steps, 100 if args.quick else 300))
  if args.only != "user":
    rows.extend(float_rows(args, steps, warmup))
  if not args.skip_learning and args.only is None:
    rows.extend(learning_rows(args))
  load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
  dispatch = "on" if jax.config.values.get("jax_cpu_enable_async_dispatch") else "off"
  print(f"\nload average {load:.2f} on {os.cpu_count()} CPUs; JAX CPU async dispatch "
        f"{dispatch}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
  print("| benchmark | result |\n|---|---|")
  for name, value in rows:
    print(f"| {name} | {value} |")


def float_rows(args, steps: int, warmup: int) -> list[tuple[str, str]]:
  rows = []
  print("timing act + observe, 1 stream ...", flush=True)
  one = step_cost(1, steps, warmup)
  rows.append((f"PPO 2x64, 1 stream: act + observe ({one['path']})",
               f"{one['pair_us']:.1f} us (act {one['act_us']:.1f}, observe "
               f"{one['observe_us']:.1f}); CPU {one['cpu_us']:.1f} us; state pytree "
               f"{one['leaves']} leaves"))
  print("timing act + observe, 1 stream, fused path ...", flush=True)
  fused = step_cost(1, steps, warmup, fused=True)
  rows.append((f"PPO 2x64, 1 stream: act + observe ({fused['path']})",
               f"{fused['pair_us']:.1f} us (act {fused['act_us']:.1f}, observe "
               f"{fused['observe_us']:.1f}); CPU {fused['cpu_us']:.1f} us"))
  for n in (int(s) for s in args.streams.split(",") if s):
    print(f"timing act + observe, {n} streams ...", flush=True)
    r = step_cost(n, min(steps // 5, UNTIMED_BATCH // n - warmup), warmup)
    rows.append((f"PPO 2x64, {n} streams, one batched call ({r['path']})",
                 f"{r['pair_us']:.1f} us per call, {r['per_stream_us']:.2f} us per "
                 f"stream-step ({one['pair_us'] / r['per_stream_us']:.1f}x 1 stream); "
                 f"CPU {r['cpu_us']:.1f} us per call"))
  floor = dispatch_floor(one["leaves"], 2000 if args.quick else 5000)
  rows.append((f"floor: donated identity jit, {one['leaves']} leaves",
               f"{floor['tree_us']:.1f} us, CPU {floor['tree_cpu_us']:.1f} us"))
  rows.append(("floor: jit of one array + read back",
               f"{floor['one_us']:.1f} us, CPU {floor['one_cpu_us']:.1f} us"))
  rows.append(("1 stream act + observe / floor (one array)",
               f"{one['pair_us'] / floor['one_us']:.1f}x wall, "
               f"{one['cpu_us'] / floor['one_cpu_us']:.1f}x CPU"))
  return rows


def learning_rows(args) -> list[tuple[str, str]]:
  rows = []
  cap = args.max_timesteps or (100_000 if args.quick else 300_000)
  print(f"quick start: PPO on CartPole-v1, up to {cap} timesteps ...", flush=True)
  q = quick_start(cap)
  for target in TARGETS:
    hit = q["reached"].get(target)
    value = (f"episode {hit[0]}, {hit[1]} timesteps, {hit[2]:.1f} s wall (incl. compile)"
             if hit else f"not reached in {q['timesteps']} timesteps "
                         f"(last-100 mean {q['last_mean']:.1f})")
    rows.append((f"quick start ({q['driver']}): mean100 >= {target:g}", value))
  rows.append(("quick start: total", f"{q['episodes']} episodes, {q['timesteps']} "
                                     f"timesteps, {q['wall_s']:.1f} s, "
                                     f"{q['timesteps'] / q['wall_s']:,.0f} steps/s"))
  return rows


if __name__ == "__main__":
  main()
