"""One rejax training run (PPO, DQN or SAC on a gymnax env) with its published settings.

Runs in the peers' venv; prints one JSON line (see ``benchmarks/peers/run.py``):

    benchmarks/.peers-venv/bin/python benchmarks/peers/rejax_train.py --algo ppo
    benchmarks/.peers-venv/bin/python benchmarks/peers/rejax_train.py --algo dqn --steps 5000
    benchmarks/.peers-venv/bin/python benchmarks/peers/rejax_train.py --algo sac --env Pendulum-v1

Hyperparameters are rejax's own, from its repository's ``configs/gymnax/*.yaml`` (copied
below as data). The one change: its configs evaluate every 100-2.5k steps with 128
stochastic episodes; here evaluation runs every ``--eval-every`` steps (default steps/10,
rounded to whole training iterations) with ``--episodes`` greedy (deterministic) episodes
through rejax's own ``evaluate``, inside the same compiled program, as rejax does.
``compile_s`` is lowering + XLA compilation of ``algo.train``; ``train_s`` is running it
(evaluations included: they are part of rejax's compiled training program).

rejax 0.1.3 needs gymnax 0.0.9 (it unpacks the old 5-tuple step); setup.py pins that.
"""
from __future__ import annotations

import time

import _common

# configs/gymnax/cartpole.yaml and pendulum.yaml of keraJLi/rejax (the published configs).
CONFIGS = {
    ("ppo", "CartPole-v1"): dict(
        agent_kwargs=dict(activation="tanh"), num_envs=5, num_steps=100, num_epochs=5,
        num_minibatches=5, learning_rate=0.00075, max_grad_norm=0.5,
        total_timesteps=100_000, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01,
        vf_coef=0.5),
    ("ppo", "Pendulum-v1"): dict(
        agent_kwargs=dict(activation="swish"), num_envs=100, num_steps=100, num_epochs=10,
        num_minibatches=10, learning_rate=0.001, max_grad_norm=10, total_timesteps=150_000,
        gamma=0.995, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.0, vf_coef=0.5,
        normalize_observations=True),
    ("dqn", "CartPole-v1"): dict(
        agent="DuelingQNetwork", agent_kwargs=dict(activation="swish"), num_envs=10,
        buffer_size=50_000, fill_buffer=5_000, batch_size=100, max_grad_norm=10,
        learning_rate=0.001, num_epochs=5, total_timesteps=100_000, polyak=0.98,
        eps_start=1, eps_end=0.05, exploration_fraction=0.5, gamma=0.99, ddqn=True,
        normalize_observations=False),
    # pendulum.yaml's sac entry (its eval_freq of 100 aside: see the module docstring);
    # hidden layers are rejax's default, 64x64.
    ("sac", "Pendulum-v1"): dict(
        agent_kwargs=dict(activation="swish"), num_envs=1, buffer_size=10_000,
        fill_buffer=256, batch_size=256, learning_rate=0.01, num_epochs=1,
        total_timesteps=10_000, gamma=0.99, polyak=0.98, target_entropy_ratio=None,
        normalize_observations=True),
}
TARGETS = {"CartPole-v1": 475.0, "Pendulum-v1": -200.0}


def greedy_act(algo, ts):
  """act(obs, rng) -> the most likely action (argmax Q, or the policy's mode; for SAC's
  squashed Gaussian, the tanh of the Gaussian's mean, scaled to the action range)."""
  import jax.numpy as jnp
  from rejax.networks import SquashedGaussianPolicy

  def squashed_mode(m, o):
    return m.action_loc + jnp.tanh(m._action_dist(o).mode()) * m.action_scale

  def act(obs, rng):
    del rng
    if getattr(algo, "normalize_observations", False):
      obs = algo.normalize_obs(ts.obs_rms_state, obs)
    obs = jnp.expand_dims(obs, 0)
    if hasattr(algo, "actor"):
      squashed = isinstance(algo.actor, SquashedGaussianPolicy)
      action = algo.actor.apply(ts.actor_ts.params, obs, method=squashed_mode if squashed
                                else lambda m, o: m._action_dist(o).mode())
      if not algo.discrete:
        space = algo.action_space
        action = jnp.clip(action, space.low, space.high)
    else:
      action = jnp.argmax(algo.agent.apply(ts.q_ts.params, obs), axis=-1)
    return jnp.squeeze(action, 0)

  return act


def make_eval_callback(episodes: int):
  from rejax.evaluate import evaluate

  def callback(algo, ts, rng):
    max_steps = algo.env_params.max_steps_in_episode
    lengths, returns = evaluate(greedy_act(algo, ts), rng, algo.env, algo.env_params,
                                episodes, max_steps)
    return ts.global_step, returns.mean(), returns.std()

  return callback


def main() -> None:
  p = _common.parser(__doc__.splitlines()[0], steps=0, episodes=128, target=float("nan"))
  p.add_argument("--algo", choices=sorted({algo for algo, _ in CONFIGS}), default="ppo")
  p.add_argument("--env", choices=("CartPole-v1", "Pendulum-v1"), default="CartPole-v1")
  args = p.parse_args()
  key = (args.algo, args.env)
  if key not in CONFIGS:
    raise SystemExit(f"no published rejax config for {args.algo} on {args.env}; "
                     f"have: {sorted(CONFIGS)}")
  config = dict(CONFIGS[key])
  args.steps = args.steps or config["total_timesteps"]
  if args.target != args.target:  # NaN: the env's default target
    args.target = TARGETS[args.env]
  # rejax trains whole iterations between evaluations and ceil(steps / eval_freq)
  # evaluations: a multiple of the iteration keeps the budget where it was asked.
  per_iteration = config["num_envs"] * config.get("num_steps", 1)
  every = max(1, round(_common.eval_every(args) / per_iteration)) * per_iteration

  from importlib.metadata import version

  import jax
  import rejax

  setup_start = time.perf_counter()
  algo_cls = rejax.get_algo(args.algo)
  config.update(env=args.env, total_timesteps=args.steps, eval_freq=every,
                skip_initial_evaluation=True)
  algo = algo_cls.create(**config)
  algo = algo.replace(eval_callback=make_eval_callback(args.episodes))
  key = jax.random.PRNGKey(args.seed)
  setup_s = time.perf_counter() - setup_start

  start = time.perf_counter()
  compiled = jax.jit(algo.train).lower(key).compile()
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  ts, (steps, means, stds) = compiled(key)
  jax.block_until_ready(means)
  train_s = time.perf_counter() - start

  steps, means, stds = (jax.device_get(x).tolist() for x in (steps, means, stds))
  result = {"peer": f"rejax_{args.algo}", "library": f"rejax {version('rejax')}",
            "jax": jax.__version__, "device": jax.devices()[0].platform,
            "algo": args.algo, "env": args.env, "seed": args.seed,
            "steps": int(jax.device_get(ts.global_step)), "setup_s": round(setup_s, 3),
            "compile_s": round(compile_s, 3), "train_s": round(train_s, 3),
            "train_includes_eval": True, "eval_every": every, "eval_episodes": args.episodes,
            "settings": {k: v for k, v in config.items() if k != "env"}}
  result.update(_common.summarize(list(zip(steps, means, stds)), args.target))
  _common.emit(result)


if __name__ == "__main__":
  main()
