"""One CrossQ gradient step of batchrl equals one of sbx 0.28 (the peer), from the same
parameters, batch statistics, batch and Gaussian noise, to float32 tolerance. Issue 51.

Runs in the peers' venv with batchrl importable (the two share the JAX stack; sbx is never
batchrl's dependency)::

    PYTHONPATH=. benchmarks/.peers-venv/bin/python benchmarks/crossq_update_parity.py

Prints the largest difference per tensor and exits 1 if any exceeds the tolerance.

What runs on each side (HalfCheetah-v5's spaces: 17 observations, 6 actions; the values of
our ``crossq_mujoco``: a 2x256 actor and 2 critics of 1024x1024, Batch Renormalization with
momentum 0.99, batch 256, Adam 1e-3 with beta1 0.5, gamma 0.99, policy delay 3; sbx's
CrossQ built as ``peers/sbx_train.py`` builds it):

- batchrl: the named config's ``Model.update`` (jitted), learning from step 0 on a memory
  of 512 random transitions (a third ending their episode). The state it starts from is
  that of five earlier updates (Adam's moments warm, the actor's among them: it stepped on
  the third; the running statistics moved), then ``log alpha = log 0.3``. The compared
  update is the sixth gradient step, one on which the actor and temperature step too:
  critic step (the joint pass), actor step, temperature step.
- sbx: its own jitted static functions in the order its ``CrossQ._train`` calls them on such
  a step: ``CrossQ.update_critic`` then ``CrossQ.update_actor_and_temperature``, on the
  ``BatchNormTrainState``s built by ``sbx.CrossQ`` with our parameters, statistics, Adam
  moments and log alpha copied in (flax trees renamed: our actor's ``MLP_0/{BatchRenorm_i,
  Dense_i}, mean, log_std`` are sbx's ``BatchRenorm_i, Dense_0..3``; our ``critic_i/MLP_0/
  {BatchRenorm_j, Dense_j}, q`` are slice ``i`` of sbx's vmapped ``VmapCritic_0``), and the
  batch our update drew (its indices from the same key).

The noise and the log-std head are bridged as in ``tqc_update_parity.py``: sbx's actor
``apply_fn`` samples ``tanh(loc + scale * eps)`` with batchrl's ``eps`` of the same call,
and its actor class is subclassed to batchrl's head (tanh into [-5, 2] instead of a clip to
[-20, 2]); everything else is sbx's code. The warmup of Batch Renormalization (100k
training passes) is not reached in either, so both normalize by the batch.

Compared after the step: the critics' and the actor's parameters and running statistics,
log alpha (and, as a diagnostic, the losses). Tolerances as ``tqc_update_parity.py``.
"""
from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "peers"))
from tqc_update_parity import (  # noqa: E402  (after the path tweak above)
  ENV,
  adam_moments,
  compare,
  noised,
  step_inputs,
  warmed_state,
  with_adam,
)

WARM_UPDATES = 5  # the actor steps on the 3rd; the compared 6th is an actor step too


def batchrl_side(env):
  """Our ``crossq_mujoco`` model, the state before the compared update, and the update's
  output: ``(config, state, new_state, metrics)``."""
  import jax.numpy as jnp

  from batchrl.agents.crossq.model import make_crossq

  config, state, update, _ = warmed_state("crossq", make_crossq, env, WARM_UPDATES)
  state = state._replace(params=state.params._replace(log_alpha=jnp.float32(np.log(0.3))))
  new, metrics = update(state)
  assert float(metrics["learning"]) == 1.0 and float(metrics["actor_learned"]) == 1.0
  return config, state, new, metrics


# -------------------------------------------------------------------------------- sbx


def actor_class():
  """sbx's CrossQ ``Actor`` with batchrl's log-std head (``sbx_train.batchrl_head``)."""
  import flax.linen as nn
  from sbx.common.jax_layers import BatchRenorm
  from sbx.crossq.policies import Actor

  import sbx_train

  class BatchrlHeadActor(Actor):
    @nn.compact
    def __call__(self, x, train: bool = False):
      norm = lambda: BatchRenorm(use_running_average=not train,
                                 momentum=self.batch_norm_momentum,
                                 warmup_steps=self.renorm_warmup_steps)
      x = norm()(x.reshape((x.shape[0], -1)))
      for width in self.net_arch:
        x = norm()(self.activation_fn(nn.Dense(width)(x)))
      return sbx_train.batchrl_head(x, self.action_dim)

  return BatchrlHeadActor


def with_renorm_noise(apply_fn, eps):
  """sbx's actor ``apply_fn`` (which may return ``(distribution, updates)``) whose
  distribution is ``noised`` by ``eps``."""
  def apply(variables, obs, **kwargs):
    out = apply_fn(variables, obs, **kwargs)
    dist = out[0] if isinstance(out, tuple) else out
    noised(dist, eps)
    return out
  return apply


def _stats(ours: dict) -> dict:
  """Our statistics of one layer in sbx's layout (its r_max, d_max: the paper's 3 and 5)."""
  return {"mean": ours["mean"], "var": ours["var"], "steps": ours["steps"], "r_max": 3,
          "d_max": 5}


def sbx_actor(params: dict, stats: dict | None = None) -> dict:
  m = params["MLP_0"]
  tree = {"Dense_0": m["Dense_0"], "Dense_1": m["Dense_1"], "Dense_2": params["mean"],
          "Dense_3": params["log_std"]}
  tree.update({f"BatchRenorm_{i}": m[f"BatchRenorm_{i}"] for i in range(3)})
  if stats is None:
    return tree
  return tree, {f"BatchRenorm_{i}": _stats(stats["MLP_0"][f"BatchRenorm_{i}"])
                for i in range(3)}


def ours_actor(params: dict, stats: dict) -> tuple[dict, dict]:
  mlp = {f"Dense_{i}": params[f"Dense_{i}"] for i in range(2)}
  mlp.update({f"BatchRenorm_{i}": params[f"BatchRenorm_{i}"] for i in range(3)})
  own = lambda s: {k: s[k] for k in ("mean", "var", "steps")}
  return ({"MLP_0": mlp, "mean": params["Dense_2"], "log_std": params["Dense_3"]},
          {"MLP_0": {f"BatchRenorm_{i}": own(stats[f"BatchRenorm_{i}"]) for i in range(3)}})


def sbx_critics(params: dict, stats: dict | None = None):
  """Our two critics stacked on a leading axis, as sbx's vmapped ``VmapCritic_0``."""
  import jax
  import jax.numpy as jnp
  stack = lambda *trees: jax.tree.map(lambda *x: jnp.stack(x), *trees)
  one = lambda i: {**{f"Dense_{j}": params[f"critic_{i}"]["MLP_0"][f"Dense_{j}"]
                      for j in range(2)},
                   **{f"BatchRenorm_{j}": params[f"critic_{i}"]["MLP_0"][f"BatchRenorm_{j}"]
                      for j in range(3)},
                   "Dense_2": params[f"critic_{i}"]["q"]}
  tree = {"VmapCritic_0": stack(one(0), one(1))}
  if stats is None:
    return tree
  own = lambda i: {f"BatchRenorm_{j}": _stats(stats[f"critic_{i}"]["MLP_0"][f"BatchRenorm_{j}"])
                   for j in range(3)}
  return tree, {"VmapCritic_0": stack(own(0), own(1))}


def ours_critics(params: dict, stats: dict) -> tuple[dict, dict]:
  p, s = params["VmapCritic_0"], stats["VmapCritic_0"]
  take = lambda tree, i: {k: {n: v[i] for n, v in layer.items()} for k, layer in tree.items()}
  out_p, out_s = {}, {}
  for i in range(2):
    layers = take(p, i)
    mlp = {k: layers[k] for k in ("Dense_0", "Dense_1", "BatchRenorm_0", "BatchRenorm_1",
                                  "BatchRenorm_2")}
    out_p[f"critic_{i}"] = {"MLP_0": mlp, "q": layers["Dense_2"]}
    own = {k: {n: layer[n] for n in ("mean", "var", "steps")}
           for k, layer in take(s, i).items()}
    out_s[f"critic_{i}"] = {"MLP_0": own}
  return out_p, out_s


def sbx_states(model, state):
  """sbx's actor, critic and temperature states holding our parameters, statistics, log
  alpha and Adam states."""
  import jax.numpy as jnp
  policy, p, o = model.policy, state.params, state.opt_state
  actor, critic, alpha = adam_moments(o.actor), adam_moments(o.critic), adam_moments(o.alpha)
  actor_params, actor_stats = sbx_actor(p.actor.params, p.actor.stats)
  actor_state = policy.actor_state.replace(
      params=actor_params, batch_stats=actor_stats, opt_state=with_adam(
          policy.actor_state.opt_state, actor.count, sbx_actor(actor.mu),
          sbx_actor(actor.nu)))
  critic_params, critic_stats = sbx_critics(p.critic.params, p.critic.stats)
  qf_state = policy.qf_state.replace(
      params=critic_params, batch_stats=critic_stats, opt_state=with_adam(
          policy.qf_state.opt_state, critic.count, sbx_critics(critic.mu),
          sbx_critics(critic.nu)))
  wrap = lambda x: {"log_ent_coef": jnp.asarray(x, jnp.float32)}
  ent = model.ent_coef_state
  ent_state = ent.replace(params=wrap(p.log_alpha), opt_state=with_adam(
      ent.opt_state, alpha.count, wrap(alpha.mu), wrap(alpha.nu)))
  return actor_state, qf_state, ent_state


def sbx_side(env, state, items, eps_target, eps_actor):
  """One actor-stepping gradient step of sbx's CrossQ from our state, in our trees."""
  import jax
  import jax.numpy as jnp
  import sbx

  import sbx_train

  f32 = lambda x: jnp.asarray(x, jnp.float32)
  model = sbx.CrossQ("MlpPolicy", env, seed=0, verbose=0, **sbx_train.VALUES["crossq"],
                     policy_kwargs=dict(net_arch=sbx_train.NET_ARCHS["crossq"],
                                        actor_class=actor_class()))
  actor_state, qf_state, ent_state = sbx_states(model, state)
  apply_fn = actor_state.apply_fn
  key = jax.random.key(1)  # sbx's own keys: only its (zero) dropout reads them here
  discounts = jnp.full((items.reward.shape[0],), model.gamma, jnp.float32)
  qf_state, (critic_loss, _), key = sbx.CrossQ.update_critic(
      actor_state.replace(apply_fn=with_renorm_noise(apply_fn, eps_target)), qf_state,
      ent_state, f32(items.obs), f32(items.action), f32(items.next_obs), f32(items.reward),
      f32(items.terminated), discounts, key)
  actor_state, qf_state, ent_state, actor_loss, _, key = (
      sbx.CrossQ.update_actor_and_temperature(
          actor_state.replace(apply_fn=with_renorm_noise(apply_fn, eps_actor)), qf_state,
          ent_state, f32(items.obs), model.target_entropy, key))
  actor, actor_stats = ours_actor(actor_state.params, actor_state.batch_stats)
  critic, critic_stats = ours_critics(qf_state.params, qf_state.batch_stats)
  return dict(actor=actor, actor_stats=actor_stats, critic=critic, critic_stats=critic_stats,
              log_alpha=ent_state.params["log_ent_coef"], critic_loss=critic_loss,
              actor_loss=actor_loss, target_entropy=float(model.target_entropy))


def main() -> int:
  import gymnasium as gym
  import sbx

  env = gym.make(ENV)
  config, state, new, metrics = batchrl_side(env)
  items, eps_target, eps_actor = step_inputs(config, state, env.action_space.shape[0])
  theirs = sbx_side(env, state, items, eps_target, eps_actor)
  assert theirs["target_entropy"] == -env.action_space.shape[0]  # ours: None, i.e. -|A|

  p, q = state.params, new.params
  rows, ok = [], True
  for name, ours, before in (("critic", q.critic.params, p.critic.params),
                             ("critic_stats", q.critic.stats, p.critic.stats),
                             ("actor", q.actor.params, p.actor.params),
                             ("actor_stats", q.actor.stats, p.actor.stats),
                             ("log_alpha", q.log_alpha, p.log_alpha)):
    got, fine = compare(name, ours, theirs[name], before)
    rows += got
    ok &= fine
  print(f"one CrossQ gradient step with an actor step, batchrl ({config.num_critics} critics "
        f"of {'x'.join(map(str, config.critic_layers))}, batch {config.batch_size}, {ENV} "
        f"spaces) vs sbx {sbx.__version__}, the same noise and batchrl's log-std head\n")
  print(f"{'tensor':58s} {'max |batchrl - sbx|':>20s} {'max |step|':>11s} {'/ step':>9s}")
  for path, diff, step, of_step, close in rows:
    print(f"{path:58s} {diff:20.3e} {step:11.3e} {of_step:9.2e}{'' if close else '  FAIL'}")
  print()
  for what, a, b in (("critic loss", metrics["critic_loss"], theirs["critic_loss"]),
                     ("actor loss", metrics["actor_loss"], theirs["actor_loss"])):
    print(f"{what:58s} batchrl {float(a):.7g}  sbx {float(b):.7g}  diff {abs(a - b):.2e}")
  verdict = "PASS" if ok else "FAIL"
  print(f"\n{verdict}: every element within the tolerances of tqc_update_parity.py")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
