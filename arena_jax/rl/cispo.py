"""The CISPO policy-gradient loss (SPEC §2, MiniMax-M1).

    ρ_{i,t} = exp(log π_θ(o_{i,t}) − log π_old(o_{i,t}))        π_old recorded by the sampler
    ρ̂_{i,t} = clip(ρ_{i,t}, 1 − ε_low, 1 + ε_high)
    J(θ)    = 1/Σ_i|o_i| · Σ_i Σ_t sg(ρ̂_{i,t}) · Â_i · log π_θ(o_{i,t})

The IS weight is clipped and stopped, not the policy-gradient term, so every token keeps a gradient.
The loss is −J, returned as (sum, denominator) so that micro-batches and shards add up exactly: the
caller divides the summed sums by the summed denominators.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

AGGREGATIONS = ("token_mean", "seq_mean_token_mean")


class Weighted(NamedTuple):
  """A metric kept as (sum, count) so it can be accumulated exactly; its value is total/count."""

  total: jax.Array
  count: jax.Array


class CispoOutput(NamedTuple):
  loss_sum: jax.Array  # Σ of per-token (or per-sequence) loss terms
  denominator: jax.Array  # tokens (token_mean) or sequences (seq_mean_token_mean)
  metrics: dict  # name -> Weighted


def completion_mask(lengths, max_len: int):
  """mask [B, T]: 1 for the first `lengths[b]` completion tokens (EOS included), 0 after it."""
  return (jnp.arange(max_len)[None, :] < lengths[:, None]).astype(jnp.float32)


def cispo_loss(
  logprobs,
  old_logprobs,
  advantages,
  mask,
  *,
  eps_low: float = 1.0,
  eps_high: float = 4.0,
  aggregation: str = "token_mean",
  truncated=None,
  mask_truncated: bool = False,
  ref_logprobs=None,
  kl_coef: float = 0.0,
  entropy=None,
  stale=None,
) -> CispoOutput:
  """CISPO loss terms for a (micro-)batch of completions (SPEC §2).

  Args:
    logprobs: [B, T] log π_θ of the sampled tokens (differentiable).
    old_logprobs: [B, T] behaviour log-probs recorded by the sampler (treated as constants).
    advantages: [B] per-sequence Â (group advantages of the routed rewards).
    mask: [B, T] 1 for completion tokens that carry loss (padding / after EOS = 0).
    eps_low, eps_high: ρ̂ = clip(ρ, 1 − eps_low, 1 + eps_high); eps_low = 1 means no lower bound.
    aggregation: "token_mean" (the formula: Σ over all tokens / Σ|o_i|) or "seq_mean_token_mean".
    truncated, mask_truncated: [B] bool; when `mask_truncated`, truncated completions carry no loss.
    ref_logprobs, kl_coef: optional KL penalty β·KL(π_θ‖π_ref) per token (k3 estimator), default off.
    entropy: optional [B, T] per-token policy entropy, only reported.
    stale: optional [B, T] bool, the tokens sampled by an older policy than π_θ's (the asynchronous loop,
      `rollout.max_staleness`); only reported: `ratio_dev/stale` and `ratio_dev/fresh` are the mean |ρ − 1|
      over the stale and the fresh tokens (the importance weights that correct the staleness, SPEC §2).

  Returns:
    CispoOutput(loss_sum, denominator, metrics); the loss to minimise is loss_sum / denominator.
  """
  if aggregation not in AGGREGATIONS:
    raise ValueError(f"unknown CISPO aggregation {aggregation!r}; choose one of {AGGREGATIONS}")
  if not (0.0 <= eps_low <= 1.0) or eps_high < 0.0:
    raise ValueError(f"need 0 ≤ eps_low ≤ 1 and eps_high ≥ 0, got eps_low={eps_low}, eps_high={eps_high}")
  mask = mask.astype(logprobs.dtype)
  if mask_truncated and truncated is not None:
    mask = mask * (1.0 - truncated.astype(mask.dtype))[:, None]
  old_logprobs = jax.lax.stop_gradient(old_logprobs)
  log_ratio = jax.lax.stop_gradient(logprobs) - old_logprobs
  # Masked positions may hold anything (padding log-probs of 0 or -inf); keep them out of exp.
  ratio = jnp.exp(jnp.where(mask > 0, log_ratio, 0.0))
  clipped = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
  per_token = -clipped * advantages[:, None] * logprobs

  metrics = {}
  if ref_logprobs is not None:
    # k3 estimator of KL(π_θ‖π_ref): exp(ref − logp) − (ref − logp) − 1 ≥ 0, unbiased, low variance.
    delta = jnp.where(mask > 0, ref_logprobs - logprobs, 0.0)
    kl = jnp.exp(delta) - delta - 1.0
    per_token = per_token + kl_coef * kl
    metrics["kl"] = Weighted((kl * mask).sum(), mask.sum())
  per_token = jnp.where(mask > 0, per_token, 0.0)

  tokens = mask.sum()
  seq_len = mask.sum(-1)
  if aggregation == "token_mean":
    loss_sum, denominator = per_token.sum(), tokens
  else:
    has_tokens = seq_len > 0
    loss_sum = jnp.where(has_tokens, per_token.sum(-1) / jnp.maximum(seq_len, 1.0), 0.0).sum()
    denominator = has_tokens.sum().astype(logprobs.dtype)

  metrics["clip_fraction"] = Weighted(((ratio != clipped) * mask).sum(), tokens)
  metrics["ratio"] = Weighted((ratio * mask).sum(), tokens)
  metrics["response_length"] = Weighted(seq_len.sum(), jnp.asarray(seq_len.shape[0], logprobs.dtype))
  if entropy is not None:
    metrics["entropy"] = Weighted((entropy * mask).sum(), tokens)
  if stale is not None:
    old = stale.astype(mask.dtype) * mask
    dev = jnp.abs(ratio - 1.0)
    metrics["ratio_dev/stale"] = Weighted((dev * old).sum(), old.sum())
    metrics["ratio_dev/fresh"] = Weighted((dev * (mask - old)).sum(), tokens - old.sum())
    metrics["stale_token_share"] = Weighted(old.sum(), tokens)
  return CispoOutput(loss_sum, denominator, metrics)


def metric_values(metrics: dict) -> dict:
  """{name: total / count} for a dict of `Weighted` (count 0 → 0)."""
  return {k: jnp.where(m.count > 0, m.total / jnp.maximum(m.count, 1e-12), 0.0) for k, m in metrics.items()}
