"""Teacher-forced per-token log-probs of completions under the policy (the π_θ of SPEC §2's CISPO loss).

    log π_θ(o_t | x, o_<t) = z_t[o_t] / T − logsumexp(z_t / T),   z_t = the logits that predict o_t

Inputs are the sampler's outputs (`arena_jax.sampling.SampleOutput`): prompts right-padded to P, then
the completion. The padding is masked out and completion token t sits at RoPE position len(x) + t, as
in the sampler; it is predicted from the hidden state of the previous token (the last real prompt
token for t = 0), so these log-probs equal the sampler's behaviour log-probs for the same params and
T up to float rounding.

Memory: only the N completion positions reach the output projection, in chunks of C positions whose
[B, C, V] logits are rematerialised in the backward pass (`jax.checkpoint`), so peak memory holds one
chunk of logits, not [B, P + N, V].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# Target size of one chunk of float32 logits, in elements (64 MiB).
_CHUNK_ELEMENTS = 1 << 24


def token_logprobs(
  model,
  prompt_tokens: jax.Array,
  prompt_lengths: jax.Array,
  completion_tokens: jax.Array,
  completion_mask: jax.Array | None = None,
  *,
  temperature: float = 1.0,
  chunk_size: int | None = None,
  return_entropy: bool = False,
):
  """Per-token log-probs of `completion_tokens` given the prompts.

  Args:
    model: a `Transformer`.
    prompt_tokens: int [B, P] prompts, right-padded (rows of a group repeat their prompt).
    prompt_lengths: int [B] real prompt lengths (≥ 1).
    completion_tokens: int [B, N].
    completion_mask: bool [B, N] real completion tokens (default all); masked positions neither
      attend nor are attended to, and get log-prob 0.
    temperature: T of the distribution (use the sampler's `logprob_temperature`).
    chunk_size: completion positions per output-projection chunk (default: ~64 MiB of logits).
    return_entropy: also return the entropy [B, N] of softmax(z_t / T).

  Returns:
    float32 [B, N] log-probs (0 where masked), and the entropy if asked.
  """
  b, p = prompt_tokens.shape
  n = completion_tokens.shape[1]
  if completion_mask is None:
    completion_mask = jnp.ones((b, n), bool)
  completion_mask = completion_mask.astype(bool)
  prompt_lengths = prompt_lengths.astype(jnp.int32)
  tokens = jnp.concatenate([prompt_tokens, completion_tokens], axis=1).astype(jnp.int32)
  valid = jnp.concatenate([jnp.arange(p)[None, :] < prompt_lengths[:, None], completion_mask], axis=1)
  positions = jnp.concatenate(
    [
      jnp.broadcast_to(jnp.arange(p, dtype=jnp.int32), (b, p)),
      prompt_lengths[:, None] + jnp.arange(n, dtype=jnp.int32)[None, :],
    ],
    axis=1,
  )
  h = model.hidden(tokens, positions, valid)
  # The state that predicts completion token t: the last prompt token for t = 0, else slot P + t − 1.
  prev = jnp.concatenate([prompt_lengths[:, None] - 1, jnp.broadcast_to(p + jnp.arange(n - 1), (b, n - 1))], axis=1)
  h_prev = jnp.take_along_axis(h, prev[:, :, None], axis=1)
  w = model.output_projection()
  lp, ent = chunked_logprobs(h_prev, w, completion_tokens.astype(jnp.int32), temperature, chunk_size, return_entropy)
  lp = jnp.where(completion_mask, lp, 0.0)
  if return_entropy:
    return lp, jnp.where(completion_mask, ent, 0.0)
  return lp


def chunked_logprobs(
  h: jax.Array,
  w: jax.Array,
  targets: jax.Array,
  temperature: float = 1.0,
  chunk_size: int | None = None,
  return_entropy: bool = False,
):
  """log softmax(h·w / T)[targets] for h [B, N, D], w [D, V], targets [B, N], chunked over N.

  Returns (log-probs [B, N], entropy [B, N] or None), float32.
  """
  b, n, _ = h.shape
  v = w.shape[-1]
  if chunk_size is None:
    chunk_size = max(1, _CHUNK_ELEMENTS // max(1, b * v))
  chunk = min(chunk_size, n)
  chunks = -(-n // chunk)
  pad = chunks * chunk - n

  @jax.checkpoint
  def one(hc, tc):
    logits = jnp.einsum("bcd,dv->bcv", hc, w.astype(hc.dtype), preferred_element_type=jnp.float32)
    logits = logits / temperature
    lse = jax.nn.logsumexp(logits, axis=-1)
    lp = jnp.take_along_axis(logits, tc[..., None], axis=-1)[..., 0] - lse
    if not return_entropy:
      return lp, jnp.zeros_like(lp)
    probs = jnp.exp(logits - lse[..., None])
    return lp, lse - jnp.sum(probs * logits, axis=-1)

  if chunks == 1:
    lp, ent = one(h, targets)
  else:
    hp = jnp.pad(h, ((0, 0), (0, pad), (0, 0))).reshape(b, chunks, chunk, -1).swapaxes(0, 1)
    tp = jnp.pad(targets, ((0, 0), (0, pad))).reshape(b, chunks, chunk).swapaxes(0, 1)
    lp, ent = jax.lax.map(lambda args: one(*args), (hp, tp))
    lp = lp.swapaxes(0, 1).reshape(b, -1)[:, :n]
    ent = ent.swapaxes(0, 1).reshape(b, -1)[:, :n]
  return lp, (ent if return_entropy else None)
