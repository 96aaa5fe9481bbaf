"""The sampler's KV cache: a prompt part shared by a group, and completion chunks.

Layout, per layer (B prompts, G samples per prompt, R = B·G rows, K KV heads, H head dim):

  prompt_k [B, K, H, P], prompt_v [B, K, P, H]     written once by the prefill, shared by the G rows
                                                  of a group (never repeated: G× less memory and
                                                  reads for the prompt, which dominates in RL)
  k[c] [R, K, H, C], v[c] [R, K, C, H]            completion chunk c holds completion slots
                                                  [c·C, (c+1)·C); slot t is written at decode step t

Keys are stored transposed ([H, P] / [H, C]) so that q·kᵀ is a plain [G·r, H]·[H, S] product per
(prompt, KV head), reading the cache in its stored layout. A decode step that writes slot t in chunk
j reads only chunks 0 … j (the caller runs one while_loop per chunk, so j is static): decode is bound
by reading this cache from memory, and the unwritten tail is never read.

Row r = b·G + g. A completion slot t of row r has RoPE position prompt_lengths[b] + t.
"""

from __future__ import annotations

import math

import flax.struct
import jax
import jax.numpy as jnp

# Finite, so that a fully masked row softmaxes to uniform weights instead of NaN.
MASK_VALUE = -1e30


@flax.struct.dataclass
class KVCache:
  """Per-layer tuples (see the module docstring); `prompt_lengths` int32 [B]."""

  prompt_k: tuple[jax.Array, ...]
  prompt_v: tuple[jax.Array, ...]
  k: tuple[tuple[jax.Array, ...], ...]
  v: tuple[tuple[jax.Array, ...], ...]
  prompt_lengths: jax.Array

  @property
  def num_prompts(self) -> int:
    return self.prompt_k[0].shape[0]

  @property
  def num_rows(self) -> int:
    return self.k[0][0].shape[0]

  @property
  def group(self) -> int:
    return self.num_rows // self.num_prompts

  @property
  def chunk(self) -> int:
    return self.k[0][0].shape[-1]

  @property
  def num_chunks(self) -> int:
    return len(self.k[0])

  @property
  def prompt_bucket(self) -> int:
    return self.prompt_k[0].shape[-1]

  @property
  def nbytes(self) -> int:
    """Bytes of keys and values over all layers (prompt part and completion chunks; global, not per
    device), read from the shapes: also of an abstract cache (`jax.eval_shape`)."""
    chunks = [x for layer in (*self.k, *self.v) for x in layer]
    return sum(math.prod(x.shape) * jnp.dtype(x.dtype).itemsize for x in (*self.prompt_k, *self.prompt_v, *chunks))

  def row_prompt_lengths(self) -> jax.Array:
    return jnp.repeat(self.prompt_lengths, self.group, axis=0, total_repeat_length=self.num_rows)


def init_cache(prompt_kv, prompt_lengths: jax.Array, group: int, num_chunks: int, chunk: int, dtype) -> KVCache:
  """A cache from the prefill's per-layer (k [B, K, P, H], v [B, K, P, H]) and empty chunks."""
  b, kh, _, h = prompt_kv[0][0].shape
  rows = b * group
  zeros_k = jnp.zeros((rows, kh, h, chunk), dtype)
  zeros_v = jnp.zeros((rows, kh, chunk, h), dtype)
  return KVCache(
    prompt_k=tuple(k.astype(dtype).transpose(0, 1, 3, 2) for k, _ in prompt_kv),
    prompt_v=tuple(v.astype(dtype) for _, v in prompt_kv),
    k=tuple((zeros_k,) * num_chunks for _ in prompt_kv),
    v=tuple((zeros_v,) * num_chunks for _ in prompt_kv),
    prompt_lengths=prompt_lengths.astype(jnp.int32),
  )


def write(chunk_k: jax.Array, chunk_v: jax.Array, k: jax.Array, v: jax.Array, local: jax.Array):
  """Writes k, v [R, K, H] at slot `local` of one chunk (one in-place dynamic_update_slice each)."""
  chunk_k = jax.lax.dynamic_update_slice(chunk_k, k[..., None].astype(chunk_k.dtype), (0, 0, 0, local))
  chunk_v = jax.lax.dynamic_update_slice(chunk_v, v[:, :, None, :].astype(chunk_v.dtype), (0, 0, local, 0))
  return chunk_k, chunk_v


def attend_cached(
  q: jax.Array, prompt_k: jax.Array, prompt_v: jax.Array, ks, vs, prompt_mask: jax.Array, chunk_mask: jax.Array
) -> jax.Array:
  """One query per row against the shared prompt part and the first len(ks) completion chunks.

  Args:
    q: [R, K, r, H] (scaled, rotated).
    prompt_k, prompt_v: [B, K, H, P], [B, K, P, H].
    ks, vs: sequences of [R, K, H, C], [R, K, C, H].
    prompt_mask: bool [R, P].
    chunk_mask: bool [R, len(ks)·C] (or broadcastable to it).

  Returns:
    [R, K·r, H]; softmax over the concatenated scores in float32.
  """
  rows, kh, r, h = q.shape
  b, p = prompt_k.shape[0], prompt_k.shape[-1]
  g = rows // b
  dt = q.dtype
  if g == 1:
    s_prompt = jnp.einsum("nkrh,nkhp->nkrp", q, prompt_k.astype(dt), preferred_element_type=jnp.float32)
  else:  # the G queries of a group share one read of their prompt's keys
    qg = q.reshape(b, g, kh, r, h)
    s_prompt = jnp.einsum("bgkrh,bkhp->bgkrp", qg, prompt_k.astype(dt), preferred_element_type=jnp.float32)
    s_prompt = s_prompt.reshape(rows, kh, r, p)
  s_chunks = [jnp.einsum("nkrh,nkhc->nkrc", q, k.astype(dt), preferred_element_type=jnp.float32) for k in ks]
  scores = jnp.concatenate([s_prompt] + s_chunks, axis=-1)
  mask = jnp.concatenate([prompt_mask, jnp.broadcast_to(chunk_mask, (rows, chunk_mask.shape[-1]))], axis=-1)
  probs = jax.nn.softmax(jnp.where(mask[:, None, None, :], scores, MASK_VALUE), axis=-1).astype(prompt_v.dtype)
  p_prompt = probs[..., :p]
  if g == 1:
    out = jnp.einsum("nkrp,nkph->nkrh", p_prompt, prompt_v)
  else:
    out = jnp.einsum("bgkrp,bkph->bgkrh", p_prompt.reshape(b, g, kh, r, p), prompt_v).reshape(rows, kh, r, h)
  c = ks[0].shape[-1] if ks else 0
  for i, v in enumerate(vs):
    out = out + jnp.einsum("nkrc,nkch->nkrh", probs[..., p + i * c : p + (i + 1) * c], v)
  return out.reshape(rows, kh * r, h)
