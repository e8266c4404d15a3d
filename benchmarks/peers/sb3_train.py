"""One Stable-Baselines3 / sb3-contrib training run with rl-baselines3-zoo's settings.

Runs in the peers' venv; prints one JSON line (see ``benchmarks/peers/run.py``):

    benchmarks/.peers-venv/bin/python benchmarks/peers/sb3_train.py --algo ppo --env Pendulum-v1
    benchmarks/.peers-venv/bin/python benchmarks/peers/sb3_train.py --algo trpo \\
        --env HalfCheetah-v5 --steps 20000

Hyperparameters are rl-zoo's ``hyperparams/{ppo,dqn,trpo,sac,td3,ddpg,a2c}.yml`` entries
(copied below as data; the HalfCheetah-v4 entry is used for v5). SAC, TD3 and DDPG are the
off-policy rows of issue 17 (``benchmarks/actor_critic.py``); A2C runs 200k steps there
(rl-zoo's entry says 500k). Envs are built as rl-zoo builds them:
``make_vec_env`` (DummyVecEnv, Monitor) and, where the entry says ``normalize``,
``VecNormalize`` with the entry's gamma. Evaluation: SB3's ``evaluate_policy``,
deterministic, ``--episodes`` episodes on a separate env (normalization statistics synced
from training), every ``--eval-every`` steps and once after training. ``train_s`` is
``model.learn`` less the time spent evaluating; SB3 compiles nothing, so there is no
``compile_s``.
"""
from __future__ import annotations

import time

import _common

# rl-baselines3-zoo hyperparams: n_envs, n_timesteps and normalize are for the runner,
# noise_type and noise_std make the action noise; the rest go to the model. "lin_X"
# schedules are written as ("lin", X).
# td3.yml and ddpg.yml share one Pendulum entry (written for Pendulum-v0 in those files; the
# same values are published with the rl-zoo model card sb3/td3-Pendulum-v1): no learning
# for the first 10k of the 20k steps, then 200 gradient steps at each episode's end.
PENDULUM_DPG = dict(
    n_envs=1, n_timesteps=20_000, gamma=0.98, buffer_size=200_000, learning_starts=10_000,
    noise_type="normal", noise_std=0.1, gradient_steps=-1, train_freq=(1, "episode"),
    learning_rate=1e-3, policy_kwargs=dict(net_arch=[400, 300]))
ZOO = {
    ("ppo", "Pendulum-v1"): dict(
        n_envs=4, n_timesteps=100_000, n_steps=1024, gae_lambda=0.95, gamma=0.9,
        n_epochs=10, ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, use_sde=True,
        sde_sample_freq=4),
    ("ppo", "CartPole-v1"): dict(
        n_envs=8, n_timesteps=100_000, n_steps=32, batch_size=256, gae_lambda=0.8,
        gamma=0.98, n_epochs=20, ent_coef=0.0, learning_rate=("lin", 0.001),
        clip_range=("lin", 0.2)),
    ("dqn", "CartPole-v1"): dict(
        n_envs=1, n_timesteps=50_000, learning_rate=2.3e-3, batch_size=64,
        buffer_size=100_000, learning_starts=1000, gamma=0.99, target_update_interval=10,
        train_freq=256, gradient_steps=128, exploration_fraction=0.16,
        exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256])),
    ("trpo", "CartPole-v1"): dict(
        n_envs=2, n_timesteps=100_000, n_steps=512, batch_size=512, cg_damping=1e-3,
        gae_lambda=0.98, gamma=0.99, learning_rate=1e-3, n_critic_updates=20),
    # sac.yml Pendulum-v1: n_timesteps 20000, learning_rate 1e-3; the rest SB3's SAC defaults
    # (buffer 1e6, learning_starts 100, batch 256, tau 0.005, gamma 0.99, train_freq 1,
    # gradient_steps 1, ent_coef auto, net 256x256).
    ("sac", "Pendulum-v1"): dict(n_envs=1, n_timesteps=20_000, learning_rate=1e-3),
    ("td3", "Pendulum-v1"): PENDULUM_DPG,
    ("ddpg", "Pendulum-v1"): PENDULUM_DPG,
    # a2c.yml CartPole-v1: 8 envs, ent_coef 0, 5e5 steps; the rest SB3's A2C defaults
    # (n_steps 5, RMSprop lr 7e-4, gamma 0.99, vf_coef 0.5, max_grad_norm 0.5).
    ("a2c", "CartPole-v1"): dict(n_envs=8, n_timesteps=500_000, ent_coef=0.0),
    ("trpo", "HalfCheetah-v5"): dict(
        normalize=True, n_envs=2, n_timesteps=1_000_000, batch_size=128, n_steps=1024,
        gamma=0.99, gae_lambda=0.95, sub_sampling_factor=1, cg_max_steps=25,
        cg_damping=0.1, n_critic_updates=20, learning_rate=1e-3, target_kl=0.04),
}
TARGETS = {"CartPole-v1": 475.0, "Pendulum-v1": -200.0, "HalfCheetah-v5": 1500.0}
RUNNER_KEYS = ("n_envs", "n_timesteps", "normalize", "noise_type", "noise_std")


def model_class(algo: str):
  if algo == "trpo":
    from sb3_contrib import TRPO
    return TRPO
  import stable_baselines3
  return getattr(stable_baselines3, algo.upper())


def is_schedule(value) -> bool:
  return isinstance(value, tuple) and value[0] == "lin"  # rl-zoo's linear schedule


def model_kwargs(entry: dict, env) -> dict:
  kwargs = {k: v for k, v in entry.items() if k not in RUNNER_KEYS}
  for name, value in kwargs.items():
    if is_schedule(value):
      kwargs[name] = lambda progress_remaining, start=value[1]: progress_remaining * start
  if entry.get("noise_type"):
    kwargs["action_noise"] = action_noise(entry, env)
  return kwargs


def action_noise(entry: dict, env):
  """rl-zoo's ``noise_type: normal`` with ``noise_std``: the same sigma on every action
  dimension (exp_manager builds it this way)."""
  import numpy as np
  from stable_baselines3.common.noise import NormalActionNoise
  if entry["noise_type"] != "normal":
    raise SystemExit(f"noise_type {entry['noise_type']!r}: only 'normal' is copied here")
  n = env.action_space.shape[0]
  return NormalActionNoise(mean=np.zeros(n), sigma=entry["noise_std"] * np.ones(n))


def make_envs(env_id: str, entry: dict, seed: int):
  """Training and evaluation VecEnvs, as rl-zoo builds them."""
  from stable_baselines3.common.env_util import make_vec_env
  from stable_baselines3.common.vec_env import VecNormalize
  train = make_vec_env(env_id, n_envs=entry["n_envs"], seed=seed)
  test = make_vec_env(env_id, n_envs=1, seed=seed + 10_000)
  if entry.get("normalize"):
    train = VecNormalize(train, gamma=entry.get("gamma", 0.99))
    test = VecNormalize(test, training=False, norm_reward=False)
  return train, test


def make_evaluator(test_env, every: int, episodes: int):
  """A callback evaluating every ``every`` steps; keeps (step, mean, std) and its time."""
  from stable_baselines3.common.callbacks import BaseCallback
  from stable_baselines3.common.evaluation import evaluate_policy
  from stable_baselines3.common.vec_env import sync_envs_normalization

  class Evaluator(BaseCallback):
    def __init__(self):
      super().__init__()
      self.evals, self.eval_s, self.next = [], 0.0, every
      self.train_clock = []  # training seconds (evaluation excluded) at each evaluation
      self.start = time.perf_counter()

    def evaluate(self) -> None:
      start = time.perf_counter()
      sync_envs_normalization(self.model.get_env(), test_env)
      mean, std = evaluate_policy(self.model, test_env, n_eval_episodes=episodes,
                                  deterministic=True)
      self.evals.append((self.model.num_timesteps, float(mean), float(std)))
      self.train_clock.append(start - self.start - self.eval_s)
      self.eval_s += time.perf_counter() - start

    def _on_step(self) -> bool:
      if self.num_timesteps >= self.next:
        self.next += every
        self.evaluate()
      return True

  return Evaluator()


def main() -> None:
  p = _common.parser(__doc__.splitlines()[0], steps=0, episodes=10, target=float("nan"))
  p.add_argument("--algo", choices=sorted({algo for algo, _ in ZOO}), default="ppo")
  p.add_argument("--env", choices=sorted({env for _, env in ZOO}), default="Pendulum-v1")
  p.add_argument("--torch-threads", type=int, default=1,
                 help="torch intra-op threads (default 1; 0 keeps torch's default, one per "
                      "core, which spins and slows down many-fold on a busy 2-core machine)")
  args = p.parse_args()
  if (args.algo, args.env) not in ZOO:
    raise SystemExit(f"no rl-zoo settings here for {args.algo} on {args.env}; "
                     f"have: {sorted(ZOO)}")
  entry = ZOO[(args.algo, args.env)]
  args.steps = args.steps or entry["n_timesteps"]
  if args.target != args.target:  # NaN: the env's default target
    args.target = TARGETS[args.env]
  every = _common.eval_every(args)

  from importlib.metadata import version

  import torch
  if args.torch_threads:
    torch.set_num_threads(args.torch_threads)

  setup_start = time.perf_counter()
  train_env, test_env = make_envs(args.env, entry, args.seed)
  model = model_class(args.algo)("MlpPolicy", train_env, seed=args.seed, device="cpu",
                                 verbose=0, **model_kwargs(entry, train_env))
  evaluator = make_evaluator(test_env, every, args.episodes)
  setup_s = time.perf_counter() - setup_start
  start = time.perf_counter()
  evaluator.start = start
  model.learn(total_timesteps=args.steps, callback=evaluator)
  train_s = time.perf_counter() - start - evaluator.eval_s
  if not evaluator.evals or evaluator.evals[-1][0] != model.num_timesteps:
    evaluator.evaluate()  # the final evaluation, after training
  lib = "sb3-contrib" if args.algo == "trpo" else "stable-baselines3"
  result = {"peer": f"sb3_{args.algo}", "library": f"{lib} {version(lib)}",
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "device": "cpu", "algo": args.algo, "env": args.env, "seed": args.seed,
            "steps": int(model.num_timesteps), "setup_s": round(setup_s, 3),
            "compile_s": None, "train_s": round(train_s, 3),
            "eval_s": round(evaluator.eval_s, 3), "train_includes_eval": False,
            "eval_every": every, "eval_episodes": args.episodes,
            "settings": {k: (f"lin_{v[1]}" if is_schedule(v) else v)
                         for k, v in entry.items()}}
  result.update(_common.summarize(evaluator.evals, args.target))
  reached = [t for (step, mean, _), t in zip(evaluator.evals, evaluator.train_clock)
             if mean >= args.target]
  result["train_s_to_target"] = round(reached[0], 3) if reached else None
  _common.emit(result)


if __name__ == "__main__":
  main()
