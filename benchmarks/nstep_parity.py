"""batchrl's n-step batches equal those of the replay buffer sbx 0.28 learns from
(Stable-Baselines3 2.9.2's ``NStepReplayBuffer``, which sbx's SAC, TD3, TQC and CrossQ take with
``n_steps > 1``), item for item, on the same stored transitions. Issue 51.

Runs in the peers' venv with batchrl importable (the two share the JAX stack; SB3 and sbx
are never batchrl's dependencies)::

    PYTHONPATH=. benchmarks/.peers-venv/bin/python benchmarks/nstep_parity.py

Prints what it compared and the largest difference per field; exits 1 on any mismatch.

The transitions: ``--envs`` environments, ``--steps`` steps each into a memory of ``--rows``
rows per environment (so the ring wraps several times), random observations, actions and
rewards, episodes that end by termination (probability 0.07 a step) or truncation (0.07),
the next episode starting from a fresh observation. Each side stores them as its algorithm
does: SB3 through ``add`` with ``done = terminated or truncated`` and ``TimeLimit.truncated``
in the infos (``handle_timeout_termination``), batchrl through ``SACConfig``'s model
``store``. Then every stored (row, env) is drawn once on both sides, with ``n_step`` 1 to
``--max-n``:

- SB3: ``_get_samples(rows)``, its env of each sample fixed by seeding NumPy's global
  generator, which that method draws from; it reads ``rewards`` (the window's discounted
  sum), ``discounts`` (``gamma^m`` for the ``m`` steps used), ``dones`` (``done (1 -
  timeout)`` of the last step used) and ``next_observations`` (the last step's).
- batchrl: ``learning.nstep_batch`` on the same memory places (``row * envs + env``):
  ``reward``, ``discount``, ``terminated`` and ``next_obs`` of its items.

Both cut a window after the first step that ends an episode (terminated or truncated) and
after the newest stored step, so what is compared includes windows cut by both, wrapped
around the ring's end, and starting at the newest step. (batchrl also cuts where a step's
observation is not the previous step's next one; with consistent trajectories, as here, it
never does.)
"""
from __future__ import annotations

import argparse
import sys

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from stable_baselines3.common.buffers import NStepReplayBuffer

from batchrl.agents.actor_critic import learning
from batchrl.agents.core import Transition
from batchrl.agents.replay import updates as replay
from batchrl.agents.sac import SACConfig
from batchrl.agents.sac.model import make_sac
from batchrl.memories import Sample
from batchrl.specs import EnvSpec

OBS, ACT = 3, 2


def trajectories(envs: int, steps: int, seed: int) -> list[dict]:
  """``steps`` steps of ``envs`` environments: dicts of ``[envs, ...]`` arrays."""
  rng = np.random.default_rng(seed)
  obs = rng.normal(size=(envs, OBS)).astype(np.float32)
  out = []
  for _ in range(steps):
    next_obs = (obs + rng.normal(size=obs.shape)).astype(np.float32)
    end = rng.random(envs)
    terminated, truncated = end < 0.07, (end >= 0.07) & (end < 0.14)
    out.append(dict(obs=obs, next_obs=next_obs, terminated=terminated, truncated=truncated,
                    action=rng.uniform(-1, 1, (envs, ACT)).astype(np.float32),
                    reward=rng.normal(size=envs).astype(np.float32)))
    done = terminated | truncated
    fresh = rng.normal(size=obs.shape).astype(np.float32)
    obs = np.where(done[:, None], fresh, next_obs)
  return out


def sb3_buffer(steps: list[dict], envs: int, rows: int, n: int, gamma: float):
  space = gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
  buffer = NStepReplayBuffer(rows * envs, space, gym.spaces.Box(-1, 1, (ACT,), np.float32),
                             device="cpu", n_envs=envs, handle_timeout_termination=True,
                             n_steps=n, gamma=gamma)
  for s in steps:
    infos = [{"TimeLimit.truncated": bool(t)} for t in s["truncated"]]
    buffer.add(s["obs"], s["next_obs"], s["action"], s["reward"],
               s["terminated"] | s["truncated"], infos)
  return buffer


def sb3_batch(buffer, rows: np.ndarray, seed: int) -> tuple[dict, np.ndarray]:
  """``_get_samples`` at ``rows``, and the env of each sample: the method draws them from
  NumPy's global generator, seeded here, so the same draw made first gives them."""
  np.random.seed(seed)
  envs = np.random.randint(0, buffer.n_envs, size=rows.shape)
  np.random.seed(seed)
  got = buffer._get_samples(rows)
  return {"reward": got.rewards.numpy()[:, 0], "discount": got.discounts.numpy()[:, 0],
          "terminated": got.dones.numpy()[:, 0], "next_obs": got.next_observations.numpy(),
          "obs": got.observations.numpy()}, envs


def ours(steps: list[dict], envs: int, rows: int, n: int, gamma: float):
  """The state after storing ``steps`` and the jitted n-step batch at memory places."""
  config = SACConfig(actor_layers=(4,), critic_layers=(4,), memory_capacity=rows * envs,
                     batch_size=1, n_step=n, discount=gamma)
  model = make_sac(config)
  space = gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
  spec = EnvSpec(space, gym.spaces.Box(-1, 1, (ACT,), np.float32), envs)
  state = model.init(jax.random.key(0), spec)
  store = jax.jit(model.store)
  for s in steps:
    state = store(state, Transition(s["obs"], s["action"], s["reward"], s["terminated"],
                                    s["truncated"], s["next_obs"], {}))
  memory = replay.memory_of(config, state.info)

  @jax.jit
  def batch(state, index):
    first, _ = memory.windows(state.memory, index, 1)
    sample = Sample(jax.tree.map(lambda x: x[:, 0], first), index,
                             jnp.ones(index.shape, jnp.float32), None)
    return learning.nstep_batch(config, memory, state, sample)

  return state, batch


def compare(args) -> list[str]:
  steps = trajectories(args.envs, args.steps, args.seed)
  # each row drawn 4 x envs times: its envs are drawn by SB3, so every (row, env) is likely
  rows = np.repeat(np.arange(args.rows), 4 * args.envs)
  failures = []
  for n in range(1, args.max_n + 1):
    want, envs = sb3_batch(sb3_buffer(steps, args.envs, args.rows, n, args.gamma), rows,
                           args.seed)
    state, batch = ours(steps, args.envs, args.rows, n, args.gamma)
    got = batch(state, jnp.asarray(rows * args.envs + envs, jnp.int32))
    mine = {"reward": got.items.reward, "discount": jnp.broadcast_to(got.discount, rows.shape),
            "terminated": got.items.terminated, "next_obs": got.items.next_obs,
            "obs": got.items.obs}
    used = np.round(np.log(want["discount"]) / np.log(args.gamma)).astype(int)
    pairs = len(set(zip(rows.tolist(), envs.tolist())))
    lengths = np.bincount(used, minlength=n + 1)[1:].tolist()
    line = [f"n_step {n}: {rows.size} items ({pairs} places), by window length 1..{n} "
            f"{lengths}, {int(want['terminated'].sum())} ending terminated;"]
    for field, value in want.items():
      diff = float(np.max(np.abs(np.asarray(mine[field], np.float32) - value)))
      line.append(f"{field} {diff:.1e}")
      if diff > 1e-5 * max(1.0, float(np.max(np.abs(value)))):
        failures.append(f"n_step {n}: {field} differs by {diff:.3g}")
    print(" ".join(line), flush=True)
  return failures


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--envs", type=int, default=3)
  p.add_argument("--rows", type=int, default=40, help="memory rows per environment")
  p.add_argument("--steps", type=int, default=130, help="steps stored (wraps past --rows)")
  p.add_argument("--max-n", type=int, default=5)
  p.add_argument("--gamma", type=float, default=0.9)
  p.add_argument("--seed", type=int, default=0)
  failures = compare(p.parse_args())
  print("\n".join(failures) if failures else "equal: every field of every n within 1e-5")
  sys.exit(1 if failures else 0)


if __name__ == "__main__":
  main()
