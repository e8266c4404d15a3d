"""rl-zoo's Optuna search (rl_zoo3 ``train.py -optimize``) restricted to PPO's learning rate.

Runs in the peers' venv (``benchmarks/.peers-venv``, with ``rl_zoo3==2.9.2``); prints one
JSON line (see ``benchmarks/peers/run.py``), read by ``benchmarks/tune.py``:

    benchmarks/.peers-venv/bin/python benchmarks/peers/rlzoo_tune.py --trials 4 --steps 25000

How it is restricted: rl-zoo's ``-optimize`` samples its own PPO space (batch size, n_steps,
gamma, GAE lambda, learning rate, entropy, clip range, epochs, net size, ...) through
``rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER["ppo"]``, a dict its ``ExperimentManager``
reads at each trial. This script replaces that one entry with a sampler that draws only
``learning_rate`` log-uniform in [LOW, HIGH] (the name Optuna records, as batchrl's
``--search learning_rate=loguniform(1e-4,1e-2)`` does) and then runs rl-zoo's own command line
(``rl_zoo3.train.train``) unchanged: its ExperimentManager, its hyperparams/ppo.yml entry for
CartPole-v1 for everything not searched (8 envs, n_steps 32, batch 256, 20 epochs, ...;
the sampled learning rate replaces the entry's ``lin_0.001``), its trial loop, evaluation
callback (``TrialEvalCallback``: ``--episodes`` deterministic episodes at each of
``--evaluations`` evaluations; the objective is the last one) and Optuna study in an SQLite
file, read back here at the end. So rl-zoo itself is restricted, not reimplemented.

Sampler and pruner: rl-zoo's TPE (its default, 10 random start-up trials, seeded) and no
pruner, so every trial trains the whole budget, as the batchrl side of the benchmark does.
Torch runs one thread (``--torch-threads``; as ``sb3_train.py``, for the same reason).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

import _common

LOW, HIGH = 1e-4, 1e-2


def sample_learning_rate(trial, n_actions, n_envs, additional_args) -> dict:
  """rl-zoo's sampler signature; only the learning rate, log-uniform in [LOW, HIGH]."""
  del n_actions, n_envs, additional_args
  return {"learning_rate": trial.suggest_float("learning_rate", LOW, HIGH, log=True)}


def main() -> None:
  p = _common.parser(__doc__.splitlines()[0], steps=25_000, episodes=5, target=475.0)
  p.add_argument("--trials", type=int, default=4)
  p.add_argument("--evaluations", type=int, default=1,
                 help="evaluations per trial (rl-zoo's --n-evaluations); the last is the "
                 "trial's objective")
  p.add_argument("--torch-threads", type=int, default=1)
  args = p.parse_args()

  import optuna
  import rl_zoo3
  import torch
  from rl_zoo3 import hyperparams_opt, train

  torch.set_num_threads(args.torch_threads)
  hyperparams_opt.HYPERPARAMS_SAMPLER["ppo"] = sample_learning_rate
  with tempfile.TemporaryDirectory() as tmp:
    storage = f"sqlite:///{os.path.join(tmp, 'study.db')}"
    sys.argv = ["rl_zoo3.train", "--algo", "ppo", "--env", "CartPole-v1", "-optimize",
                "--n-trials", str(args.trials), "--n-timesteps", str(args.steps),
                "--sampler", "tpe", "--pruner", "none", "--n-startup-trials", "10",
                "--n-evaluations", str(args.evaluations), "--eval-episodes",
                str(args.episodes), "--n-jobs", "1", "--seed", str(args.seed),
                "--storage", storage, "--study-name", "rlzoo", "--log-folder", tmp,
                "--no-optim-plots", "--device", "cpu", "--verbose", "0"]
    start = time.perf_counter()
    train.train()
    search_s = time.perf_counter() - start
    study = optuna.load_study(study_name="rlzoo", storage=storage)
  done = [t for t in study.trials if t.state.name == "COMPLETE"]
  best = max(done, key=lambda t: t.value) if done else None
  _common.emit({
      "peer": "rlzoo_tune_ppo_cartpole", "library": f"rl_zoo3 {rl_zoo3.__version__}",
      "algo": "ppo", "env": "CartPole-v1", "seed": args.seed,
      "settings": {"space": f"learning_rate=loguniform({LOW:g},{HIGH:g})",
                   "sampler": "tpe (10 start-up trials)", "pruner": "none",
                   "evaluations": args.evaluations, "eval_episodes": args.episodes,
                   "torch_threads": torch.get_num_threads(),
                   "optuna": optuna.__version__},
      "trials": len(study.trials), "complete": len(done), "steps": args.steps,
      "search_s": round(search_s, 3),
      "best_value": best.value if best else None,
      "best_learning_rate": best.params["learning_rate"] if best else None,
      "values": [t.value for t in study.trials],
  })


if __name__ == "__main__":
  main()
