"""One TQC gradient step of batchrl equals one of sbx 0.28 (the peer), from the same
parameters, batch and Gaussian noise, to float32 tolerance. Issue 51.

Runs in the peers' venv with batchrl importable (the two share the JAX stack; sbx is never
batchrl's dependency)::

    PYTHONPATH=. benchmarks/.peers-venv/bin/python benchmarks/tqc_update_parity.py
    PYTHONPATH=. benchmarks/.peers-venv/bin/python benchmarks/tqc_update_parity.py \
        --from-run benchmarks/results/parity/batchrl/tqc-HalfCheetah-v5-s2-tqc_mujoco
    PYTHONPATH=. benchmarks/.peers-venv/bin/python benchmarks/tqc_update_parity.py --updates 200

``--from-run DIR``: from the state a ``tqc_mujoco`` run's newest checkpoint holds instead
(the parameters, temperature, optimizer and memory of real training), restored from a copy.

Prints the largest difference per tensor and exits 1 if any exceeds the tolerance.

``--updates N``: N updates in a row on both sides, each on the batch and noise our update
draws, so the two courses (losses, temperature, parameters) can be followed where one update
cannot show a difference that builds up. Two float32 implementations part by rounding,
and training amplifies it, so the yardstick is our own update run beside, its parameters
nudged by one ulp up or down after every update; the check fails where sbx's drift (the
largest ``|batchrl - sbx| / |batchrl - start|`` over the tensors, Frobenius norms) exceeds 10x
the yardstick's (and 1e-3) at any of ten prints. Measured 2026-12-07, 200 updates: from the
random memory, drift 8e-5 at 20 updates and 1.2e-2 at 200 (yardstick 8e-5 and 9e-3; the
losses equal to 4 digits and alpha to 5); from the seed-2 run's 100k checkpoint, 3e-5 at 20
and 0.62 at most (yardstick 4e-3 and 0.26: that regime is chaotic; the critic loss within
1e-3, alpha within 1e-4 relative). ``--sbx-atoms 45`` plants a difference of one target atom
in 46 on sbx's side: drift 1.4e-2 at 20 updates from the random memory (175x the
yardstick) and 0.72 from the checkpoint (185x), the critic losses apart in the 2nd-3rd
digit: FAIL in both.

What runs on each side (HalfCheetah-v5's spaces: 17 observations, 6 actions; the values of
our ``tqc_mujoco``: 2x256 ReLU MLPs, 2 critics of 25 quantiles, 2 dropped per critic, batch
256, Adam 3e-4, gamma 0.99, tau 0.005; sbx's TQC built as ``peers/sbx_train.py`` builds it):

- batchrl: the named config's ``Model.update`` (jitted), learning from step 0 on a memory
  of 512 random transitions (a third ending their episode). The state it starts from is
  that of three earlier updates (so Adam's moments are warm and of the gradients' scale:
  a first Adam step is ``-lr sign(g)`` and would hide a gradient off by a factor), then
  ``log alpha = log 0.3`` and target critics moved off the online ones by N(0, 0.01) noise
  (so the temperature's factor and the Polyak step are seen). One gradient step follows:
  critic step toward the truncated target, actor step, temperature step, target sync.
- sbx: its own jitted static functions in the order its ``TQC._train`` calls them:
  ``TQC.update_critic`` (the targets' pooled, sorted quantiles at ``a' ~ pi(s')``, the 4
  largest dropped, minus ``alpha log pi``; each critic's quantile Huber loss), then
  ``TQC.soft_update``, then ``TQC.update_actor_and_temperature`` (``update_actor`` and
  ``update_temperature``), on ``TrainState``s built by ``sbx.TQC`` with our parameters,
  Adam moments and log alpha copied in (flax trees renamed: our
  ``MLP_0/Dense_{0,1}, mean, log_std`` are sbx's actor ``Dense_0..3``; our
  ``critic_i/MLP_0/Dense_{0,1}, q`` are sbx's ``qf{i+1}_state`` ``Dense_0..2``), and the batch
  our update drew (its indices from the same key).

The noise: batchrl draws ``eps = normal(key, [256, 6])`` from its step's target and actor
keys; sbx draws through tensorflow-probability from keys it splits itself, so here sbx's
actor ``apply_fn`` returns its distribution with ``sample`` replaced by ``tanh(loc + scale *
eps)``, batchrl's ``eps`` of the same call (the target's in ``update_critic``, the actor's in
``update_actor``); ``log_prob`` is sbx's (tfp's) unchanged.

One documented difference is bridged, not compared: the actor's log-std head (``--head
clip`` runs both sides with sbx's instead). batchrl maps
it by a tanh into [-5, 2], sbx clips it to [-20, 2]; as functions of the parameters they
differ, so no copy of the parameters can give both the same actor. sbx runs here with its
``SquashedGaussianActor`` subclassed to batchrl's head (the same layers, names and
distribution; ``actor_class`` is sbx's own hook for it: ``peers/sbx_train.py``'s
``batchrl_head_actor``). Everything else is sbx's code.

Compared after the step: both critics, both target critics, the actor, log alpha (and, as a
diagnostic, the losses: batchrl's critic loss is the sum of sbx's two). Tolerance: every
element within ``rtol 1e-4, atol 1e-6``, and the step itself (after - before) within 1e-3
of the largest step in the tensor (a parameter of 0.1 moved by 3e-4 passes ``rtol 1e-4`` with
a step 3% wrong; the second test catches that). Checked to fail (exit 1) when sbx keeps 48
target atoms instead of 46, when the two noises are swapped, and when the critics' gradients
are halved (sb3-contrib's loss scale, below).

What else differs, none of it in one step's values here:

- Order: sbx moves the target critics right after the critic step, before the actor and
  temperature steps; batchrl after them (the actor step reads no target, so the values are
  the same). batchrl also keeps a target actor moved by tau that nothing reads.
- Loss bookkeeping: batchrl minimizes the sum of the two critics' quantile Huber losses in
  one objective, sbx each critic's on its own state: the same gradient per critic.
- sb3-contrib's TQC (torch, ``--library sb3``) takes the mean over both critics (each
  critic's gradient halved: under Adam from zero moments the same steps but for epsilon),
  steps the temperature first (its target and actor loss still use alpha before that step,
  as here), clamps the log std to [-20, 2] as sbx, and initializes its layers as torch does.
- Before learning starts sbx and SB3 act uniformly at random; ``peers/sbx_train.py``
  patches them to act with the untrained policy, as ``tqc_mujoco`` does.
"""
from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))

STORED = 512  # transitions in the memory
RTOL, ATOL, STEP_TOL = 1e-4, 1e-6, 1e-3
DRIFT_TOL, DRIFT_FACTOR = 1e-3, 10.0  # --updates N: see many_updates
ENV = "HalfCheetah-v5"


# ----------------------------------------------------------------------------- batchrl


def warmed_state(algo: str, make, env, warm_updates: int, **changes):
  """``{algo}_mujoco``'s model learning from step 0 on a memory of ``STORED`` random
  transitions (a third ending their episode), after ``warm_updates`` updates (Adam's
  moments warm, of the gradients' own scale): ``(config, state, jitted update, rng)``."""
  import jax
  import jax.numpy as jnp

  from batchrl import configs
  from batchrl.agents.core import Transition
  from batchrl.specs import EnvSpec

  config = dataclasses.replace(configs.get(f"{algo}_mujoco").config, first_update=0,
                               memory_capacity=STORED, **changes)
  model = make(config)
  state = model.init(jax.random.key(0), EnvSpec(env.observation_space, env.action_space, 1))
  rng = np.random.default_rng(0)
  obs_size, act_size = env.observation_space.shape[0], env.action_space.shape[0]
  store = jax.jit(model.store)
  f32 = lambda *shape: jnp.asarray(rng.normal(0.0, 1.0, shape), jnp.float32)
  for i in range(STORED):
    state = store(state, Transition(
        f32(1, obs_size), jnp.asarray(rng.uniform(-0.9, 0.9, (1, act_size)), jnp.float32),
        f32(1), jnp.asarray([i % 3 == 1]), jnp.zeros(1, bool), f32(1, obs_size), {}))
  update = jax.jit(model.update)
  for _ in range(warm_updates):
    state = update(state)[0]
  return config, state, update, rng


def batchrl_side(env, head: str = "tanh"):
  """Our ``tqc_mujoco`` model and the state before the compared update: ``(config, state,
  jitted update)``."""
  import jax
  import jax.numpy as jnp

  from batchrl.agents.tqc.model import make_tqc

  config, state, update, rng = warmed_state("tqc", make_tqc, env, 3, log_std_head=head)
  f32 = lambda *shape, scale=1.0: jnp.asarray(rng.normal(0.0, scale, shape), jnp.float32)
  p = state.params
  target = jax.tree.map(lambda x: x + f32(*x.shape, scale=0.01), p.critic)
  state = state._replace(params=p._replace(target_critic=target,
                                           log_alpha=jnp.float32(np.log(0.3))))
  return config, state, update


def trained_side(run_dir: str):
  """The state a ``tqc_mujoco`` run's newest checkpoint holds (a copy of the run directory is
  restored, so the run is left as it was) and the jitted update, as ``batchrl_side``: the
  trained regime (a small temperature, parameters and Adam moments of 95k gradient steps, a
  memory of real transitions) that random transitions do not reach."""
  import shutil
  import tempfile

  import jax

  from batchrl import configs
  from batchrl.train.local import LocalTrainer

  with tempfile.TemporaryDirectory() as tmp:
    copy = os.path.join(tmp, "run")
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("events.out.*"))
    exp = configs.load(os.path.join(copy, "config.yaml"))
    trainer = LocalTrainer(exp, copy)
    try:
      if not trainer.restore():
        raise SystemExit(f"{run_dir} has no checkpoint to restore")
      state, model = jax.device_get(trainer.sim.agent_state), trainer.agent
    finally:
      trainer.close()
  return exp.config, state, jax.jit(model.update)


def next_update(update, state):
  """``update(state)`` as the run's next one: in the run each update follows a store, whose
  step makes it sync the targets; here no step passes between updates (nor since a restored
  checkpoint's update), so the sync boundary is set back as in a run."""
  state = state._replace(last_sync=np.zeros_like(state.last_sync))
  new, metrics = update(state)
  assert float(metrics["learning"]) == 1.0 and float(metrics["target_synced"]) == 1.0
  return state, new, metrics


def step_inputs(config, state, act_size: int):
  """The batch and the noise of the update's one gradient step, drawn as batchrl's replay
  update and ``actor_critic.learning.step_keys`` split its keys: ``(items, eps_target,
  eps_actor)``."""
  import jax

  from batchrl.agents.actor_critic import learning

  _, step_key = jax.random.split(state.key)
  (key,) = jax.random.split(step_key, config.repeat_update)
  batch_key, target_key, actor_key = learning.step_keys(key)
  items = learning.sample_batch(config, state, batch_key).items
  shape = (config.batch_size, act_size)
  return items, jax.random.normal(target_key, shape), jax.random.normal(actor_key, shape)


# -------------------------------------------------------------------------------- sbx


def noised(dist, eps):
  """``dist`` (sbx's tanh-squashed Gaussian) sampling ``tanh(loc + scale * eps)`` whatever the
  seed (tfp would draw other normals from sbx's keys); its ``log_prob`` unchanged."""
  base = dist.distribution
  dist.sample = lambda sample_shape=(), seed=None: dist.bijector.forward(
      base.loc + base.stddev() * eps)
  return dist


def with_noise(apply_fn, obs_size: int):
  """sbx's actor ``apply_fn`` reading observations with the noise appended (``[obs, eps]``,
  ``obs_size`` columns of observation): its distribution is ``noised`` by ``eps``. The noise
  rides in the observations because ``apply_fn`` is static to sbx's jitted functions: one
  wrapper for every step compiles them once."""
  return lambda params, obs: noised(apply_fn(params, obs[:, :obs_size]), obs[:, obs_size:])


def without_noise(apply_fn, obs_size: int):
  """sbx's critic ``apply_fn`` on observations with the noise appended: it drops the noise."""
  return lambda params, obs, actions, **kwargs: apply_fn(params, obs[:, :obs_size], actions,
                                                         **kwargs)


def sbx_actor(ours: dict) -> dict:
  return {"params": {"Dense_0": ours["MLP_0"]["Dense_0"], "Dense_1": ours["MLP_0"]["Dense_1"],
                     "Dense_2": ours["mean"], "Dense_3": ours["log_std"]}}


def ours_actor(sbx: dict) -> dict:
  p = sbx["params"]
  return {"MLP_0": {"Dense_0": p["Dense_0"], "Dense_1": p["Dense_1"]}, "mean": p["Dense_2"],
          "log_std": p["Dense_3"]}


def sbx_critic(ours: dict, i: int) -> dict:
  c = ours[f"critic_{i}"]
  return {"params": {"Dense_0": c["MLP_0"]["Dense_0"], "Dense_1": c["MLP_0"]["Dense_1"],
                     "Dense_2": c["q"]}}


def ours_critics(first: dict, second: dict) -> dict:
  return {f"critic_{i}": {"MLP_0": {"Dense_0": s["params"]["Dense_0"],
                                    "Dense_1": s["params"]["Dense_1"]},
                          "q": s["params"]["Dense_2"]}
          for i, s in enumerate((first, second))}


def adam_moments(opt_state):
  """The one ``ScaleByAdamState`` in an optax state."""
  import jax
  import optax
  is_adam = lambda s: isinstance(s, optax.ScaleByAdamState)
  (adam,) = [s for s in jax.tree.leaves(opt_state, is_leaf=is_adam) if is_adam(s)]
  return adam


def with_adam(opt_state, count, mu, nu):
  """``opt_state`` (sbx's, any optax chain) with its Adam count and moments replaced."""
  import jax
  import optax
  is_adam = lambda s: isinstance(s, optax.ScaleByAdamState)
  return jax.tree.map(lambda s: s._replace(count=count, mu=mu, nu=nu) if is_adam(s) else s,
                      opt_state, is_leaf=is_adam)


def sbx_states(model, state):
  """sbx's actor, critic and temperature ``TrainState``s holding our parameters, target
  critics, log alpha and Adam states."""
  import jax.numpy as jnp
  policy, p, o = model.policy, state.params, state.opt_state
  actor, critic, alpha = adam_moments(o.actor), adam_moments(o.critic), adam_moments(o.alpha)
  actor_state = policy.actor_state.replace(
      params=sbx_actor(p.actor), opt_state=with_adam(
          policy.actor_state.opt_state, actor.count, sbx_actor(actor.mu), sbx_actor(actor.nu)))
  critics = []
  for i, qf in enumerate((policy.qf1_state, policy.qf2_state)):
    critics.append(qf.replace(
        params=sbx_critic(p.critic, i), target_params=sbx_critic(p.target_critic, i),
        opt_state=with_adam(qf.opt_state, critic.count, sbx_critic(critic.mu, i),
                            sbx_critic(critic.nu, i))))
  wrap = lambda x: {"log_ent_coef": jnp.asarray(x, jnp.float32)}
  ent = model.ent_coef_state
  ent_state = ent.replace(params=wrap(p.log_alpha), opt_state=with_adam(
      ent.opt_state, alpha.count, wrap(alpha.mu), wrap(alpha.nu)))
  return actor_state, critics[0], critics[1], ent_state


def sbx_model(env, state, head: str):
  """sbx's TQC built as ``peers/sbx_train.py`` builds it, and its ``(actor, qf1, qf2,
  ent_coef)`` train states holding our state's parameters, reading the noise from the
  observations (``with_noise``)."""
  import sbx

  import sbx_train

  model = sbx.TQC("MlpPolicy", env, seed=0, verbose=0, **sbx_train.VALUES["tqc"],
                  policy_kwargs=sbx_train.policy_kwargs("tqc", batchrl_head=head == "tanh"))
  actor, qf1, qf2, ent = sbx_states(model, state)
  obs_size = env.observation_space.shape[0]
  actor = actor.replace(apply_fn=with_noise(actor.apply_fn, obs_size))
  qf1 = qf1.replace(apply_fn=without_noise(qf1.apply_fn, obs_size))
  return model, (actor, qf1, qf2, ent)


def sbx_step(model, states, items, eps_target, eps_actor, kept: int | None = None):
  """One gradient step of sbx's TQC in ``_train``'s order: ``TQC.update_critic``,
  ``TQC.soft_update``, ``TQC.update_actor_and_temperature``: ``(states, losses)``. ``kept``
  target atoms in place of sbx's own number: a planted difference, to see the check fail."""
  import jax
  import jax.numpy as jnp
  import sbx

  f32 = lambda x: jnp.asarray(x, jnp.float32)
  actor, qf1, qf2, ent = states
  key = jax.random.key(1)  # sbx's own keys: only its (zero) dropout reads them here
  obs, next_obs = f32(items.obs), f32(items.next_obs)
  discounts = jnp.full((items.reward.shape[0],), model.gamma, jnp.float32)
  (qf1, qf2), (loss1, loss2, _), key = sbx.TQC.update_critic(
      kept or model.policy.n_target_quantiles, actor, qf1, qf2, ent,
      jnp.concatenate([obs, jnp.zeros_like(eps_target)], 1), f32(items.action),
      jnp.concatenate([next_obs, eps_target], 1), f32(items.reward), f32(items.terminated),
      discounts, key)
  qf1, qf2 = sbx.TQC.soft_update(model.tau, qf1, qf2)
  actor, (qf1, qf2), ent, actor_loss, _, key = sbx.TQC.update_actor_and_temperature(
      actor, qf1, qf2, ent, jnp.concatenate([obs, eps_actor], 1), model.target_entropy, key)
  return (actor, qf1, qf2, ent), dict(critic_loss=loss1 + loss2, actor_loss=actor_loss)


def sbx_trees(states) -> dict:
  """sbx's train states as our parameter trees."""
  actor, qf1, qf2, ent = states
  return dict(actor=ours_actor(actor.params), critic=ours_critics(qf1.params, qf2.params),
              target_critic=ours_critics(qf1.target_params, qf2.target_params),
              log_alpha=ent.params["log_ent_coef"])


def sbx_side(env, state, items, eps_target, eps_actor, head: str):
  """One gradient step of sbx's TQC from our state: ``(actor, critic, target_critic,
  log_alpha, losses)`` in our trees."""
  import jax.numpy as jnp

  model, states = sbx_model(env, state, head)
  actor = states[0]
  zeros = jnp.zeros_like(eps_actor)
  log_std = jnp.log(jnp.concatenate([
      actor.apply_fn(actor.params, jnp.concatenate([jnp.asarray(x, jnp.float32), zeros], 1))
      .distribution.stddev() for x in (items.obs, items.next_obs)]))
  states, losses = sbx_step(model, states, items, eps_target, eps_actor)
  return dict(sbx_trees(states), **losses,
              n_target_quantiles=model.policy.n_target_quantiles,
              target_entropy=float(model.target_entropy),
              log_std=(float(jnp.min(log_std)), float(jnp.max(log_std))))


# ------------------------------------------------------------------------------- compare


def leaves(tree, name: str) -> dict:
  """``{"name/path/to/leaf": float64 array}`` of a parameter tree (a scalar: ``{name: x}``)."""
  import jax
  flat = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {"/".join([name, *(str(getattr(k, "key", k)) for k in path)]):
          np.asarray(v, np.float64) for path, v in flat}


def compare(name: str, ours, theirs, before) -> tuple[list, bool]:
  """Rows ``(tensor, max |ours - sbx|, max |step|, max |ours - sbx| / max |step|)`` and
  whether all are within tolerance."""
  rows, ok = [], True
  a, b, c = leaves(ours, name), leaves(theirs, name), leaves(before, name)
  assert sorted(a) == sorted(b), (name, sorted(a), sorted(b))
  for path in sorted(a):
    diff = float(np.max(np.abs(a[path] - b[path])))
    step = float(np.max(np.abs(a[path] - c[path])))
    of_step = diff / step if step > 0 else (0.0 if diff == 0 else np.inf)
    close = np.allclose(b[path], a[path], rtol=RTOL, atol=ATOL) and of_step <= STEP_TOL
    ok &= bool(close)
    rows.append((path, diff, step, of_step, close))
  return rows, ok


def one_update(env, config, state, update) -> int:
  """The next update on both sides, compared tensor by tensor: exit status 0 if all agree."""
  import sbx

  import sbx_train
  from batchrl.agents.actor_critic.networks import LOG_STD_MAX, LOG_STD_MIN

  state, new, metrics = next_update(update, state)
  head_text = (f"batchrl's head, a tanh into [{LOG_STD_MIN}, {LOG_STD_MAX}]"
               if config.log_std_head == "tanh" else "sbx's head, clipped to [-20, 2]")
  items, eps_target, eps_actor = step_inputs(config, state, env.action_space.shape[0])
  theirs = sbx_side(env, state, items, eps_target, eps_actor, config.log_std_head)
  assert theirs["n_target_quantiles"] == config.kept_quantiles == 46
  assert sbx_train.BATCHRL_LOG_STD == (LOG_STD_MIN, LOG_STD_MAX)
  assert theirs["target_entropy"] == -env.action_space.shape[0]  # ours: None, i.e. -|A|

  p, q = state.params, new.params
  rows, ok = [], True
  for name, ours, before in (("critic", q.critic, p.critic),
                             ("target_critic", q.target_critic, p.target_critic),
                             ("actor", q.actor, p.actor),
                             ("log_alpha", q.log_alpha, p.log_alpha)):
    got, fine = compare(name, ours, theirs[name], before)
    rows += got
    ok &= fine
  print(f"one TQC gradient step, batchrl ({config.num_critics} critics x "
        f"{config.num_quantiles} quantiles, {config.kept_quantiles} target atoms, batch "
        f"{config.batch_size}, {ENV} spaces) vs sbx {sbx.__version__}, the same noise; "
        f"log std: {head_text}, on both sides "
        f"(in the batch: {theirs['log_std'][0]:.2f} .. {theirs['log_std'][1]:.2f})\n")
  print(f"{'tensor':44s} {'max |batchrl - sbx|':>20s} {'max |step|':>11s} {'/ step':>9s}")
  for path, diff, step, of_step, close in rows:
    print(f"{path:44s} {diff:20.3e} {step:11.3e} {of_step:9.2e}{'' if close else '  FAIL'}")
  losses = [("critic loss (batchrl: sum of sbx's two)", metrics["critic_loss"],
             theirs["critic_loss"]), ("actor loss", metrics["actor_loss"],
                                      theirs["actor_loss"])]
  print()
  for what, a, b in losses:
    print(f"{what:44s} batchrl {float(a):.7g}  sbx {float(b):.7g}  diff {abs(a - b):.2e}")
  verdict = "PASS" if ok else "FAIL"
  print(f"\n{verdict}: every element within rtol {RTOL:g}, atol {ATOL:g}, and every step within "
        f"{STEP_TOL:g} of the tensor's largest step")
  return 0 if ok else 1


PARAMS = ("critic", "target_critic", "actor", "log_alpha")


def drift(params, theirs: dict, start) -> tuple[float, str]:
  """The largest ``|batchrl - sbx| / |batchrl - start|`` (Frobenius norms) over the tensors:
  how far the two sides have parted, as a share of how far ours moved since ``start``; and
  where. Norms, not the largest element: Adam steps an element whose gradient is near zero
  by up to the learning rate whatever its sign, so float rounding alone parts single
  elements by whole steps while the tensors stay together."""
  worst, where = 0.0, ""
  for name in PARAMS:
    a = leaves(getattr(params, name), name)
    b, c = leaves(theirs[name], name), leaves(getattr(start, name), name)
    for path in a:
      moved = float(np.linalg.norm(a[path] - c[path]))
      share = float(np.linalg.norm(a[path] - b[path])) / moved if moved > 0 else 0.0
      if share > worst:
        worst, where = share, path
  return worst, where


def nudged(params, rng):
  """``params`` with every element moved by one float32 ulp up or down at random: a
  difference of the size float rounding makes in one update."""
  import jax

  def nudge(x):
    x = np.asarray(x, np.float32)
    way = np.where(rng.random(x.shape) < 0.5, -np.inf, np.inf).astype(np.float32)
    return np.nextafter(x, way)
  return jax.tree.map(nudge, params)


def many_updates(env, config, state, update, updates: int, kept: int | None = None) -> int:
  """``updates`` updates in a row on both sides, each on the batch and noise our update draws
  (so both see the same data, as they would in one run), with the two sides' courses of
  loss, temperature and parameters printed ten times; beside them our own update from the
  same state, its parameters nudged by one ulp up or down after every update (``nudged``):
  its drift from ours is what rounding differences alone, made anew at every step as two
  implementations make them, grow to. Exit status 0 if sbx's drift stays within ``DRIFT_FACTOR``
  times that yardstick's (or ``DRIFT_TOL``, where the yardstick is smaller)."""
  import sbx

  model, states = sbx_model(env, state, config.log_std_head)
  start, act_size = state.params, env.action_space.shape[0]
  rng = np.random.default_rng(0)
  twin = state._replace(params=nudged(state.params, rng))
  every, worst, ok = max(1, updates // 10), (0.0, 0.0), True
  print(f"{updates} TQC updates in a row, batchrl vs sbx {sbx.__version__}, each on the same "
        f"batch and noise. drift: the largest |batchrl - other| / |batchrl - start| (norms) "
        f"over the tensors, the other being sbx, or (ulp) our own update with its parameters "
        f"nudged by one ulp after each\n")
  print(f"{'update':>6s} {'critic loss b / sbx':>21s} {'actor loss b / sbx':>21s} "
        f"{'alpha b / sbx':>17s} {'drift':>9s} {'ulp':>9s}  tensor")
  for k in range(1, updates + 1):
    items, eps_target, eps_actor = step_inputs(config, state, act_size)
    states, losses = sbx_step(model, states, items, eps_target, eps_actor, kept)
    _, state, metrics = next_update(update, state)
    _, twin, _ = next_update(update, twin)
    twin = twin._replace(params=nudged(twin.params, rng))
    if k % every and k != updates:
      continue
    theirs = sbx_trees(states)
    share, where = drift(state.params, theirs, start)
    yardstick, _ = drift(state.params, twin.params._asdict(), start)
    ok &= share <= max(DRIFT_FACTOR * yardstick, DRIFT_TOL)
    worst = max(worst, (share, yardstick))
    alphas = np.exp([float(state.params.log_alpha), float(theirs["log_alpha"])])
    print(f"{k:6d} {float(metrics['critic_loss']):10.5g} {float(losses['critic_loss']):10.5g} "
          f"{float(metrics['actor_loss']):10.5g} {float(losses['actor_loss']):10.5g} "
          f"{alphas[0]:8.5f} {alphas[1]:8.5f} {share:9.2e} {yardstick:9.2e}  {where}")
  print(f"\n{'PASS' if ok else 'FAIL'}: sbx's drift within {DRIFT_FACTOR:g}x that of one ulp "
        f"(or {DRIFT_TOL:g}) at every print; the largest: {worst[0]:.2e} (ulp: {worst[1]:.2e})")
  return 0 if ok else 1


def main() -> int:
  import argparse

  import gymnasium as gym

  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--from-run", metavar="DIR",
                 help="start from this tqc_mujoco run's newest checkpoint (restored from a copy)")
  p.add_argument("--updates", type=int, default=1,
                 help="updates in a row on both sides (default 1: one, compared tensor by "
                      "tensor)")
  p.add_argument("--head", choices=("tanh", "clip"),
                 help="the actor's log-std head on both sides (without --from-run, whose run "
                      "sets it): ours, a tanh into [-5, 2] (the default), or sbx's, clipped "
                      "to [-20, 2]")
  p.add_argument("--sbx-atoms", type=int, metavar="K",
                 help="with --updates: sbx keeps K target atoms instead of its own 46 (a "
                      "planted difference: the check should fail)")
  args = p.parse_args()
  if args.updates < 1:
    p.error(f"--updates must be at least 1, got {args.updates}")
  if args.sbx_atoms is not None and (args.updates == 1 or not 1 <= args.sbx_atoms <= 50):
    p.error(f"--sbx-atoms K plants a difference in --updates N > 1, with K from 1 to 50 (the "
            f"pooled quantiles); got K={args.sbx_atoms} with --updates {args.updates}")
  if args.from_run and args.head:
    p.error("--head sets the head of a run made here; with --from-run the run's config "
            "sets it: give one of the two")
  if args.from_run and not os.path.isdir(os.path.join(args.from_run, "checkpoints")):
    p.error(f"--from-run {args.from_run}: no run directory with checkpoints there (a "
            f"tqc_mujoco run's, e.g. benchmarks/results/parity/batchrl/"
            f"tqc-HalfCheetah-v5-s2-tqc_mujoco)")
  env = gym.make(ENV)
  config, state, update = (trained_side(args.from_run) if args.from_run
                           else batchrl_side(env, args.head or "tanh"))
  if args.updates == 1:
    return one_update(env, config, state, update)
  return many_updates(env, config, state, update, args.updates, args.sbx_atoms)


if __name__ == "__main__":
  sys.exit(main())
