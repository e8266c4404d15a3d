"""One learning update of SAC, TD3, DDPG and clipped PPO equals a NumPy float64 reference
written from the papers' equations (``parity_reference.py``): same parameters, same batch, the
same random numbers (drawn here with the keys batchrl splits), compared to float tolerance.

Checked per agent: the critic target, the losses, the gradients (read back from Adam's first
moment; the reference's hand-written backprop is itself checked against finite differences),
the parameters after one Adam step (from warm Adam moments: a first step from zero moments
is ``-lr sign(g)`` and would hide a gradient off by a factor), SAC's temperature step, the
Polyak target update, the actor step, TD3's delay; for PPO the returns, GAE, advantage
standardization, the clipped surrogate, the (clipped) value loss, the entropy term, the
observation / reward normalization, and two epochs of shuffled minibatch steps.

Where batchrl's defaults differ from its peers, read in their code (SB3 2.9.2 in
benchmarks/.peers-venv; sbx at 9bdc9c1; CleanRL's sac/td3/ppo_continuous_action.py). "=" means
as batchrl.

- SAC log-std bounds: tanh rescaled into [-5, 2]. SB3 clamp [-20, 2]; sbx clip [-20, 2];
  CleanRL =.
- SAC actor steps: every gradient step. SB3 =; sbx = (policy_delay 1); CleanRL every 2nd
  step, twice then.
- TD3 actor steps: one in policy_delay = 2, on gradient steps 2, 4, 6 ... (after d critic
  steps). SB3 =; sbx =; CleanRL =; the paper's Algorithm 1 and the authors' current code =
  (their first code, sfujim/TD3 at 00ae5cd, restarted `it` at 0 in every call and so stepped
  the actor on the first step of each).
- TD3 targets: moved on actor steps only. SB3 =; CleanRL =; sbx on every gradient step.
- Learning rates (actor / critic / alpha): 3e-4 / 3e-4 / 3e-4. SB3 SAC 3e-4 for all, TD3 and
  DDPG 1e-3; sbx SAC and TD3 3e-4, DDPG 3e-4 / 1e-3; CleanRL SAC 3e-4 / 1e-3 / 1e-3, TD3 3e-4.
- TD3 target noise: 0.2 clipped to 0.5, normalized actions. SB3 =; sbx =; CleanRL = (times
  the action scale).
- SAC entropy target: -dim(A) (discrete: 0.7 log n). SB3, sbx, CleanRL: -dim(A).
- SAC initial alpha: 1.0. SB3 = ("auto"); sbx =; CleanRL = (log alpha 0).
- SAC temperature loss: -log alpha mean(log pi + target), log pi of the actor before its
  step (the authors' softlearning code). SB3 =; sbx =; CleanRL -alpha (...) with log pi
  resampled after the actor step.
- Polyak tau: 0.005. SB3, sbx, CleanRL =. (DDPG's paper: 0.001.)
- Critic loss: 0.5 sum_i MSE_i. SB3 SAC =, TD3 sum_i MSE_i; sbx =; CleanRL sum_i MSE_i (with
  Adam only epsilon sees the factor 2).
- Actor loss: SAC min of the twins; TD3 and DDPG Q1. SB3 =; CleanRL =; sbx TD3 min of the
  twins.
- DDPG: 256x256, Gaussian noise 0.1, tau 0.005, no weight decay (Fujimoto et al.'s "our
  DDPG"). SB3 400x300, lr 1e-3, no noise unless given; the paper 400x300, lr 1e-4 / 1e-3,
  critic L2 1e-2, OU noise.
- Reward scale and observation normalization (replay agents): none. SB3, sbx, CleanRL none
  by default.
- Gradient clipping: none by default (max_grad_norm). SB3 and sbx SAC/TD3 none; PPO 0.5 in
  SB3, sbx and CleanRL.
- PPO objective: the KL penalty by default (BatchPPO); 'clip' is tested here. Peers: clip 0.2.
- PPO advantages: standardized over the whole rollout, population std. SB3 and CleanRL per
  minibatch with ddof 1; sbx per minibatch with ddof 0.
- PPO value loss: value_coef 1 x 0.5 MSE; clip_value takes the max with the clipped
  prediction's error. SB3 vf_coef 0.5 x MSE (the same weight), clip_range_vf uses the clipped
  prediction alone; sbx vf_coef x MSE on its own optimizer; CleanRL 0.5 x 0.5 MSE with the max.
- PPO policy: tanh mean, state-independent std = softplus(w), initially 0.35. SB3, sbx,
  CleanRL: linear mean, exp(log std) initially 1.
- PPO normalization: observations by running mean / population variance, clipped to 5;
  rewards by the std of per-step rewards, clipped to 10. SB3 and sbx off (SB3's VecNormalize
  scales by the std of discounted returns); CleanRL NormalizeObservation clipped to 10 and
  NormalizeReward (discounted returns) clipped to 10.
- PPO Adam epsilon: 1e-8. SB3, sbx, CleanRL 1e-5.
- PPO values of the rollout: computed at the update from the parameters before it, on the
  observations normalized with the statistics at the update. Peers store the values the
  acting network gave.
"""
from __future__ import annotations

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import parity_reference as ref
from batchrl.agents.actor_critic import networks as ac_networks
from batchrl.agents.actor_critic.model import ACOptState, ACParams
from batchrl.agents.core import Transition
from batchrl.agents.ddpg import DDPGConfig
from batchrl.agents.ddpg.model import make_ddpg
from batchrl.agents.ppo import shuffle
from batchrl.agents.ppo.config import PPOConfig
from batchrl.agents.ppo.model import make_ppo
from batchrl.agents.sac import SACConfig
from batchrl.agents.sac.model import make_sac
from batchrl.agents.td3 import TD3Config
from batchrl.agents.td3.model import make_td3
from batchrl.agents.tqc import TQCConfig
from batchrl.agents.tqc.losses import tqc_target
from batchrl.agents.tqc.model import make_tqc
from batchrl.memories import TransitionItem
from batchrl.networks.distributions import DiagGaussian
from batchrl.ops.returns import discounted_returns, generalized_advantages
from batchrl.ops.running_stats import RunningStats
from batchrl.specs import EnvSpec
from conftest import leaves_by_path

# float32 (batchrl) against float64 (the reference)
RTOL, ATOL = 1e-4, 1e-5

OBS = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
ACTIONS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)  # normalized units are the env's
STORED, K = 10, 6  # transitions in the memory, batch size
TINY = dict(actor_layers=(4,), critic_layers=(4,), batch_size=K, memory_capacity=16,
            first_update=0, update_frequency=1, repeat_update=1, discount=0.9,
            update_target_weight=0.3, learning_rate=0.01, critic_learning_rate=0.02)
HP = dict(gamma=0.9, tau=0.3, actor_lr=0.01, critic_lr=0.02, adam_eps=1e-8)


# ------------------------------------------------------------------------- helpers


def f64(tree):
  return jax.tree.map(lambda x: np.asarray(x, np.float64), tree)


def random_like(tree, rng, scale=0.5):
  return jax.tree.map(lambda x: jnp.asarray(rng.normal(0.0, scale, np.shape(x)), jnp.float32),
                      tree)


def is_adam(x) -> bool:
  return isinstance(x, optax.ScaleByAdamState)


def warm_adam(opt_state, rng, count=3):
  """Adam states as after ``count`` steps (random moments): the first step from zero
  moments is ``-lr sign(g)`` and would hide a gradient off by a positive factor."""
  def warm(s):
    if not is_adam(s):
      return s
    return s._replace(
        count=jnp.int32(count),
        mu=jax.tree.map(lambda x: jnp.asarray(rng.normal(0.0, 0.05, np.shape(x)),
                                              jnp.float32), s.mu),
        nu=jax.tree.map(lambda x: jnp.asarray(rng.uniform(0.01, 0.2, np.shape(x)),
                                              jnp.float32), s.nu))
  return jax.tree.map(warm, opt_state, is_leaf=is_adam)


def adam_of(opt_state) -> optax.ScaleByAdamState:
  (state,) = [s for s in jax.tree.leaves(opt_state, is_leaf=is_adam) if is_adam(s)]
  return state


def reference_adam(opt_state):
  s = adam_of(opt_state)
  return int(s.count), f64(s.mu), f64(s.nu)


def gradients_taken(before, after):
  """The gradient batchrl's Adam step used, read back from its first moment: ``m' = b1 m +
  (1 - b1) g``."""
  return jax.tree.map(lambda new, old: (np.float64(new) - 0.9 * np.float64(old)) / 0.1,
                      adam_of(after).mu, adam_of(before).mu)


def assert_trees_close(actual, expected, what: str):
  actual, expected = leaves_by_path(actual), leaves_by_path(f64(expected))
  assert sorted(actual) == sorted(expected), what
  for path in actual:
    np.testing.assert_allclose(actual[path], expected[path], rtol=RTOL, atol=ATOL,
                               err_msg=f"{what} {path}")


def assert_close(actual, expected, what: str):
  np.testing.assert_allclose(np.float64(actual), expected, rtol=RTOL, atol=ATOL, err_msg=what)


# ---------------------------------------------------------------- replay agents


def experience(rng) -> dict:
  """``STORED`` transitions, some ending an episode."""
  return dict(obs=rng.uniform(-2, 2, (STORED, 3)), action=rng.uniform(-0.9, 0.9, (STORED, 2)),
              reward=rng.normal(size=STORED), terminated=np.arange(STORED) % 3 == 1,
              next_obs=rng.uniform(-2, 2, (STORED, 3)))


def replay_state(model, data: dict, seed: int, steps: int = 0):
  """A state whose memory holds ``data`` in order, with random online and target networks,
  Adam states as after 3 steps, alpha 0.4 and ``steps`` gradient steps taken."""
  state = model.init(jax.random.key(seed), EnvSpec(OBS, ACTIONS, 1))
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  for i in range(STORED):
    row = slice(i, i + 1)
    state = model.store(state, Transition(
        f32(data["obs"][row]), f32(data["action"][row]), f32(data["reward"][row]),
        jnp.asarray(data["terminated"][row]), jnp.zeros(1, bool), f32(data["next_obs"][row]),
        {}))
  rng = np.random.default_rng(seed + 100)
  p = state.params
  params = ACParams(random_like(p.actor, rng), random_like(p.critic, rng),
                    random_like(p.target_actor, rng), random_like(p.target_critic, rng),
                    jnp.float32(np.log(0.4)))
  o = state.opt_state
  opt = ACOptState(warm_adam(o.actor, rng), warm_adam(o.critic, rng),
                   warm_adam(o.alpha, rng), jnp.int32(steps))
  return state._replace(params=params, opt_state=opt)


def gradient_step_keys(state_key):
  """The keys of an update's one gradient step (``repeat_update=1``), split as the replay
  update and ``actor_critic.learning.step_keys`` split them: ``(batch, target noise, actor
  noise)``."""
  _, step_key = jax.random.split(state_key)
  (key,) = jax.random.split(step_key, 1)
  return jax.random.split(key, 3)


def batch_of(data: dict, key) -> dict:
  """The uniform batch the update draws: the same ``K`` indices into the stored rows."""
  index = np.asarray(jax.random.randint(key, (K,), 0, STORED))
  batch = {k: np.asarray(v[index], np.float64) for k, v in data.items()}
  return batch


def normal(key, shape=(K, 2)) -> np.ndarray:
  return np.asarray(jax.random.normal(key, shape, jnp.float32), np.float64)


def reference_inputs(state):
  p, o = state.params, state.opt_state
  params = dict(actor=f64(p.actor), critic=f64(p.critic), target_actor=f64(p.target_actor),
                target_critic=f64(p.target_critic), log_alpha=float(p.log_alpha))
  opt = dict(actor=reference_adam(o.actor), critic=reference_adam(o.critic))
  if o.alpha != ():
    count, mu, nu = reference_adam(o.alpha)
    opt["alpha"] = (count, float(mu), float(nu))
  return params, opt


def test_the_reference_uses_batchrls_documented_log_std_range():
  """The papers fix no range for SAC's log std; the reference takes batchrl's."""
  assert (ac_networks.LOG_STD_MIN, ac_networks.LOG_STD_MAX) == (ref.LOG_STD_MIN,
                                                                ref.LOG_STD_MAX)


# -------------------------------------------------------------------------------- SAC


@pytest.fixture(scope="module")
def sac():
  model = make_sac(SACConfig(**TINY, initial_alpha=0.4, alpha_learning_rate=0.05))
  data = experience(np.random.default_rng(0))
  state = replay_state(model, data, seed=0)
  new, metrics = jax.jit(model.update)(state)
  batch_key, target_key, actor_key = gradient_step_keys(state.key)
  batch = batch_of(data, batch_key)
  params, opt = reference_inputs(state)
  # target entropy -2: minus the action size, batchrl's default (not set in the config)
  hp = dict(HP, activation="relu", alpha_lr=0.05, target_entropy=-2.0)
  expected = ref.sac_step(params, opt, batch, normal(target_key), normal(actor_key), hp)
  return dict(state=state, new=new, metrics=metrics, expected=expected, batch=batch,
              params=params, eps_pi=normal(actor_key), hp=hp)


def test_sac_soft_target_uses_the_min_target_q_minus_alpha_log_pi_of_a_sampled_next_action(
    sac):
  m, e = sac["metrics"], sac["expected"]
  assert float(m["learning"]) == 1.0 and float(m["target_synced"]) == 1.0
  assert_close(m["target_mean"], np.mean(e["target"]), "mean soft target")
  assert_close(m["q_mean"], np.mean(e["q"]), "mean Q(s, a) of the batch")
  assert_close(m["critic_loss"], e["critic_loss"], "critic loss")


def test_sac_critic_gradient_and_adam_step_match(sac):
  before, after, e = sac["state"].opt_state, sac["new"].opt_state, sac["expected"]
  assert_trees_close(gradients_taken(before.critic, after.critic), e["critic_grads"],
                     "critic gradient")
  assert_trees_close(sac["new"].params.critic, e["critic"], "critic after Adam")


def test_sac_actor_step_goes_through_the_new_critics_min(sac):
  before, after, e = sac["state"].opt_state, sac["new"].opt_state, sac["expected"]
  assert_close(sac["metrics"]["actor_loss"], e["actor_loss"], "actor loss")
  assert_close(sac["metrics"]["entropy"], e["entropy"], "entropy estimate -mean log pi")
  assert_trees_close(gradients_taken(before.actor, after.actor), e["actor_grads"],
                     "actor gradient")
  assert_trees_close(sac["new"].params.actor, e["actor"], "actor after Adam")


def test_sac_temperature_steps_log_alpha_toward_the_target_entropy(sac):
  e = sac["expected"]
  assert_close(sac["new"].params.log_alpha, e["log_alpha"], "log alpha after Adam")
  assert_close(sac["metrics"]["alpha"], np.exp(e["log_alpha"]), "alpha metric")


def test_sac_targets_move_by_polyak_averaging(sac):
  e = sac["expected"]
  assert_trees_close(sac["new"].params.target_critic, e["target_critic"], "target critics")
  assert_trees_close(sac["new"].params.target_actor, e["target_actor"], "target actor")


def test_sac_reference_gradients_match_finite_differences(sac):
  """The reference's hand-written backprop against central differences (float64)."""
  e, batch = sac["expected"], sac["batch"]
  alpha = np.exp(sac["params"]["log_alpha"])
  numeric = ref.finite_difference_grads(
      lambda actor: ref.sac_actor_objective(actor, e["critic"], batch["obs"], sac["eps_pi"],
                                            alpha, "relu")[0], sac["params"]["actor"])
  assert_trees_close(e["actor_grads"], numeric, "reference actor gradient")

  def critic_loss(critic):
    q, _ = ref.critics_forward(critic, batch["obs"], batch["action"], "relu")
    return float(np.sum(0.5 * np.mean((q - e["target"]) ** 2, axis=1)))
  numeric = ref.finite_difference_grads(critic_loss, sac["params"]["critic"])
  assert_trees_close(e["critic_grads"], numeric, "reference critic gradient")


# -------------------------------------------------------------------------------- TQC


@pytest.fixture(scope="module")
def tqc():
  """3 critics of 5 quantiles, 2 of each dropped: 9 target atoms per sample."""
  model = make_tqc(TQCConfig(**TINY, initial_alpha=0.4, alpha_learning_rate=0.05,
                             num_critics=3, num_quantiles=5, drop_quantiles=2))
  data = experience(np.random.default_rng(1))
  state = replay_state(model, data, seed=1)
  new, metrics = jax.jit(model.update)(state)
  batch_key, target_key, actor_key = gradient_step_keys(state.key)
  batch = batch_of(data, batch_key)
  params, opt = reference_inputs(state)
  hp = dict(HP, activation="relu", alpha_lr=0.05, target_entropy=-2.0, drop=2)
  expected = ref.tqc_step(params, opt, batch, normal(target_key), normal(actor_key), hp)
  return dict(state=state, new=new, metrics=metrics, expected=expected, batch=batch,
              params=params, target_key=target_key, hp=hp)


def test_tqc_target_is_the_truncated_pooled_quantiles_minus_alpha_log_pi(tqc):
  """The target atoms themselves, from batchrl's loss function on the same inputs."""
  model_nets = ac_networks.make_networks(
      TQCConfig(**TINY), tqc["state"].info, 3, True, "tqc", num_quantiles=5)
  items = tqc_items(tqc["batch"])
  config = TQCConfig(**TINY, num_critics=3, num_quantiles=5, drop_quantiles=2)
  p = tqc["state"].params
  got = tqc_target(config, model_nets, p.actor, p.target_critic, items, config.discount,
                   tqc["target_key"], jnp.exp(p.log_alpha))
  assert got.shape == (K, 9)
  assert_close(got, tqc["expected"]["target"], "truncated target atoms")
  m = tqc["metrics"]
  assert float(m["learning"]) == 1.0
  assert_close(m["target_mean"], np.mean(tqc["expected"]["target"]), "mean target")
  assert_close(m["q_mean"], np.mean(tqc["expected"]["z"]), "mean quantile")


def tqc_items(batch: dict):
  """The batch as the memory's items (float32, as stored)."""
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  return TransitionItem(f32(batch["obs"]), f32(batch["action"]), f32(batch["reward"]),
                        jnp.asarray(batch["terminated"], bool), jnp.zeros(K, bool),
                        f32(batch["next_obs"]))


def test_tqc_critic_loss_gradient_and_adam_step_match(tqc):
  before, after, e = tqc["state"].opt_state, tqc["new"].opt_state, tqc["expected"]
  assert_close(tqc["metrics"]["critic_loss"], e["critic_loss"], "quantile Huber loss")
  assert_trees_close(gradients_taken(before.critic, after.critic), e["critic_grads"],
                     "critic gradient")
  assert_trees_close(tqc["new"].params.critic, e["critic"], "critic after Adam")


def test_tqc_actor_climbs_the_mean_quantile_of_the_new_critics(tqc):
  before, after, e = tqc["state"].opt_state, tqc["new"].opt_state, tqc["expected"]
  assert_close(tqc["metrics"]["actor_loss"], e["actor_loss"], "actor loss")
  assert_trees_close(gradients_taken(before.actor, after.actor), e["actor_grads"],
                     "actor gradient")
  assert_trees_close(tqc["new"].params.actor, e["actor"], "actor after Adam")


def test_tqc_temperature_and_targets(tqc):
  e, new = tqc["expected"], tqc["new"]
  assert_close(new.params.log_alpha, e["log_alpha"], "log alpha after Adam")
  assert_close(tqc["metrics"]["entropy"], e["entropy"], "entropy estimate")
  assert_trees_close(new.params.target_critic, e["target_critic"], "target critics")


def test_tqc_reference_critic_gradient_matches_finite_differences(tqc):
  e, batch = tqc["expected"], tqc["batch"]

  def loss(critic):
    z, _ = ref.quantile_critics_forward(critic, batch["obs"], batch["action"], "relu")
    return sum(ref.quantile_huber(z[i], e["target"])[0] for i in range(z.shape[0]))
  numeric = ref.finite_difference_grads(loss, tqc["params"]["critic"])
  assert_trees_close(e["critic_grads"], numeric, "reference critic gradient")


# ------------------------------------------------------------------------- TD3, DDPG


TD3_NOISE, TD3_CLIP, TD3_DELAY = 0.3, 0.4, 2


@pytest.fixture(scope="module")
def td3():
  """Two updates from the same state, one whose gradient step is the first (``steps`` 0
  taken) and one the second; the reference follows each on the branch batchrl took (actor
  step or not) and ``test_td3_first_actor_step_comes_after_policy_delay_critic_steps``
  checks which branch the paper takes."""
  model = make_td3(TD3Config(**TINY, activation="tanh", target_noise=TD3_NOISE,
                             target_noise_clip=TD3_CLIP, policy_delay=TD3_DELAY))
  data = experience(np.random.default_rng(1))
  update = jax.jit(model.update)
  runs = {}
  for steps in (0, 1):
    state = replay_state(model, data, seed=1, steps=steps)
    # a target actor near its bounds, so the clip to [-1, 1] after the noise matters
    bias = state.params.target_actor["mu"]["bias"] + jnp.array([1.5, -1.5])
    target_actor = dict(state.params.target_actor, mu=dict(
        state.params.target_actor["mu"], bias=bias))
    state = state._replace(params=state.params._replace(target_actor=target_actor))
    new, metrics = update(state)
    batch_key, target_key, _ = gradient_step_keys(state.key)
    batch = batch_of(data, batch_key)
    params, opt = reference_inputs(state)
    noise = TD3_NOISE * normal(target_key)
    learned = float(metrics["actor_learned"]) == 1.0
    expected = ref.deterministic_step(
        params, opt, batch, dict(HP, activation="tanh", target_noise_clip=TD3_CLIP),
        twin=True, target_noise=noise, learn_actor=learned)
    runs[steps] = dict(state=state, new=new, metrics=metrics, expected=expected,
                       batch=batch, params=params, noise=noise, learned=learned)
  return runs


def td3_run(td3, learned: bool) -> dict:
  (run,) = [r for r in td3.values() if r["learned"] == learned]
  return run


def test_td3_data_exercise_both_clips(td3):
  """The test's own premise: some target noise is clipped to +-c and some smoothed target
  action to [-1, 1], so the parity below covers both clips."""
  run = td3[0]
  assert np.any(np.abs(run["noise"]) > TD3_CLIP)
  action, _ = ref.deterministic_actor_forward(run["params"]["target_actor"],
                                              run["batch"]["next_obs"], "tanh")
  assert np.any(np.abs(action + np.clip(run["noise"], -TD3_CLIP, TD3_CLIP)) > 1.0)


def test_td3_learns_its_actor_on_one_of_every_policy_delay_gradient_steps(td3):
  assert sorted(r["learned"] for r in td3.values()) == [False, True]
  assert all(int(r["new"].opt_state.steps) == s + 1 for s, r in td3.items())


def test_td3_first_actor_step_comes_after_policy_delay_critic_steps(td3):
  """The paper's schedule: the actor (and the targets) learn on gradient step ``t`` (counted
  from 1) when ``t mod d == 0``."""
  assert [td3[s]["learned"] for s in (0, 1)] == [(s + 1) % TD3_DELAY == 0 for s in (0, 1)]


@pytest.mark.parametrize("steps", [0, 1])
def test_td3_target_smoothing_and_twin_min_give_the_critic_step(td3, steps):
  run = td3[steps]
  m, e = run["metrics"], run["expected"]
  assert_close(m["target_mean"], np.mean(e["target"]), "mean TD3 target")
  assert_close(m["critic_loss"], e["critic_loss"], "critic loss")
  assert_trees_close(gradients_taken(run["state"].opt_state.critic,
                                     run["new"].opt_state.critic), e["critic_grads"],
                     "critic gradient")
  assert_trees_close(run["new"].params.critic, e["critic"], "critics after Adam")


def test_td3_actor_ascends_q1_of_the_new_critics_and_moves_the_targets(td3):
  run = td3_run(td3, learned=True)
  e = run["expected"]
  assert_close(run["metrics"]["actor_loss"], e["actor_loss"], "actor loss -mean Q1")
  assert_trees_close(gradients_taken(run["state"].opt_state.actor,
                                     run["new"].opt_state.actor), e["actor_grads"],
                     "actor gradient")
  assert_trees_close(run["new"].params.actor, e["actor"], "actor after Adam")
  assert_trees_close(run["new"].params.target_actor, e["target_actor"], "target actor")
  assert_trees_close(run["new"].params.target_critic, e["target_critic"], "target critics")


def test_td3_between_delayed_steps_actor_and_targets_stay(td3):
  run = td3_run(td3, learned=False)
  before, after = run["state"], run["new"]
  for name in ("actor", "target_actor", "target_critic"):
    for (path, a), b in zip(leaves_by_path(getattr(after.params, name)).items(),
                            leaves_by_path(getattr(before.params, name)).values()):
      np.testing.assert_array_equal(a, b, err_msg=f"{name} {path}")
  for a, b in zip(jax.tree.leaves(after.opt_state.actor),
                  jax.tree.leaves(before.opt_state.actor)):
    np.testing.assert_array_equal(a, b, err_msg="actor Adam state")


def test_td3_reference_actor_gradient_matches_finite_differences(td3):
  run = td3_run(td3, learned=True)
  e, obs = run["expected"], run["batch"]["obs"]

  def actor_loss(actor):
    a, _ = ref.deterministic_actor_forward(actor, obs, "tanh")
    return -float(np.mean(ref.critic_forward(e["critic"]["critic_0"], obs, a, "tanh")[0]))
  numeric = ref.finite_difference_grads(actor_loss, run["params"]["actor"])
  assert_trees_close(e["actor_grads"], numeric, "reference actor gradient")


@pytest.fixture(scope="module")
def ddpg():
  model = make_ddpg(DDPGConfig(**TINY))
  data = experience(np.random.default_rng(2))
  state = replay_state(model, data, seed=2)
  new, metrics = jax.jit(model.update)(state)
  batch_key, _, _ = gradient_step_keys(state.key)
  params, opt = reference_inputs(state)
  expected = ref.deterministic_step(params, opt, batch_of(data, batch_key),
                                    dict(HP, activation="relu"), twin=False)
  return dict(state=state, new=new, metrics=metrics, expected=expected)


def test_ddpg_update_matches_the_reference(ddpg):
  """One critic regressed to ``r + gamma (1 - d) Q'(s', mu'(s'))``, the actor up ``Q(s,
  mu(s))`` of the new critic, both targets moved by tau."""
  m, e, new = ddpg["metrics"], ddpg["expected"], ddpg["new"]
  before = ddpg["state"].opt_state
  assert_close(m["target_mean"], np.mean(e["target"]), "mean DDPG target")
  assert_close(m["critic_loss"], e["critic_loss"], "critic loss")
  assert_close(m["actor_loss"], e["actor_loss"], "actor loss")
  assert_trees_close(gradients_taken(before.critic, new.opt_state.critic), e["critic_grads"],
                     "critic gradient")
  assert_trees_close(gradients_taken(before.actor, new.opt_state.actor), e["actor_grads"],
                     "actor gradient")
  for name in ("critic", "actor", "target_critic", "target_actor"):
    assert_trees_close(getattr(new.params, name), e[name], name)


# -------------------------------------------------------------------------------- PPO


T, B = 5, 2
PPO_BASE = dict(policy_layers=(4,), value_layers=(4,), activation="tanh", rollout_length=T,
                learning_rate=0.01, policy_objective="clip",
                clip_range=0.2, entropy_coef=0.05, value_coef=0.7, discount=0.9,
                update_loop="scan")
PPO_CASES = {
    "gae_lambda_returns_clipped_values": dict(
        gae_lambda=0.8, value_target="lambda_return", clip_value=True,
        normalize_observations=False, normalize_rewards=False),
    "returns_minus_values_normalized_inputs": dict(
        gae_lambda=None, value_target="return", clip_value=False,
        normalize_observations=True, normalize_rewards=True),
    "gradient_clipped_to_a_global_norm": dict(
        gae_lambda=0.8, value_target="lambda_return", clip_value=False, max_grad_norm=0.05,
        normalize_observations=False, normalize_rewards=False),
    "two_epochs_of_two_shuffled_minibatches": dict(
        gae_lambda=0.8, value_target="return", clip_value=True, update_epochs=2,
        batch_size=T * B // 2, normalize_observations=False, normalize_rewards=False),
}


def minibatch_order(config: PPOConfig, state_key) -> list | None:
  """The minibatches of each epoch as indices into the ``t``-major samples: each epoch
  shuffles the ``B * T`` one-step sequences (``b``-major) with the key the update splits for
  it; None for one minibatch (no shuffle)."""
  if config.batch_size is None:
    return None
  _, epochs_key = jax.random.split(state_key)
  minibatches = []
  for epoch_key in jax.random.split(epochs_key, config.update_epochs):
    order = np.asarray(shuffle.permutation(epoch_key, T * B))
    sample = (order % T) * B + order // T  # sequence b * T + t is sample t * B + b
    minibatches += list(sample.reshape(-1, config.batch_size))
  return minibatches


def ppo_rollout(rng) -> dict:
  """A ``[T, B]`` rollout with an episode end (terminated) and a time-limit cut."""
  terminated = np.zeros((T, B), bool)
  truncated = np.zeros((T, B), bool)
  terminated[1, 0] = True
  truncated[3, 1] = True
  return dict(obs=rng.normal(0.5, 1.5, (T, B, 3)), next_obs=rng.normal(0.5, 1.5, (T, B, 3)),
              reward=rng.normal(1.0, 2.0, (T, B)), terminated=terminated, truncated=truncated)


def reference_normalized(rollout: dict, config: PPOConfig) -> dict:
  """The rollout as the update reads it: observations centred and scaled by the mean and
  population variance of the stored observations (``sqrt(var + 1e-4)``), clipped to +-5;
  rewards scaled (not centred) by their std, clipped to +-10."""
  out = dict(rollout)
  if config.normalize_observations:
    mean, var = rollout["obs"].reshape(-1, 3).mean(0), rollout["obs"].reshape(-1, 3).var(0)
    scale = lambda x: np.clip((x - mean) / np.sqrt(var + 1e-4), -5, 5)
    out["obs"], out["next_obs"] = scale(rollout["obs"]), scale(rollout["next_obs"])
  if config.normalize_rewards:
    out["reward"] = np.clip(rollout["reward"] / np.sqrt(rollout["reward"].var() + 1e-4),
                            -10, 10)
  return out


@pytest.fixture(scope="module", params=sorted(PPO_CASES))
def ppo(request):
  config = PPOConfig(**{"update_epochs": 1, "batch_size": None, **PPO_BASE,
                        **PPO_CASES[request.param]})
  model = make_ppo(config)
  state = model.init(jax.random.key(3), EnvSpec(OBS, ACTIONS, B))
  rng = np.random.default_rng(3)
  params = random_like(state.params, rng)
  params["policy"]["head"]["raw_std"] = jnp.asarray(rng.normal(-0.5, 0.3, 2), jnp.float32)
  rollout = ppo_rollout(rng)
  seen = reference_normalized(rollout, config)
  # the policy that acted: near the current one, so some ratios leave [1 - eps, 1 + eps]
  mean, std, _ = ref.ppo_policy(f64(params["policy"]), seen["obs"], "tanh")
  old_mean = mean.reshape(T, B, 2) + rng.normal(0.0, 0.15, (T, B, 2))
  old_std = std.reshape(T, B, 2) * np.exp(rng.normal(0.0, 0.15, (T, B, 2)))
  raw_action = old_mean + old_std * rng.normal(size=(T, B, 2))
  seen.update(old_mean=old_mean, old_std=old_std, raw_action=raw_action)

  f32 = lambda x: jnp.asarray(x, jnp.float32)
  obs_stats, reward_stats = RunningStats.create((3,)), RunningStats.create(())
  for t in range(T):  # what store accumulates
    obs_stats = obs_stats.update(f32(rollout["obs"][t]))
    reward_stats = reward_stats.update(f32(rollout["reward"][t]))
  buffer = state.buffer._replace(
      obs=f32(rollout["obs"]), raw_action=f32(raw_action), reward=f32(rollout["reward"]),
      terminated=jnp.asarray(rollout["terminated"]), truncated=jnp.asarray(rollout["truncated"]),
      next_obs=f32(rollout["next_obs"]), policy=DiagGaussian(f32(old_mean), f32(old_std)))
  state = state._replace(params=params, opt_state=warm_adam(state.opt_state, rng),
                         buffer=buffer, step=jnp.int32(T), obs_stats=obs_stats,
                         reward_stats=reward_stats)
  new, metrics = jax.jit(model.update)(state)
  hp = dict(activation="tanh", gamma=0.9, lam=config.gae_lambda,
            value_target=config.value_target, normalize_advantages=True, clip_range=0.2,
            clip_value=config.clip_value, value_coef=0.7, entropy_coef=0.05, lr=0.01,
            adam_eps=1e-8, max_grad_norm=config.max_grad_norm)
  minibatches = minibatch_order(config, state.key)
  expected = ref.ppo_update(f64(params), reference_adam(state.opt_state), seen, hp,
                            minibatches)
  return dict(state=state, new=new, metrics=metrics, expected=expected, seen=seen, hp=hp,
              params=f64(params), config=config, steps=len(minibatches or [None]))


def test_ppo_gae_and_returns_match_the_hand_computed_loops(ppo):
  """batchrl's returns and GAE on the rollout's rewards and the reference's values, against
  the reference's per-environment loops (episode end at (1, 0), time-limit cut at (3, 1))."""
  seen, e = ppo["seen"], ppo["expected"]
  values = e["prep"]["values"]
  next_values, _ = ref.ppo_value(ppo["params"]["value"], seen["next_obs"],
                                 "tanh")
  expected_returns, expected_gae = ref.returns_and_gae(
      seen["reward"], values, next_values, seen["terminated"], seen["truncated"], 0.9, 0.8)
  args = (jnp.asarray(seen["reward"], jnp.float32), jnp.asarray(seen["terminated"]),
          jnp.asarray(seen["truncated"]), jnp.asarray(next_values, jnp.float32))
  assert_close(discounted_returns(*args, 0.9), expected_returns, "discounted returns")
  gae = generalized_advantages(args[0], jnp.asarray(values, jnp.float32), args[3], args[1],
                               args[2], 0.9, 0.8)
  assert_close(gae, expected_gae, "GAE(0.8)")
  assert_close(ppo["metrics"]["return_mean"], np.mean(e["prep"]["returns"]), "mean returns")
  assert_close(ppo["metrics"]["value_mean"], np.mean(values), "mean values before the update")


def test_ppo_losses_match_the_clipped_objective(ppo):
  m, e = ppo["metrics"], ppo["expected"]
  assert 0.0 < e["clipfrac"] < 1.0  # the data exercise both sides of the clip
  for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "kl",
               "grad_norm"):
    assert_close(m[name], e[name], name)
  if ppo["config"].max_grad_norm is not None:  # the test's premise: the clip is active
    assert e["grad_norm"] > ppo["config"].max_grad_norm


def test_ppo_gradient_and_adam_steps_match(ppo):
  """Every step's parameters and Adam moments; the gradient itself read back when the
  update is one step."""
  e = ppo["expected"]
  if ppo["steps"] == 1:  # clipped when max_grad_norm is set
    assert_trees_close(gradients_taken(ppo["state"].opt_state, ppo["new"].opt_state),
                       e["grads"], "PPO gradient")
  assert int(adam_of(ppo["new"].opt_state).count) == 3 + ppo["steps"]
  assert_trees_close(adam_of(ppo["new"].opt_state).mu, e["opt"][1], "Adam first moment")
  assert_trees_close(adam_of(ppo["new"].opt_state).nu, e["opt"][2], "Adam second moment")
  assert_trees_close(ppo["new"].params, e["params"], "PPO parameters after the update")


def test_ppo_reference_gradient_matches_finite_differences(ppo):
  """The reference's hand-written backprop on the whole rollout against central differences
  (float64)."""
  prep = ppo["expected"]["prep"]
  grads, _ = ref.ppo_gradient(ppo["params"], ref.ppo_samples(ppo["seen"], prep), ppo["hp"])
  numeric = ref.finite_difference_grads(
      lambda p: ref.ppo_loss_only(p, ppo["seen"], ppo["hp"], prep), ppo["params"])
  assert_trees_close(grads, numeric, "reference PPO gradient")
