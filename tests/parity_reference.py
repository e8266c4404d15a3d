"""One learning step of SAC, TD3, DDPG and clipped PPO in NumPy float64, written from the
papers' equations, for ``test_update_parity.py``. No JAX here: the tests draw the random
numbers batchrl draws (same keys) and hand them in.

Networks are nested dicts shaped like batchrl's flax parameters (``{"MLP_0": {"Dense_0":
{"kernel", "bias"}}, ...}``) so results compare leaf by leaf; every forward pass keeps what
its backward pass needs, and gradients come back as dicts of the same shape.

Papers: SAC, Haarnoja et al. 2018 ("Soft Actor-Critic Algorithms and Applications": eqs. 5-7
critic target and loss, eq. 21 the tanh change of variables, eq. 18 the temperature loss);
TD3, Fujimoto et al. 2018 (Algorithm 1: clipped double Q, target policy smoothing, delayed
actor and target updates); DDPG, Lillicrap et al. 2016 (Algorithm 1); PPO, Schulman et al.
2017 (eq. 7 clipped surrogate, eq. 9 value and entropy terms) with GAE, Schulman et al. 2016
(eq. 16); Adam, Kingma and Ba 2015 (Algorithm 1).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

LOG_2PI = math.log(2.0 * math.pi)
# batchrl's documented choice (the papers fix no range): a tanh maps the log-std head into
# [-5, 2], as CleanRL's sac_continuous_action does
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


# ----------------------------------------------------------------------------- trees


def tree_map(fn: Callable, tree, *rest):
  """``fn`` over the leaves of nested dicts (leaves: arrays or scalars)."""
  if isinstance(tree, dict):
    return {k: tree_map(fn, tree[k], *(r[k] for r in rest)) for k in tree}
  return fn(tree, *rest)


def tree_leaves(tree) -> list:
  if isinstance(tree, dict):
    return [leaf for k in sorted(tree) for leaf in tree_leaves(tree[k])]
  return [tree]


def tree_add(a, b):
  return tree_map(lambda x, y: x + y, a, b)


# -------------------------------------------------------------------------- networks


def _activation(name: str):
  """``(f, f'(z, f(z)))``."""
  if name == "relu":
    return (lambda z: np.maximum(z, 0.0)), (lambda z, y: (z > 0).astype(np.float64))
  if name == "tanh":
    return np.tanh, (lambda z, y: 1.0 - y * y)
  raise ValueError(f"unknown activation {name!r}")


def dense(p: dict, x: np.ndarray) -> np.ndarray:
  return x @ p["kernel"] + p["bias"]


def dense_backward(p: dict, x: np.ndarray, d_out: np.ndarray):
  """``(grads of p, d x)`` of ``y = x W + b`` given ``d y``."""
  return {"kernel": x.T @ d_out, "bias": d_out.sum(axis=0)}, d_out @ p["kernel"].T


def mlp_forward(p: dict, x: np.ndarray, activation: str):
  """``{"Dense_i"}`` layers, each followed by ``activation``: ``(y, cache)``."""
  f, _ = _activation(activation)
  cache = []
  for i in range(len(p)):
    z = dense(p[f"Dense_{i}"], x)
    y = f(z)
    cache.append((x, z, y))
    x = y
  return x, cache


def mlp_backward(p: dict, cache, d_y: np.ndarray, activation: str):
  """``(grads of p, d x)`` given ``d y``."""
  _, df = _activation(activation)
  grads = {}
  for i in reversed(range(len(cache))):
    x, z, y = cache[i]
    grads[f"Dense_{i}"], d_y = dense_backward(p[f"Dense_{i}"], x, d_y * df(z, y))
  return grads, d_y


def critic_forward(p: dict, obs, action, activation: str):
  """One critic ``Q(s, a)`` on ``[s, a]``: ``(q [K], cache)``."""
  x = np.concatenate([obs, action], axis=-1)
  h, cache = mlp_forward(p["MLP_0"], x, activation)
  return dense(p["q"], h)[:, 0], (h, cache)


def critic_backward(p: dict, fwd_cache, d_q: np.ndarray, activation: str, obs_size: int):
  """``(grads of p, d action [K, A])`` given ``d q [K]``."""
  h, cache = fwd_cache
  g_q, d_h = dense_backward(p["q"], h, d_q[:, None])
  g_mlp, d_x = mlp_backward(p["MLP_0"], cache, d_h, activation)
  return {"MLP_0": g_mlp, "q": g_q}, d_x[:, obs_size:]


def critics_forward(p: dict, obs, action, activation: str):
  """All critics ``{"critic_i"}``: ``(q [C, K], caches)``."""
  outs = [critic_forward(p[f"critic_{i}"], obs, action, activation) for i in range(len(p))]
  return np.stack([q for q, _ in outs]), [c for _, c in outs]


def zeros_like(tree):
  return tree_map(np.zeros_like, tree)


# ----------------------------------------------------------------------------- Adam


def adam(params, grads, state, lr: float, eps: float = 1e-8, b1: float = 0.9,
         b2: float = 0.999):
  """Kingma and Ba's Adam step from ``state = (count, m, v)``: ``(params, state)``."""
  count, m, v = state
  t = count + 1
  m = tree_map(lambda m_, g: b1 * m_ + (1 - b1) * g, m, grads)
  v = tree_map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, v, grads)
  step = lambda p, m_, v_: p - lr * (m_ / (1 - b1 ** t)) / (
      np.sqrt(v_ / (1 - b2 ** t)) + eps)
  return tree_map(step, params, m, v), (t, m, v)


def polyak(target, online, tau: float):
  """``tau online + (1 - tau) target``."""
  return tree_map(lambda t, o: tau * o + (1 - tau) * t, target, online)


# ---------------------------------------------------------------------- the batch


def critic_step(critic, critic_opt, batch, target, hp):
  """Each critic regresses to ``target``: ``L = sum_i 0.5 mean (Q_i(s, a) - y)^2``; Adam."""
  obs, action = batch["obs"], batch["action"]
  q, caches = critics_forward(critic, obs, action, hp["activation"])
  k = obs.shape[0]
  loss = float(np.sum(0.5 * np.mean((q - target) ** 2, axis=1)))
  grads = {}
  for i in range(q.shape[0]):
    grads[f"critic_{i}"], _ = critic_backward(critic[f"critic_{i}"], caches[i],
                                              (q[i] - target) / k, hp["activation"],
                                              obs.shape[1])
  new, opt = adam(critic, grads, critic_opt, hp["critic_lr"], hp["adam_eps"])
  return dict(critic=new, critic_opt=opt, critic_grads=grads, critic_loss=loss, q=q)


def bellman(batch, gamma: float, next_value):
  """``y = r + gamma (1 - d) V'(s')``."""
  return batch["reward"] + gamma * (1.0 - batch["terminated"]) * next_value


def grads_of_min(critic, caches, q, d_min, activation, obs_size):
  """Backprop ``d min_i Q_i`` to the action (the argmin critic's path): ``d a [K, A]``."""
  pick = np.argmin(q, axis=0)
  d_action = 0.0
  for i in range(q.shape[0]):
    _, d_a = critic_backward(critic[f"critic_{i}"], caches[i], d_min * (pick == i),
                             activation, obs_size)
    d_action = d_action + d_a
  return d_action


# -------------------------------------------------------------------------------- SAC


def sac_actor_forward(p, obs, eps, activation):
  """Squashed Gaussian: ``a = tanh(mu + sigma eps)``, ``log pi(a|s)`` by eq. 21; cache."""
  h, cache = mlp_forward(p["MLP_0"], obs, activation)
  mean = dense(p["mean"], h)
  z = dense(p["log_std"], h)
  log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (np.tanh(z) + 1.0)
  std = np.exp(log_std)
  u = mean + std * eps
  a = np.tanh(u)
  gauss = np.sum(-0.5 * eps ** 2 - log_std - 0.5 * LOG_2PI, axis=-1)
  log_pi = gauss - np.sum(np.log(1.0 - a ** 2), axis=-1)
  return a, log_pi, dict(h=h, cache=cache, z=z, std=std, eps=eps, a=a)


def sac_actor_backward(p, f, d_a, d_log_pi, activation):
  """Reparameterized gradient of ``L(a, log pi)`` given ``dL/da [K, A]``, ``dL/dlog pi [K]``.

  ``u = mu + sigma eps`` with ``eps`` fixed: ``d log N(u; mu, sigma) = -d log sigma`` (the
  ``(u - mu) / sigma`` term is ``eps``, constant), ``d(-log(1 - tanh^2 u))/du = 2 tanh u``."""
  a, std, eps = f["a"], f["std"], f["eps"]
  d_u = d_a * (1.0 - a ** 2) + d_log_pi[:, None] * 2.0 * a
  d_mean = d_u
  d_log_std = d_u * std * eps - d_log_pi[:, None]
  d_z = d_log_std * 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (1.0 - np.tanh(f["z"]) ** 2)
  g_mean, d_h1 = dense_backward(p["mean"], f["h"], d_mean)
  g_std, d_h2 = dense_backward(p["log_std"], f["h"], d_z)
  g_mlp, _ = mlp_backward(p["MLP_0"], f["cache"], d_h1 + d_h2, activation)
  return {"MLP_0": g_mlp, "mean": g_mean, "log_std": g_std}


def sac_actor_objective(actor, critic, obs, eps, alpha, activation):
  """``mean(alpha log pi(a|s) - min_i Q_i(s, a))`` (eq. 17 with the twin minimum)."""
  a, log_pi, _ = sac_actor_forward(actor, obs, eps, activation)
  q, _ = critics_forward(critic, obs, a, activation)
  return float(np.mean(alpha * log_pi - np.min(q, axis=0))), log_pi


def sac_step(p: dict, opt: dict, batch: dict, eps_next, eps_pi, hp: dict) -> dict:
  """One SAC gradient step: critics, then the actor through the new critics, then the
  temperature on the actor's ``log pi``, then Polyak averaging of the target critics."""
  act = hp["activation"]
  alpha = math.exp(p["log_alpha"])
  a_next, logp_next, _ = sac_actor_forward(p["actor"], batch["next_obs"], eps_next, act)
  q_next, _ = critics_forward(p["target_critic"], batch["next_obs"], a_next, act)
  target = bellman(batch, hp["gamma"], np.min(q_next, axis=0) - alpha * logp_next)
  out = critic_step(p["critic"], opt["critic"], batch, target, hp)

  obs, k = batch["obs"], batch["obs"].shape[0]
  a, log_pi, f = sac_actor_forward(p["actor"], obs, eps_pi, act)
  q, caches = critics_forward(out["critic"], obs, a, act)
  actor_loss = float(np.mean(alpha * log_pi - np.min(q, axis=0)))
  d_a = grads_of_min(out["critic"], caches, q, -np.ones(k) / k, act, obs.shape[1])
  actor_grads = sac_actor_backward(p["actor"], f, d_a, np.full(k, alpha / k), act)
  actor, actor_opt = adam(p["actor"], actor_grads, opt["actor"], hp["actor_lr"],
                          hp["adam_eps"])

  # eq. 18 as the authors' softlearning code steps it: the variable is log alpha and the loss
  # -log alpha * mean(log pi + H_target), log pi of the actor before its step
  alpha_grad = -float(np.mean(log_pi + hp["target_entropy"]))
  log_alpha, alpha_opt = adam(p["log_alpha"], alpha_grad, opt["alpha"], hp["alpha_lr"])
  out.update(
      actor=actor, actor_opt=actor_opt, actor_grads=actor_grads, actor_loss=actor_loss,
      log_alpha=log_alpha, alpha_opt=alpha_opt, alpha_grad=alpha_grad, target=target,
      target_critic=polyak(p["target_critic"], out["critic"], hp["tau"]),
      target_actor=polyak(p["target_actor"], actor, hp["tau"]),
      entropy=-float(np.mean(log_pi)))
  return out


# -------------------------------------------------------------------------------- TQC


def quantile_critic_forward(p: dict, obs, action, activation: str):
  """One critic of ``Q`` return quantiles on ``[s, a]``: ``(z [K, Q], cache)``."""
  h, cache = mlp_forward(p["MLP_0"], np.concatenate([obs, action], axis=-1), activation)
  return dense(p["q"], h), (h, cache)


def quantile_critic_backward(p: dict, fwd_cache, d_z: np.ndarray, activation: str,
                             obs_size: int):
  """``(grads of p, d action [K, A])`` given ``d z [K, Q]``."""
  h, cache = fwd_cache
  g_q, d_h = dense_backward(p["q"], h, d_z)
  g_mlp, d_x = mlp_backward(p["MLP_0"], cache, d_h, activation)
  return {"MLP_0": g_mlp, "q": g_q}, d_x[:, obs_size:]


def quantile_critics_forward(p: dict, obs, action, activation: str):
  """All critics: ``(z [C, K, Q], caches)``."""
  outs = [quantile_critic_forward(p[f"critic_{i}"], obs, action, activation)
          for i in range(len(p))]
  return np.stack([z for z, _ in outs]), [c for _, c in outs]


def quantile_huber(z: np.ndarray, target: np.ndarray):
  """Dabney et al.'s quantile Huber loss (kappa 1) of one critic's quantiles ``z [K, Q]`` at
  tau_i = (i + 1/2) / Q against the atoms ``target [K, M]``, averaged over K, Q and M:
  ``(loss, d loss / d z [K, Q])``. With ``u = y_j - z_i``: ``rho(u) = |tau_i - 1{u < 0}|
  H(u)``, ``H(u) = u^2 / 2`` for ``|u| <= 1`` else ``|u| - 1/2``; ``dH/du = clip(u, -1,
  1)``, ``du/dz = -1``."""
  k, q = z.shape
  m = target.shape[1]
  tau = (np.arange(q) + 0.5) / q
  u = target[:, None, :] - z[:, :, None]
  weight = np.abs(tau[None, :, None] - (u < 0))
  huber = np.where(np.abs(u) <= 1.0, 0.5 * u ** 2, np.abs(u) - 0.5)
  loss = float(np.mean(weight * huber))
  d_z = -np.sum(weight * np.clip(u, -1.0, 1.0), axis=2) / (k * q * m)
  return loss, d_z


def tqc_target(p: dict, batch: dict, eps_next, hp: dict):
  """Kuznetsov et al.'s eq. 10-11: the ``C Q`` quantiles of the target critics at ``a' ~
  pi(s')`` pooled and sorted, the ``k = C (Q - d)`` smallest kept, ``y_j = r + gamma (1 -
  done) (z_(j) - alpha log pi(a'|s'))``: ``[K, k]``."""
  alpha = math.exp(p["log_alpha"])
  a_next, logp_next, _ = sac_actor_forward(p["actor"], batch["next_obs"], eps_next,
                                           hp["activation"])
  z_next, _ = quantile_critics_forward(p["target_critic"], batch["next_obs"], a_next,
                                       hp["activation"])
  c, k, q = z_next.shape
  pooled = np.sort(np.transpose(z_next, (1, 0, 2)).reshape(k, c * q), axis=1)
  kept = pooled[:, :c * (q - hp["drop"])]
  alive = (1.0 - batch["terminated"])[:, None]
  return batch["reward"][:, None] + hp["gamma"] * alive * (kept - alpha * logp_next[:, None])


def tqc_step(p: dict, opt: dict, batch: dict, eps_next, eps_pi, hp: dict) -> dict:
  """One TQC gradient step: each critic on the quantile Huber loss toward the truncated
  target (the critics' losses summed), the actor down ``mean(alpha log pi - mean_{c,i}
  z_{c,i}(s, a))`` through the new critics, the temperature as SAC's, Polyak averaging."""
  act, obs, k = hp["activation"], batch["obs"], batch["obs"].shape[0]
  alpha = math.exp(p["log_alpha"])
  target = tqc_target(p, batch, eps_next, hp)
  z, caches = quantile_critics_forward(p["critic"], obs, batch["action"], act)
  critic_grads, critic_loss = {}, 0.0
  for i in range(z.shape[0]):
    loss, d_z = quantile_huber(z[i], target)
    critic_loss += loss
    critic_grads[f"critic_{i}"], _ = quantile_critic_backward(
        p["critic"][f"critic_{i}"], caches[i], d_z, act, obs.shape[1])
  critic, critic_opt = adam(p["critic"], critic_grads, opt["critic"], hp["critic_lr"],
                            hp["adam_eps"])

  a, log_pi, f = sac_actor_forward(p["actor"], obs, eps_pi, act)
  z_pi, caches = quantile_critics_forward(critic, obs, a, act)
  c, _, q = z_pi.shape
  actor_loss = float(np.mean(alpha * log_pi - np.mean(z_pi, axis=(0, 2))))
  d_a = 0.0
  for i in range(c):  # d/dz of -mean_{c,i} z / K, back to the action through each critic
    _, d_ai = quantile_critic_backward(critic[f"critic_{i}"], caches[i],
                                       -np.ones((k, q)) / (k * c * q), act, obs.shape[1])
    d_a = d_a + d_ai
  actor_grads = sac_actor_backward(p["actor"], f, d_a, np.full(k, alpha / k), act)
  actor, actor_opt = adam(p["actor"], actor_grads, opt["actor"], hp["actor_lr"],
                          hp["adam_eps"])
  alpha_grad = -float(np.mean(log_pi + hp["target_entropy"]))
  log_alpha, alpha_opt = adam(p["log_alpha"], alpha_grad, opt["alpha"], hp["alpha_lr"])
  return dict(
      critic=critic, critic_opt=critic_opt, critic_grads=critic_grads,
      critic_loss=critic_loss, z=z, target=target, actor=actor, actor_opt=actor_opt,
      actor_grads=actor_grads, actor_loss=actor_loss, log_alpha=log_alpha,
      target_critic=polyak(p["target_critic"], critic, hp["tau"]),
      target_actor=polyak(p["target_actor"], actor, hp["tau"]), entropy=-float(np.mean(log_pi)))


# ------------------------------------------------------------------------- TD3, DDPG


def deterministic_actor_forward(p, obs, activation):
  """``mu(s) = tanh(W h(s) + b)``: ``(a, cache)``."""
  h, cache = mlp_forward(p["MLP_0"], obs, activation)
  a = np.tanh(dense(p["mu"], h))
  return a, (h, cache, a)


def deterministic_actor_backward(p, f, d_a, activation):
  h, cache, a = f
  g_mu, d_h = dense_backward(p["mu"], h, d_a * (1.0 - a ** 2))
  g_mlp, _ = mlp_backward(p["MLP_0"], cache, d_h, activation)
  return {"MLP_0": g_mlp, "mu": g_mu}


def deterministic_step(p: dict, opt: dict, batch: dict, hp: dict, *, twin: bool,
                       target_noise=None, learn_actor: bool = True) -> dict:
  """One DDPG (``twin`` False: ``y = r + gamma Q'(s', mu'(s'))``) or TD3 step (``y = r +
  gamma min_i Q'_i(s', clip(mu'(s') + clip(noise, -c, c), -1, 1))``); the actor ascends
  ``Q_1(s, mu(s))`` of the new critic (the deterministic policy gradient) when
  ``learn_actor``, and only then do the targets move (TD3's delay)."""
  act = hp["activation"]
  a_next, _ = deterministic_actor_forward(p["target_actor"], batch["next_obs"], act)
  if target_noise is not None:
    c = hp["target_noise_clip"]
    a_next = np.clip(a_next + np.clip(target_noise, -c, c), -1.0, 1.0)
  q_next, _ = critics_forward(p["target_critic"], batch["next_obs"], a_next, act)
  next_value = np.min(q_next, axis=0) if twin else q_next[0]
  target = bellman(batch, hp["gamma"], next_value)
  out = critic_step(p["critic"], opt["critic"], batch, target, hp)

  obs, k = batch["obs"], batch["obs"].shape[0]
  a, f = deterministic_actor_forward(p["actor"], obs, act)
  q1, cache1 = critic_forward(out["critic"]["critic_0"], obs, a, act)
  actor_loss = -float(np.mean(q1))
  _, d_a = critic_backward(out["critic"]["critic_0"], cache1, -np.ones(k) / k, act,
                           obs.shape[1])
  actor_grads = deterministic_actor_backward(p["actor"], f, d_a, act)
  out.update(actor_grads=actor_grads, actor_loss=actor_loss, target=target)
  if learn_actor:
    actor, actor_opt = adam(p["actor"], actor_grads, opt["actor"], hp["actor_lr"],
                            hp["adam_eps"])
    out.update(actor=actor, actor_opt=actor_opt,
               target_actor=polyak(p["target_actor"], actor, hp["tau"]),
               target_critic=polyak(p["target_critic"], out["critic"], hp["tau"]))
  else:
    out.update(actor=p["actor"], actor_opt=opt["actor"], target_actor=p["target_actor"],
               target_critic=p["target_critic"])
  return out


# -------------------------------------------------------------------------------- PPO


def returns_and_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
  """Per environment, backwards over ``[T, B]``: the discounted return bootstrapped where
  the episode or the rollout was cut, and GAE (Schulman et al. 2016 eq. 16) with
  ``delta_t = r_t + gamma (1 - terminated_t) V(s'_t) - V(s_t)`` and the sum stopped at every
  episode end (terminated or truncated)."""
  steps, envs = rewards.shape
  ret = np.zeros((steps, envs))
  gae = np.zeros((steps, envs))
  for b in range(envs):
    following_return, following_gae = 0.0, 0.0
    for t in reversed(range(steps)):
      alive = 1.0 - terminated[t, b]
      cut = truncated[t, b] or t == steps - 1
      after = next_values[t, b] if cut else following_return
      following_return = rewards[t, b] + gamma * alive * after
      ret[t, b] = following_return
      if lam is not None:
        delta = rewards[t, b] + gamma * alive * next_values[t, b] - values[t, b]
        done = terminated[t, b] or truncated[t, b]
        following_gae = delta + gamma * lam * (0.0 if done else following_gae)
        gae[t, b] = following_gae
  return ret, gae


def ppo_value(p, obs, activation):
  """``V(s)`` of ``{"MLP_0", "Dense_0"}``: ``(v [...], cache)``."""
  flat = obs.reshape(-1, obs.shape[-1])
  h, cache = mlp_forward(p["MLP_0"], flat, activation)
  return dense(p["Dense_0"], h)[:, 0].reshape(obs.shape[:-1]), (flat, h, cache)


def ppo_value_backward(p, f, d_v, activation):
  flat, h, cache = f
  g_out, d_h = dense_backward(p["Dense_0"], h, d_v.reshape(-1, 1))
  g_mlp, _ = mlp_backward(p["MLP_0"], cache, d_h, activation)
  return {"MLP_0": g_mlp, "Dense_0": g_out}


def ppo_policy(p, obs, activation):
  """Gaussian policy: ``mean = tanh(W h(s) + b)``, ``std = softplus(raw_std)``."""
  flat = obs.reshape(-1, obs.shape[-1])
  h, cache = mlp_forward(p["MLP_0"], flat, activation)
  mean = np.tanh(dense(p["head"]["Dense_0"], h))
  std = np.broadcast_to(np.log1p(np.exp(p["head"]["raw_std"])), mean.shape)
  return mean, std, (h, cache)


def gaussian_log_prob(x, mean, std):
  return np.sum(-0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * LOG_2PI, axis=-1)


def gaussian_kl(mean0, std0, mean1, std1):
  """``KL(N0 || N1)`` summed over the last axis."""
  return np.sum(np.log(std1 / std0) + (std0 ** 2 + (mean0 - mean1) ** 2) / (2 * std1 ** 2)
                - 0.5, axis=-1)


def ppo_prepare(p: dict, rollout: dict, hp: dict) -> dict:
  """Values before the update, returns, advantages (GAE when ``lam``), the value targets
  and the advantages standardized over the whole rollout when ``normalize_advantages``."""
  act = hp["activation"]
  values, _ = ppo_value(p["value"], rollout["obs"], act)
  next_values, _ = ppo_value(p["value"], rollout["next_obs"], act)
  ret, gae = returns_and_gae(rollout["reward"], values, next_values, rollout["terminated"],
                             rollout["truncated"], hp["gamma"], hp["lam"])
  adv = ret - values if hp["lam"] is None else gae
  if hp["value_target"] == "lambda_return":
    ret = gae + values
  if hp["normalize_advantages"]:
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
  return dict(values=values, returns=ret, advantages=adv)


def ppo_samples(rollout: dict, prep: dict) -> dict:
  """The rollout's ``T * B`` samples as flat rows (``t`` major), with their targets."""
  rows = lambda x, *tail: x.reshape((-1,) + tail)
  return dict(obs=rows(rollout["obs"], rollout["obs"].shape[-1]),
              raw_action=rows(rollout["raw_action"], rollout["raw_action"].shape[-1]),
              old_mean=rows(rollout["old_mean"], rollout["old_mean"].shape[-1]),
              old_std=rows(rollout["old_std"], rollout["old_std"].shape[-1]),
              advantages=rows(prep["advantages"]), returns=rows(prep["returns"]),
              old_values=rows(prep["values"]))


def ppo_gradient(p: dict, s: dict, hp: dict):
  """``(gradient, metrics)`` of ``L = L_clip + c_v L_V - c_e H`` (PPO eq. 9, written as a
  loss) on the samples ``s``: ``L_clip = -mean min(r A, clip(r, 1 - eps, 1 + eps) A)`` with
  ``r = pi(a|s) / pi_old(a|s)``, ``L_V = 0.5 mean (V - R)^2`` (the pessimum with ``V_old +
  clip(V - V_old, -eps, eps)`` when ``clip_value``), ``H`` the Gaussian's entropy."""
  act, eps = hp["activation"], hp["clip_range"]
  adv, ret, old_v, x = s["advantages"], s["returns"], s["old_values"], s["raw_action"]
  n = adv.size
  mean, std, (h, cache) = ppo_policy(p["policy"], s["obs"], act)
  log_ratio = gaussian_log_prob(x, mean, std) - gaussian_log_prob(x, s["old_mean"],
                                                                  s["old_std"])
  ratio = np.exp(log_ratio)
  clipped = np.clip(ratio, 1 - eps, 1 + eps)
  unclipped_is_min = ratio * adv <= clipped * adv
  policy_loss = -float(np.mean(np.minimum(ratio * adv, clipped * adv)))
  # d L_clip / d log r: the term that is the minimum, through r (the clipped one is flat
  # outside [1 - eps, 1 + eps])
  inside = (ratio > 1 - eps) & (ratio < 1 + eps)
  d_log_ratio = -adv * ratio * np.where(unclipped_is_min, 1.0, inside) / n

  v, vf = ppo_value(p["value"], s["obs"], act)
  plain = (ret - v) ** 2
  if hp["clip_value"]:
    v_clipped = old_v + np.clip(v - old_v, -eps, eps)
    pessimum = (ret - v_clipped) ** 2
    value_loss = 0.5 * float(np.mean(np.maximum(plain, pessimum)))
    in_range = np.abs(v - old_v) < eps
    d_v = np.where(plain >= pessimum, -(ret - v), -(ret - v_clipped) * in_range) / n
  else:
    value_loss = 0.5 * float(np.mean(plain))
    d_v = -(ret - v) / n
  d_v = hp["value_coef"] * d_v

  raw_std = p["policy"]["head"]["raw_std"]
  entropy = float(np.sum(0.5 + 0.5 * LOG_2PI + np.log(std[0])))
  # d log N(x; m, s) / dm = (x - m) / s^2; / ds = ((x - m)^2 / s^2 - 1) / s
  z = (x - mean) / std
  d_mean = d_log_ratio[:, None] * z / std
  d_std = d_log_ratio[:, None] * (z ** 2 - 1.0) / std
  sigmoid = 1.0 / (1.0 + np.exp(-raw_std))
  d_raw_std = d_std.sum(axis=0) * sigmoid - hp["entropy_coef"] * sigmoid / std[0]
  g_head, d_h = dense_backward(p["policy"]["head"]["Dense_0"], h, d_mean * (1 - mean ** 2))
  g_mlp, _ = mlp_backward(p["policy"]["MLP_0"], cache, d_h, act)
  grads = {"policy": {"MLP_0": g_mlp, "head": {"Dense_0": g_head, "raw_std": d_raw_std}},
           "value": ppo_value_backward(p["value"], vf, d_v, act)}
  metrics = dict(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy,
                 approx_kl=float(np.mean(ratio - 1.0 - log_ratio)),
                 clipfrac=float(np.mean(np.abs(ratio - 1.0) > eps)))
  return grads, metrics


def ppo_update(p: dict, opt, rollout: dict, hp: dict, minibatches=None) -> dict:
  """A PPO update: targets from the parameters before it (``ppo_prepare``), then one Adam
  step per minibatch (``minibatches``: index arrays into the ``t``-major samples, in order;
  None: one step on the whole rollout), the old policy and the targets fixed throughout, each
  gradient scaled to a global norm of at most ``max_grad_norm`` when given; metrics averaged
  over the steps (``grad_norm`` before the clip), the KL(old || new) of the final policy;
  ``grads`` the first step's (clipped) gradient."""
  prep = ppo_prepare(p, rollout, hp)
  samples = ppo_samples(rollout, prep)
  if minibatches is None:
    minibatches = [np.arange(samples["advantages"].size)]
  first_grads, steps = None, []
  for index in minibatches:
    grads, metrics = ppo_gradient(p, {k: v[index] for k, v in samples.items()}, hp)
    norm = math.sqrt(sum(float(np.sum(g * g)) for g in tree_leaves(grads)))
    if hp.get("max_grad_norm") is not None and norm > hp["max_grad_norm"]:
      grads = tree_map(lambda g: g * hp["max_grad_norm"] / norm, grads)  # global-norm clip
    first_grads = grads if first_grads is None else first_grads
    p, opt = adam(p, grads, opt, hp["lr"], hp["adam_eps"])
    steps.append(dict(metrics, grad_norm=norm))
  new_mean, new_std, _ = ppo_policy(p["policy"], samples["obs"], hp["activation"])
  out = {k: float(np.mean([m[k] for m in steps])) for k in steps[0]}
  out.update(params=p, opt=opt, grads=first_grads, prep=prep, kl=float(np.mean(gaussian_kl(
      samples["old_mean"], samples["old_std"], new_mean, new_std))))
  return out


def ppo_loss_only(p: dict, rollout: dict, hp: dict, prep: dict) -> float:
  """``ppo_gradient``'s loss on the whole rollout at ``p`` with fixed targets ``prep`` (for
  finite differences)."""
  act, eps = hp["activation"], hp["clip_range"]
  adv, ret, old_v = (prep[k].reshape(-1) for k in ("advantages", "returns", "values"))
  mean, std, _ = ppo_policy(p["policy"], rollout["obs"], act)
  x = rollout["raw_action"].reshape(mean.shape)
  log_ratio = gaussian_log_prob(x, mean, std) - gaussian_log_prob(
      x, rollout["old_mean"].reshape(mean.shape), rollout["old_std"].reshape(mean.shape))
  ratio = np.exp(log_ratio)
  policy = -np.mean(np.minimum(ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv))
  v = ppo_value(p["value"], rollout["obs"], act)[0].reshape(-1)
  err = (ret - v) ** 2
  if hp["clip_value"]:
    err = np.maximum(err, (ret - old_v - np.clip(v - old_v, -eps, eps)) ** 2)
  entropy = np.sum(0.5 + 0.5 * LOG_2PI + np.log(std[0]))
  return float(policy + hp["value_coef"] * 0.5 * np.mean(err) - hp["entropy_coef"] * entropy)


def finite_difference_grads(loss: Callable, params, h: float = 1e-6):
  """Central differences of ``loss(params)`` in every element (float64)."""
  def grad_of(path_leaf):
    path, leaf = path_leaf
    g = np.zeros_like(leaf)
    for index in np.ndindex(leaf.shape):
      for sign in (1.0, -1.0):
        shifted = leaf.copy()
        shifted[index] += sign * h
        g[index] += sign * loss(_replace_at(params, path, shifted)) / (2 * h)
    return g
  return _map_with_path(grad_of, params)


def _map_with_path(fn, tree, path=()):
  if isinstance(tree, dict):
    return {k: _map_with_path(fn, v, path + (k,)) for k, v in tree.items()}
  return fn((path, np.asarray(tree, np.float64)))


def _replace_at(tree, path, value):
  if not path:
    return value
  return {k: (_replace_at(v, path[1:], value) if k == path[0] else v) for k, v in tree.items()}
