"""Group-relative advantages and the per-group reward router (SPEC §1, §3, §5).

All functions are pure jnp and jittable; the group axis is the last axis ([..., G]).
"""

from __future__ import annotations

import jax.numpy as jnp

EPS_STD = 1e-6
DIVERSITY_THRESHOLD = 1e-8  # σ²_G > this ⇔ the group is reward-diverse (SPEC §1)


def reward_variance(rewards, *, ddof: int = 0):
  """Var_j(r_j) per group (population variance by default)."""
  g = rewards.shape[-1]
  mean = rewards.mean(-1, keepdims=True)
  return ((rewards - mean) ** 2).sum(-1) / max(g - ddof, 1)


def is_diverse(rewards, *, threshold: float = DIVERSITY_THRESHOLD):
  """diverse[...] = Var_j(r_j) > threshold: the group carries a learning signal (SPEC §1)."""
  return reward_variance(rewards) > threshold


def group_advantages(
  rewards, *, eps: float = EPS_STD, ddof: int = 0, threshold: float = DIVERSITY_THRESHOLD, valid=None
):
  """Â_i = (r_i − mean_j r_j) / (std_j r_j + ε) within each group (SPEC §1).

  A non-diverse group gets exactly 0 (not rounding noise divided by ε: equal rewards such as 0.1 can
  average to a value a few ulps away from 0.1, and that error over ε would be a spurious signal).
  `valid` [..., G] (optional): only those members enter the group's mean and std (j ranges over them,
  std with n_valid − ddof); the others get Â = 0 and their reward is never read (it may be NaN).
  """
  if valid is None:
    mean = rewards.mean(-1, keepdims=True)
    std = jnp.sqrt(reward_variance(rewards, ddof=ddof))[..., None]
    adv = (rewards - mean) / (std + eps)
    return jnp.where(is_diverse(rewards, threshold=threshold)[..., None], adv, 0.0)
  r = jnp.where(valid, rewards, 0.0)
  n = valid.sum(-1, keepdims=True)
  mean = r.sum(-1, keepdims=True) / jnp.maximum(n, 1)
  var = jnp.where(valid, (r - mean) ** 2, 0.0).sum(-1, keepdims=True) / jnp.maximum(n - ddof, 1)
  adv = jnp.where(valid, (r - mean) / (jnp.sqrt(var) + eps), 0.0)
  return jnp.where((var > threshold) & (n - ddof > 0), adv, 0.0)


def route_rewards(verifier_rewards, judge_rewards, *, threshold: float = DIVERSITY_THRESHOLD):
  """The adaptive router of Reasoning Arena (SPEC §3), a masked per-group select.

  r̃ = r_verifier for groups whose verifier rewards vary, r_judge otherwise. The judge rewards of
  diverse groups are never read (they may hold anything, NaN included).

  Returns:
    (routed rewards [..., G], diverse [...] bool).
  """
  diverse = is_diverse(verifier_rewards, threshold=threshold)
  return jnp.where(diverse[..., None], verifier_rewards, judge_rewards), diverse


def rank_quantile_advantages(ranking, *, eps: float = EPS_STD, ddof: int = 0):
  """ArenaRL's tournament advantage (SPEC §5): r_i = 1 − rank_i/(G − 1), z-scored within the group.

  `ranking` [..., G] has rank 0 for the best trajectory (ties may share a fractional rank).
  """
  g = ranking.shape[-1]
  r = 1.0 - ranking / max(g - 1, 1)
  return group_advantages(r, eps=eps, ddof=ddof)
