"""One SAC, TD3, TQC or CrossQ run of sbx (Stable-Baselines-Jax) or SB3 / sb3-contrib on a MuJoCo
task, resumable.

Runs in the peers' venv; prints one JSON line (see ``benchmarks/peers/run.py``):

    benchmarks/.peers-venv/bin/python benchmarks/peers/sbx_train.py --algo sac \\
        --env Hopper-v5 --steps 100000 --eval-every 10000 --save-dir /tmp/sbx-hopper

The values are the ones batchrl's ``sac_mujoco`` / ``td3_mujoco`` / ``tqc_mujoco`` /
``crossq_mujoco`` train with (its recipes ``mujoco_sac``, ``mujoco_td3``, ``mujoco_tqc`` and
``mujoco_crossq``, the values the published
implementations share), so a side-by-side run differs in the implementation only: 2x256
ReLU MLPs, Adam 3e-4, batch 256, gamma 0.99, tau 0.005, a 1M memory, one gradient step per
env step from ``learning_starts`` on (SAC and TQC 5000, TD3 25000); SAC's and TQC's
temperature learned from 1.0 toward -|A|; TQC's 2 critics of 25 quantiles, the 2 largest
of each dropped from the target; TD3's Gaussian exploration noise 0.1, target noise 0.2
clipped at 0.5, an actor step every 2 gradient steps. CrossQ's are its own (the paper's and
sbx's defaults): Adam 1e-3 with beta1 0.5, a 2x256 actor and 1024x1024 critics with Batch
Renormalization, no target networks, an actor step every 3 gradient steps, learning from
5000 on. ``--library sb3`` runs SB3's SAC and TD3 and sb3-contrib's TQC and CrossQ. Before
learning starts the untrained policy acts, as batchrl's ``sac_mujoco``, ``tqc_mujoco`` and
``crossq_mujoco``; ``--uniform-start`` keeps SB3's own uniform random
actions there instead, as ``td3_mujoco``'s ``start_steps`` (``benchmarks/parity.py``
passes it for TD3).

With ``--save-dir`` the run trains in chunks of ``--eval-every`` steps and saves the model,
the replay buffer and the evaluations after each, so a killed run continues from its last
chunk when started again with the same arguments (not bit-exact: the random streams start
afresh). Evaluation: SB3's ``evaluate_policy``, deterministic, ``--episodes`` episodes on a
separate env, after every chunk.
"""
from __future__ import annotations

import json
import os
import time

import _common

ENVS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "InvertedPendulum-v5")
COMMON = dict(learning_rate=3e-4, batch_size=256, gamma=0.99, tau=0.005,
              buffer_size=1_000_000, train_freq=1, gradient_steps=1)
VALUES = {
    "sac": dict(COMMON, learning_starts=5_000, ent_coef="auto_1.0"),
    "td3": dict(COMMON, learning_starts=25_000, policy_delay=2, target_policy_noise=0.2,
                target_noise_clip=0.5),
    "tqc": dict(COMMON, learning_starts=5_000, ent_coef="auto_1.0",
                top_quantiles_to_drop_per_net=2),
    # no tau: no target networks
    "crossq": dict(learning_rate=1e-3, batch_size=256, gamma=0.99, buffer_size=1_000_000,
                   train_freq=1, gradient_steps=1, learning_starts=5_000,
                   ent_coef="auto_1.0", policy_delay=3),
}
NET_ARCH = [256, 256]
NET_ARCHS = {"crossq": dict(pi=[256, 256], qf=[1024, 1024])}  # the others: NET_ARCH
# the policy's own settings beside net_arch (sbx's TQCPolicy and sb3-contrib's: their defaults)
POLICY = {"tqc": dict(n_quantiles=25, n_critics=2)}
NOISE_STD = {"td3": 0.1}  # Gaussian exploration noise, in units of the action half range
# batchrl's log-std head maps the actor's output through a tanh into this range
# (batchrl.agents.actor_critic.networks.LOG_STD_MIN, LOG_STD_MAX); sbx clips it to [-20, 2]
BATCHRL_LOG_STD = (-5.0, 2.0)
HEAD_ALGOS = ("sac", "tqc")  # the algorithms whose actor --batchrl-head changes


def model_class(library: str, algo: str, paper_td3: bool = False):
  if library == "sbx":
    import sbx
    if paper_td3:
      if algo != "td3":
        raise SystemExit("--paper-td3 changes sbx's TD3 only: give --algo td3")
      return paper_td3_class()
    return getattr(sbx, {"crossq": "CrossQ"}.get(algo, algo.upper()))
  if paper_td3:
    raise SystemExit("--paper-td3 changes sbx's TD3 (SB3's TD3 is the paper's already)")
  if algo in ("tqc", "crossq"):
    import sb3_contrib
    return getattr(sb3_contrib, {"tqc": "TQC", "crossq": "CrossQ"}[algo])
  import stable_baselines3
  return getattr(stable_baselines3, algo.upper())


def distribution(library: str, algo: str) -> str:
  """The package whose version names the peer: sbx-rl, stable-baselines3 or sb3-contrib."""
  if library == "sbx":
    return "sbx-rl"
  return "sb3-contrib" if algo in ("tqc", "crossq") else "stable-baselines3"


def settings(algo: str) -> dict:
  """The values a run of ``algo`` trains with (the result's ``settings``)."""
  return dict(VALUES[algo], net_arch=NET_ARCHS.get(algo, NET_ARCH), **POLICY.get(algo, {}),
              action_noise=NOISE_STD.get(algo))


def paper_td3_class():
  """sbx's TD3 made the paper's (Fujimoto et al. 2018, Algorithm 1; also SB3's, CleanRL's and
  batchrl's) in the two places where sbx 0.28 departs from it, so that a side-by-side run
  can tell these choices from the rest of the implementation: the actor climbs the first
  critic (sbx: the smaller of the two), and the targets move with the actor, on every
  ``policy_delay``-th gradient step (sbx: on every step, before the actor's).

  Only sbx's own step functions are wrapped: its training loop calls ``cls.soft_update``
  after each critic step and ``cls.update_actor`` on the actor's steps."""
  import jax
  import sbx

  tau = COMMON["tau"]

  class PaperTD3(sbx.TD3):
    @staticmethod
    @jax.jit
    def soft_update(tau_, qf_state, actor_state):
      return qf_state, actor_state  # moved with the actor, below

    @staticmethod
    @jax.jit
    def update_actor(actor_state, qf_state, observations, key):
      both = qf_state.apply_fn
      first = qf_state.replace(apply_fn=lambda *a, **k: both(*a, **k)[:1])  # [1, N, 1]
      actor_state, _, loss, key = sbx.TD3.update_actor(actor_state, first, observations, key)
      qf_state, actor_state = sbx.TD3.soft_update(tau, qf_state, actor_state)
      return actor_state, qf_state, loss, key

  return PaperTD3


def batchrl_head(x, action_dim: int):
  """The tanh-squashed Gaussian an sbx actor's features ``x`` give through batchrl's log-std
  head: a tanh into ``BATCHRL_LOG_STD`` in place of sbx's clip to [-20, 2] (the same layers
  and names as sbx's, inside a flax ``nn.compact`` call)."""
  import flax.linen as nn
  import jax.numpy as jnp
  from sbx.common.distributions import TanhTransformedDistribution
  from tensorflow_probability.substrates.jax import distributions as tfd

  low, high = BATCHRL_LOG_STD
  mean = nn.Dense(action_dim)(x)
  squashed = jnp.tanh(nn.Dense(action_dim)(x))
  log_std = low + 0.5 * (high - low) * (squashed + 1.0)
  return TanhTransformedDistribution(
      tfd.MultivariateNormalDiag(loc=mean, scale_diag=jnp.exp(log_std)))


def batchrl_head_actor():
  """sbx's ``SquashedGaussianActor`` with batchrl's log-std head (``batchrl_head``); the same
  layers, names and distribution (``actor_class`` is sbx's own hook for it). An untrained
  actor's log std is then about -1.5 (a standard deviation of 0.22) where sbx's is about 0
  (1.0)."""
  import flax.linen as nn
  from sbx.common.policies import SquashedGaussianActor

  class BatchrlHeadActor(SquashedGaussianActor):
    @nn.compact
    def __call__(self, x):
      x = x.reshape((x.shape[0], -1))
      for width in self.net_arch:
        x = self.activation_fn(nn.Dense(width)(x))
      return batchrl_head(x, self.action_dim)

  return BatchrlHeadActor


def policy_kwargs(algo: str, batchrl_head: bool = False) -> dict:
  """The policy's settings: its widths, its own values (``POLICY``) and, with
  ``batchrl_head``, batchrl's log-std head (``batchrl_head_actor``)."""
  kwargs = dict(net_arch=NET_ARCHS.get(algo, NET_ARCH), **POLICY.get(algo, {}))
  if batchrl_head:
    kwargs["actor_class"] = batchrl_head_actor()
  return kwargs


def build(library: str, algo: str, env, seed: int, uniform_start: bool,
          paper_td3: bool = False, batchrl_head: bool = False):
  import numpy as np
  kwargs = dict(VALUES[algo], policy_kwargs=policy_kwargs(algo, batchrl_head))
  if algo in NOISE_STD:
    from stable_baselines3.common.noise import NormalActionNoise
    n = env.action_space.shape[0]
    kwargs["action_noise"] = NormalActionNoise(np.zeros(n), NOISE_STD[algo] * np.ones(n))
  extra = {} if library == "sbx" else {"device": "cpu"}
  model = model_class(library, algo, paper_td3)("MlpPolicy", env, seed=seed, verbose=0,
                                                **kwargs, **extra)
  if not uniform_start:
    # SB3/sbx sample uniformly before learning_starts; batchrl acts with its untrained
    # policy there. Same as batchrl: the policy acts (with its noise) from the first step.
    model._sample_action_uniform = False  # read by the patched _sample_action below
  return model


def patch_start_sampling() -> None:
  """SB3's ``_sample_action`` draws uniform actions while ``num_timesteps <
  learning_starts``; with ``_sample_action_uniform = False`` on a model it asks the policy
  (plus action noise) from the first step, as batchrl does."""
  from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
  original = OffPolicyAlgorithm._sample_action

  def sample(self, learning_starts, action_noise=None, n_envs=1):
    if getattr(self, "_sample_action_uniform", True):
      return original(self, learning_starts, action_noise, n_envs)
    return original(self, 0, action_noise, n_envs)

  OffPolicyAlgorithm._sample_action = sample


def temperature(model) -> float | None:
  """The entropy temperature the model learned (sbx's ``ent_coef_state``: the exponential of
  its one parameter), None for a model that learns none (TD3) or SB3's (torch)."""
  state = getattr(model, "ent_coef_state", None)
  if state is None:
    return None
  return float(state.apply_fn({"params": state.params}))


def paths(save_dir: str) -> dict:
  return {name: os.path.join(save_dir, file) for name, file in
          (("model", "model.zip"), ("buffer", "buffer.pkl"), ("state", "state.json"))}


def save(model, save_dir: str, state: dict) -> None:
  p = paths(save_dir)
  model.save(p["model"])
  model.save_replay_buffer(p["buffer"])
  tmp = p["state"] + ".tmp"
  with open(tmp, "w") as f:
    json.dump(state, f)
  os.replace(tmp, p["state"])  # the state names a finished chunk only once all is saved


def main() -> None:
  p = _common.parser(__doc__.splitlines()[0], steps=100_000, episodes=5, target=float("nan"),
                     envs=ENVS)
  p.add_argument("--algo", choices=sorted(VALUES), default="sac")
  p.add_argument("--library", choices=("sbx", "sb3"), default="sbx")
  p.add_argument("--save-dir", default=None, help="resumable: chunks saved here")
  p.add_argument("--uniform-start", action="store_true",
                 help="uniform random actions before learning starts (SB3's default)")
  p.add_argument("--paper-td3", action="store_true",
                 help="sbx's TD3 with the paper's actor objective (the first critic) and "
                 "target steps (with the actor's): see paper_td3_class")
  p.add_argument("--batchrl-head", action="store_true",
                 help="sbx's SAC or TQC with batchrl's log-std head: see batchrl_head_actor")
  args = p.parse_args()
  if args.batchrl_head and (args.library != "sbx" or args.algo not in HEAD_ALGOS):
    p.error(f"--batchrl-head changes sbx's {' and '.join(HEAD_ALGOS)} only: give --library "
            f"sbx and --algo {' or --algo '.join(HEAD_ALGOS)}")
  every = _common.eval_every(args)

  from importlib.metadata import version

  import gymnasium as gym
  from stable_baselines3.common.evaluation import evaluate_policy
  patch_start_sampling()

  setup_start = time.perf_counter()
  from stable_baselines3.common.monitor import Monitor
  env, test_env = gym.make(args.env), Monitor(gym.make(args.env))
  test_env.reset(seed=args.seed + 10_000)
  run = {k: getattr(args, k) for k in ("library", "algo", "env", "seed", "uniform_start")}
  if args.paper_td3:
    run["paper_td3"] = True
  if args.batchrl_head:
    run["batchrl_head"] = True
  state = {"run": run, "evals": [], "train_s": 0.0, "eval_s": 0.0}
  saved = paths(args.save_dir) if args.save_dir else None
  if saved and os.path.exists(saved["state"]):
    with open(saved["state"]) as f:
      state = json.load(f)
    if state.get("run") != run:
      raise SystemExit(f"{args.save_dir} holds another run ({state.get('run')}); this one is "
                       f"{run}: give another --save-dir")
    # the policy's settings given again: a class made at run time is not loaded by name
    model = model_class(args.library, args.algo, args.paper_td3).load(
        saved["model"], env=env,
        custom_objects={"policy_kwargs": policy_kwargs(args.algo, args.batchrl_head)})
    model.load_replay_buffer(saved["buffer"])
    model._sample_action_uniform = args.uniform_start
  else:
    model = build(args.library, args.algo, env, args.seed, args.uniform_start,
                  args.paper_td3, args.batchrl_head)
  setup_s = time.perf_counter() - setup_start
  if args.save_dir:
    os.makedirs(args.save_dir, exist_ok=True)

  while model.num_timesteps < args.steps:
    chunk = min(every, args.steps - model.num_timesteps)
    start = time.perf_counter()
    model.learn(total_timesteps=chunk, reset_num_timesteps=False)
    state["train_s"] += time.perf_counter() - start
    start = time.perf_counter()
    mean, std = evaluate_policy(model, test_env, n_eval_episodes=args.episodes,
                                deterministic=True)
    state["eval_s"] += time.perf_counter() - start
    state["evals"].append([int(model.num_timesteps), float(mean), float(std)])
    # the temperature's course, to set beside ours (the ``alpha`` of our run's metrics)
    state.setdefault("temperature", []).append([int(model.num_timesteps), temperature(model)])
    if args.save_dir:
      save(model, args.save_dir, state)
  dist = distribution(args.library, args.algo)
  result = {"peer": f"{args.library}_{args.algo}", "library": f"{args.library} {version(dist)}",
            "device": "cpu", "algo": args.algo, "env": args.env, "seed": args.seed,
            "steps": int(model.num_timesteps), "setup_s": round(setup_s, 3),
            "train_s": round(state["train_s"], 3), "eval_s": round(state["eval_s"], 3),
            "eval_every": every, "eval_episodes": args.episodes,
            "uniform_start": args.uniform_start, "paper_td3": args.paper_td3,
            "batchrl_head": args.batchrl_head,
            "settings": settings(args.algo), "temperature": state.get("temperature", [])}
  result.update(_common.summarize([tuple(e) for e in state["evals"]], args.target))
  _common.emit(result)


if __name__ == "__main__":
  main()
