"""Teacher-forced per-token log-probs of completions under the policy (the π_θ of SPEC §2's CISPO loss).

    log π_θ(o_t | x, o_<t) = z_t[o_t] / T − logsumexp(z_t / T),   z_t = the logits that predict o_t

Inputs are the sampler's outputs (`arena_jax.sampling.SampleOutput`): prompts right-padded to P, then
the completion. The padding is masked out and completion token t sits at RoPE position len(x) + t, as
in the sampler; it is predicted from the hidden state of the previous token (the last real prompt
token for t = 0), so these log-probs equal the sampler's behaviour log-probs for the same params and
T up to float rounding.

With a kernel (`models.attention`: splash, cudnn) the row is laid out as one contiguous sequence instead,
[prompt | completion | padding] at positions 0 …, since the kernels count a sliding window in indices.

Memory: only the N completion positions reach the output projection, in chunks of C positions whose
[B, C, V] logits are rematerialised in the backward pass (`jax.checkpoint`), so peak memory holds one
chunk of logits, not [B, P + N, V].

Packed rows (`packed_token_logprobs`, `train.packing`): the same log-probs from rows that hold several
[prompt | completion] sequences end to end, each a segment at positions 0, 1, …; the forward pass costs the
packed slots only, and the log-probs are gathered back to the [B, N] layout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from arena_jax.models.attention import resolve_attention

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
  if resolve_attention(model.config.attention) == "xla":
    # [prompt, right-padded to P | completion]: the reference layout (its window counts RoPE positions).
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
  else:
    # The kernels count windows in indices: [prompt | completion | padding], each row one contiguous
    # sequence at positions 0 … (a packed row holding one sequence, `train.packing`).
    i = jnp.arange(p + n, dtype=jnp.int32)[None, :]
    source = jnp.where(i < prompt_lengths[:, None], i, jnp.minimum(p + i - prompt_lengths[:, None], p + n - 1))
    in_completion = (i >= prompt_lengths[:, None]) & (i - prompt_lengths[:, None] < n)
    cm = jnp.take_along_axis(completion_mask, jnp.clip(i - prompt_lengths[:, None], 0, n - 1), axis=1)
    valid = (i < prompt_lengths[:, None]) | (in_completion & cm)
    h = model.hidden(
      jnp.take_along_axis(tokens, source, axis=1),
      jnp.broadcast_to(i, (b, p + n)),
      segment_ids=valid.astype(jnp.int32),
    )
    prev = prompt_lengths[:, None] - 1 + jnp.arange(n, dtype=jnp.int32)[None, :]
  h_prev = jnp.take_along_axis(h, prev[:, :, None], axis=1)
  w = model.output_projection()
  lp, ent = chunked_logprobs(h_prev, w, completion_tokens.astype(jnp.int32), temperature, chunk_size, return_entropy)
  lp = jnp.where(completion_mask, lp, 0.0)
  if return_entropy:
    return lp, jnp.where(completion_mask, ent, 0.0)
  return lp


def packed_token_logprobs(
  model,
  tokens: jax.Array,
  positions: jax.Array,
  segment_ids: jax.Array,
  row: jax.Array,
  start: jax.Array,
  completion_mask: jax.Array,
  *,
  temperature: float = 1.0,
  chunk_size: int | None = None,
  return_entropy: bool = False,
):
  """`token_logprobs` of completions packed several to a row (`train.packing`): the same log-probs as on
  their padded rows, up to float rounding, from a forward pass over the packed rows only.

  Args:
    model: a `Transformer`.
    tokens, positions, segment_ids: int [K, Rb, L]: K blocks of Rb packed rows, each sequence a segment at
      positions 0, 1, … (segment 0: padding).
    row, start: int [K, Q]: completion q of block k lies in that block's packed row `row[k, q]`; the state
      that predicts its token t is at slot `start[k, q] + t`.
    completion_mask: bool [K, Q, N] the completion tokens that carry loss.
    temperature, chunk_size, return_entropy: as `token_logprobs`.

  Returns:
    float32 [K, Q, N] log-probs (0 where masked), and the entropy if asked.
  """
  k, rb, length = tokens.shape
  q, n = completion_mask.shape[1:]
  flat = lambda x: x.reshape(k * rb, length).astype(jnp.int32)
  packed = flat(tokens)
  h = model.hidden(packed, flat(positions), segment_ids=flat(segment_ids))
  # Slot i predicts slot i + 1's token (across a segment's end that prediction is never read).
  targets = jnp.concatenate([packed[:, 1:], jnp.zeros((k * rb, 1), jnp.int32)], axis=1)
  # The predicting slot of every completion token, in its block: the gathers below run per block, and a block
  # lives on one batch shard (`train.packing`), so they stay local.
  slot = jnp.minimum(start[..., None] + jnp.arange(n, dtype=jnp.int32), length - 1)
  index = (row[..., None] * length + slot).reshape(k, q * n)
  back = lambda x: jnp.take_along_axis(
    x.reshape((k, rb * length) + x.shape[2:]), index.reshape((k, q * n) + (1,) * (x.ndim - 2)), axis=1
  )
  w = model.output_projection()
  if k * rb * length <= k * q * n:
    # Fewer packed slots than completion slots: project every packed slot (each a [C, V] chunk at a time),
    # then gather the log-probs.
    lp, ent = chunked_logprobs(h, w, targets, temperature, chunk_size, return_entropy)
    lp = back(lp).reshape(k, q, n)
    ent = back(ent).reshape(k, q, n) if return_entropy else None
  else:
    # Long prompts: fewer completion slots than packed ones; gather the predicting states first.
    hq = back(h).reshape(k * q, n, -1)
    lp, ent = chunked_logprobs(hq, w, back(targets).reshape(k * q, n), temperature, chunk_size, return_entropy)
    lp = lp.reshape(k, q, n)
    ent = ent.reshape(k, q, n) if return_entropy else None
  mask = completion_mask.astype(bool)
  lp = jnp.where(mask, lp, 0.0)
  if return_entropy:
    return lp, jnp.where(mask, ent, 0.0)
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
