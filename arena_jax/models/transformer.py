"""A Flax NNX decoder-only transformer of the Llama / Mistral / Qwen2 / Qwen3 family.

Block (pre-norm, as transformers' `LlamaDecoderLayer`):

    h = x + Attention(RMSNorm(x));   y = h + SwiGLU(RMSNorm(h))
    RMSNorm(x) = x / √(mean(x²) + ε) · g                     (normalised in float32)
    SwiGLU(x)  = W_down (silu(W_gate x) ⊙ W_up x)
    Attention  = softmax(q kᵀ / √d_head + mask) v, grouped-query: num_heads/num_kv_heads query heads per KV head

RoPE uses transformers' "rotate_half" layout (the two halves of a head, not interleaved pairs):
q' = q·cos + rotate_half(q)·sin with rotate_half([a, b]) = [−b, a], angles p·θ_i on both halves, so
HF checkpoints load without permuting q/k. Qwen3's QK-norm is an RMSNorm over the head dimension
before RoPE; Mistral's sliding window limits a query at position p to keys at positions > p − window.

Parameters carry logical axis names (`out_sharding` metadata, see `sharding.py`). Cached decoding
(`prefill`, `decode`) uses `kv_cache.KVCache`: the prompt stored once per group, completions in chunks.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax

from arena_jax.models import attention as attention_lib
from arena_jax.models import kv_cache
from arena_jax.models.config import REMAT_POLICIES, ModelConfig, rope_frequencies

KVCache = kv_cache.KVCache
attend = attention_lib.attend  # the xla reference (`models.attention`)


def _dtype(name: str):
  return jnp.dtype(name)


def _param(rngs: nnx.Rngs, init, shape, names, dtype) -> nnx.Param:
  # eager_sharding=False: the names are logical; they become mesh axes only through the rules.
  return nnx.Param(init(rngs.params(), shape, dtype), out_sharding=tuple(names), eager_sharding=False)


def matmul(x: jax.Array, w: jax.Array) -> jax.Array:
  """x [M, K] · w [K, N], in x's dtype. Called as `jax.lax.dot_general` by its public name: a train step
  with `ModelConfig.quantization` (`models.quantization`) intercepts exactly these calls, the projections
  and the MLP, and leaves attention's einsums and the output projection alone."""
  return jax.lax.dot_general(x, w, (((1,), (0,)), ((), ())))


def _lecun(fan_in: int):
  return jax.nn.initializers.normal(stddev=fan_in**-0.5)


class RMSNorm(nnx.Module):
  """y = x / √(mean(x²) + ε) · g, in float32 (transformers' `LlamaRMSNorm`)."""

  def __init__(self, dim: int, eps: float, name: str, param_dtype, *, rngs: nnx.Rngs):
    self.eps = eps
    self.scale = _param(rngs, jax.nn.initializers.ones, (dim,), (name,), param_dtype)

  def __call__(self, x: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    y = x32 * lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    return y.astype(x.dtype) * self.scale[...].astype(x.dtype)


def rope_tables(positions: jax.Array, inv_freq: jax.Array, attention_factor: float = 1.0):
  """(cos, sin), each float32 [..., H/2], of the angles position·θ_i (computed once per forward)."""
  angles = positions.astype(jnp.float32)[..., None] * inv_freq
  return jnp.cos(angles) * attention_factor, jnp.sin(angles) * attention_factor


def apply_rope(x: jax.Array, rope: tuple[jax.Array, ...]) -> jax.Array:
  """Rotary embedding in the rotate_half layout: x [..., heads, H], rope = (cos, sin) [..., H/2] (a third
  entry, the query scale of `Transformer.rope`, is not read here)."""
  cos, sin = (t[..., None, :] for t in rope[:2])
  x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
  out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
  return out.astype(x.dtype)


class Attention(nnx.Module):
  """Grouped-query self-attention with RoPE, optional QK-norm, q/k/v biases and an o bias."""

  def __init__(self, config: ModelConfig, layer: int, *, rngs: nnx.Rngs):
    c = config
    pd = _dtype(c.param_dtype)
    d, n, k, h = c.d_model, c.num_heads, c.num_kv_heads, c.head_dim
    self.window = c.layer_window(layer)
    self.q_proj = _param(rngs, _lecun(d), (d, n, h), ("embed", "heads", "head_dim"), pd)
    self.k_proj = _param(rngs, _lecun(d), (d, k, h), ("embed", "kv_heads", "head_dim"), pd)
    self.v_proj = _param(rngs, _lecun(d), (d, k, h), ("embed", "kv_heads", "head_dim"), pd)
    self.o_proj = _param(rngs, _lecun(n * h), (n, h, d), ("heads", "head_dim", "embed"), pd)
    zeros = jax.nn.initializers.zeros
    if c.attention_bias or c.qkv_bias:  # qkv_bias: Qwen2's q/k/v biases without an o bias
      self.q_bias = _param(rngs, zeros, (n, h), ("heads", "head_dim"), pd)
      self.k_bias = _param(rngs, zeros, (k, h), ("kv_heads", "head_dim"), pd)
      self.v_bias = _param(rngs, zeros, (k, h), ("kv_heads", "head_dim"), pd)
    else:
      self.q_bias = self.k_bias = self.v_bias = None
    self.o_bias = _param(rngs, zeros, (d,), ("embed",), pd) if c.attention_bias else None
    if c.qk_norm:
      self.q_norm = RMSNorm(h, c.rms_norm_eps, "head_dim", pd, rngs=rngs)
      self.k_norm = RMSNorm(h, c.rms_norm_eps, "head_dim", pd, rngs=rngs)
    else:
      self.q_norm = self.k_norm = None
    self.num_kv_heads, self.num_groups, self.head_dim = k, c.num_groups, h

  def project(self, x: jax.Array):
    """q [..., N, H], k and v [..., K, H] (no RoPE yet), as 2-D matmuls over the flattened batch."""
    dt = x.dtype
    lead = x.shape[:-1]
    n, k, h = self.q_proj.shape[1], self.num_kv_heads, self.head_dim
    x2 = x.reshape(-1, x.shape[-1])
    wq = self.q_proj[...].astype(dt).reshape(-1, n * h)
    wk = self.k_proj[...].astype(dt).reshape(-1, k * h)
    wv = self.v_proj[...].astype(dt).reshape(-1, k * h)
    q, kk, v = matmul(x2, wq), matmul(x2, wk), matmul(x2, wv)
    q, kk, v = q.reshape(lead + (n, h)), kk.reshape(lead + (k, h)), v.reshape(lead + (k, h))
    if self.q_bias is not None:
      q = q + self.q_bias[...].astype(dt)
      kk = kk + self.k_bias[...].astype(dt)
      v = v + self.v_bias[...].astype(dt)
    if self.q_norm is not None:
      q, kk = self.q_norm(q), self.k_norm(kk)
    return q, kk, v

  def qkv(self, x: jax.Array, rope: tuple[jax.Array, jax.Array]):
    """q [..., K, R, H] (rotated, scaled by 1/√H), k and v [..., K, H] (k rotated); x [..., D]."""
    q, k, v = self.project(x)
    q = apply_rope(q, rope) * jnp.asarray(self.head_dim**-0.5, x.dtype)
    if len(rope) == 3:  # Llama-4 attention scaling: a per-position factor on the rotated queries
      q = q * rope[2][..., None, None].astype(x.dtype)
    k = apply_rope(k, rope)
    return q.reshape(q.shape[:-2] + (self.num_kv_heads, self.num_groups, self.head_dim)), k, v

  def out(self, o: jax.Array) -> jax.Array:
    """o [..., N, H] → [..., D]."""
    w = self.o_proj[...].astype(o.dtype)
    y = matmul(o.reshape(-1, w.shape[0] * w.shape[1]), w.reshape(-1, w.shape[-1]))  # 2-D, as in `project`
    if self.o_bias is not None:
      y = y + self.o_bias[...].astype(o.dtype)
    return y.reshape(o.shape[:-2] + (y.shape[-1],))


class MLP(nnx.Module):
  """SwiGLU: W_down (silu(W_gate x) ⊙ W_up x)."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    c = config
    pd = _dtype(c.param_dtype)
    d, f = c.d_model, c.mlp_dim
    self.gate_proj = _param(rngs, _lecun(d), (d, f), ("embed", "mlp"), pd)
    self.up_proj = _param(rngs, _lecun(d), (d, f), ("embed", "mlp"), pd)
    self.down_proj = _param(rngs, _lecun(f), (f, d), ("mlp", "embed"), pd)
    if c.mlp_bias:
      zeros = jax.nn.initializers.zeros
      self.gate_bias = _param(rngs, zeros, (f,), ("mlp",), pd)
      self.up_bias = _param(rngs, zeros, (f,), ("mlp",), pd)
      self.down_bias = _param(rngs, zeros, (d,), ("embed",), pd)
    else:
      self.gate_bias = self.up_bias = self.down_bias = None

  def __call__(self, x: jax.Array) -> jax.Array:
    dt = x.dtype
    # 2-D matmuls over the flattened batch, as in `Attention.project`: with [B, T, D] operands XLA:CPU
    # transposes the SwiGLU gradient for the weight gradients in a slow fused copy, which made this
    # block's forward + backward 1.5× slower (benchmarks/train_step.py's wider model).
    x2 = x.reshape(-1, x.shape[-1])
    gate, up = matmul(x2, self.gate_proj[...].astype(dt)), matmul(x2, self.up_proj[...].astype(dt))
    if self.gate_bias is not None:
      gate, up = gate + self.gate_bias[...].astype(dt), up + self.up_bias[...].astype(dt)
    y = matmul(jax.nn.silu(gate) * up, self.down_proj[...].astype(dt))
    if self.down_bias is not None:
      y = y + self.down_bias[...].astype(dt)
    return y.reshape(x.shape[:-1] + (y.shape[-1],))


class Block(nnx.Module):
  """Pre-norm decoder block."""

  def __init__(self, config: ModelConfig, layer: int, *, rngs: nnx.Rngs):
    pd = _dtype(config.param_dtype)
    self.input_norm = RMSNorm(config.d_model, config.rms_norm_eps, "norm", pd, rngs=rngs)
    self.attn = Attention(config, layer, rngs=rngs)
    self.post_attention_norm = RMSNorm(config.d_model, config.rms_norm_eps, "norm", pd, rngs=rngs)
    self.mlp = MLP(config, rngs=rngs)
    self.attention = config.attention

  def __call__(self, x, positions, rope, valid=None, segment_ids=None, lengths=None):
    """Self-attention over x's own tokens (`models.attention`): x [B, T, D], positions [B, T]; valid [B, T]
    or segment_ids [B, T] say which keys a query sees (causal in indices); lengths [B] is the kernels' hint
    that each row is one sequence.

    Returns (y, (k, v)) with k, v [B, K, T, H], for a caller that caches them.
    """
    q, k, v = self.attn.qkv(self.input_norm(x), rope)
    k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    o = attention_lib.full_attention(
      q,
      k,
      v,
      impl=self.attention,
      positions=positions,
      valid=valid,
      segment_ids=segment_ids,
      lengths=lengths,
      window=self.attn.window,
    )
    h = x + self.attn.out(o)
    return h + self.mlp(self.post_attention_norm(h)), (k, v)

  def decode(self, x, rope, prompt_k, prompt_v, ks, vs, local, prompt_mask, chunk_mask):
    """One new token per row, x [R, D], against the cache (see `kv_cache`).

    Its k, v are written at slot `local` of the last chunk of `ks`/`vs` (the chunks read this step);
    the masks [R, P] and [R or 1, len(ks)·C] already include the sliding window.
    Returns (y [R, D], (updated ks, updated vs)).
    """
    q, k, v = self.attn.qkv(self.input_norm(x), rope)
    last_k, last_v = kv_cache.write(ks[-1], vs[-1], k, v, local)
    ks, vs = tuple(ks[:-1]) + (last_k,), tuple(vs[:-1]) + (last_v,)
    h = x + self.attn.out(kv_cache.attend_cached(q, prompt_k, prompt_v, ks, vs, prompt_mask, chunk_mask))
    return h + self.mlp(self.post_attention_norm(h)), (ks, vs)


class Transformer(nnx.Module):
  """Decoder-only LM. `model(tokens [B, T])` → logits [B, T, V] (float32), causal attention (`models.attention`).

  The sampler uses `prefill` and `decode`; the loss uses `hidden` and `output_projection`
  (see `token_logprobs`).
  """

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    self.config = config
    c = config
    pd = _dtype(c.param_dtype)
    std = c.init_std if c.init_std is not None else c.d_model**-0.5
    self.embedding = _param(
      rngs, jax.nn.initializers.normal(stddev=std), (c.vocab_size, c.d_model), ("vocab", "embed"), pd
    )
    self.layers = nnx.List([Block(c, i, rngs=rngs) for i in range(c.num_layers)])
    self.final_norm = RMSNorm(c.d_model, c.rms_norm_eps, "norm", pd, rngs=rngs)
    if c.tie_embeddings:
      self.lm_head = None
    else:
      self.lm_head = _param(rngs, _lecun(c.d_model), (c.d_model, c.vocab_size), ("embed", "vocab"), pd)

  # ── pieces ──

  def rope(self, positions: jax.Array) -> tuple[jax.Array, ...]:
    """RoPE (cos, sin) tables [..., H/2] for integer positions; with Llama-4 attention scaling
    (`query_scale_beta`), also the query scale 1 + β·log(1 + ⌊p / query_scale_length⌋) [...]."""
    c = self.config
    inv_freq, factor = rope_frequencies(c)
    tables = rope_tables(positions, jnp.asarray(inv_freq), factor)
    if c.query_scale_beta is None:
      return tables
    blocks = jnp.floor(positions.astype(jnp.float32) / c.query_scale_length)
    return tables + (1.0 + c.query_scale_beta * jnp.log1p(blocks),)

  def embed(self, tokens: jax.Array) -> jax.Array:
    return jnp.take(self.embedding[...], tokens, axis=0).astype(_dtype(self.config.dtype))

  def output_projection(self) -> jax.Array:
    """[D, V]: the lm head (the transposed embedding when tied)."""
    if self.lm_head is None:
      return self.embedding[...].T
    return self.lm_head[...]

  def logits(self, h: jax.Array) -> jax.Array:
    """float32 logits from final hidden states [..., D]."""
    w = self.output_projection().astype(h.dtype)
    return jnp.einsum("...d,dv->...v", h, w, preferred_element_type=jnp.float32)

  # ── full-sequence forward (training, scoring, parity) ──

  def hidden(
    self,
    tokens: jax.Array,
    positions: jax.Array | None = None,
    valid: jax.Array | None = None,
    *,
    segment_ids: jax.Array | None = None,
    lengths: jax.Array | None = None,
    return_kv: bool = False,
  ):
    """Final (normed) hidden states [B, T, D] under causal attention (`models.attention`).

    Args:
      tokens: int [B, T].
      positions: int [B, T] RoPE positions (default 0..T−1).
      valid: bool [B, T]; invalid tokens are never attended to (their own outputs are meaningless).
      segment_ids: int [B, T], instead of `valid`: packed rows, a query sees only its own segment's keys
        (`train.packing`; positions restart per segment).
      lengths: int [B]: row b is one sequence in [0, lengths[b]) then padding (the kernels' hint; the
        prefill).
      return_kv: also return each layer's (k, v) [B, K, T, H] (prefill).
    """
    b, t = tokens.shape
    if positions is None:
      positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
    rope = self.rope(positions)
    x = self.embed(tokens)
    kvs = []
    run = _remat_block(self.config.remat)
    for block in self.layers:
      x, kv = run(block, x, positions, rope, valid, segment_ids, lengths)
      kvs.append(kv)
    h = self.final_norm(x)
    return (h, tuple(kvs)) if return_kv else h

  def __call__(
    self, tokens: jax.Array, positions: jax.Array | None = None, valid: jax.Array | None = None
  ) -> jax.Array:
    return self.logits(self.hidden(tokens, positions, valid))

  # ── cached inference (sampler) ──

  def prefill(
    self,
    tokens: jax.Array,
    lengths: jax.Array,
    *,
    group: int = 1,
    num_chunks: int = 1,
    chunk: int = 16,
    cache_dtype=None,
  ) -> tuple[jax.Array, kv_cache.KVCache]:
    """Runs right-padded prompts: (logits at each prompt's last token [B, V], a fresh `KVCache`).

    tokens [B, P] hold prompt b in [0, lengths[b]). The cache keeps the prompt once per prompt and
    `num_chunks` empty completion chunks of `chunk` slots for each of the B·`group` rows.
    """
    b, p = tokens.shape
    valid = jnp.arange(p)[None, :] < lengths[:, None]
    h, kvs = self.hidden(tokens, None, valid, lengths=lengths, return_kv=True)
    last = jnp.take_along_axis(h, jnp.maximum(lengths - 1, 0)[:, None, None], axis=1)[:, 0]
    cache = kv_cache.init_cache(kvs, lengths, group, num_chunks, chunk, cache_dtype or _dtype(self.config.dtype))
    return self.logits(last), cache

  def decode(
    self, tokens: jax.Array, slot: jax.Array, cache: kv_cache.KVCache, read_chunks: int
  ) -> tuple[jax.Array, kv_cache.KVCache]:
    """One decode step: tokens [R] go to completion slot `slot` (a traced scalar, the same for every
    row) at RoPE positions prompt_length + slot; they attend to their prompt and to completion slots
    0 … slot. The slot must lie in chunk `read_chunks` − 1 (static): chunks after it are not read.

    Returns (logits [R, V], the updated cache).
    """
    c, p = cache.chunk, cache.prompt_bucket
    span = read_chunks * c
    lengths = cache.row_prompt_lengths()
    positions = lengths + slot
    x = self.embed(tokens)
    rope = self.rope(positions)
    prompt_mask = jnp.arange(p)[None, :] < lengths[:, None]
    chunk_mask = (jnp.arange(span) <= slot)[None, :]
    new_k, new_v = [], []
    for i, block in enumerate(self.layers):
      pm, cm = prompt_mask, chunk_mask
      window = block.attn.window
      if window is not None:  # keys at positions > position − window
        pm = pm & (jnp.arange(p)[None, :] > (positions - window)[:, None])
        cm = cm & (jnp.arange(span)[None, :] > slot - window)
      x, (ks, vs) = block.decode(
        x,
        rope,
        cache.prompt_k[i],
        cache.prompt_v[i],
        cache.k[i][:read_chunks],
        cache.v[i][:read_chunks],
        slot - (read_chunks - 1) * c,
        pm,
        cm,
      )
      new_k.append(ks + cache.k[i][read_chunks:])
      new_v.append(vs + cache.v[i][read_chunks:])
    cache = cache.replace(k=tuple(new_k), v=tuple(new_v))
    return self.logits(self.final_norm(x)), cache


def _call_block(block: Block, x, positions, rope, valid, segment_ids, lengths):
  return block(x, positions, rope, valid, segment_ids, lengths)


def _remat_block(remat: str):
  """`_call_block`, under `nnx.remat` with the `jax.checkpoint_policies` policy named by `REMAT_POLICIES[remat]`
  ("none": as is). Only a differentiated forward pass changes: the backward pass recomputes what the policy
  does not keep, from the block's saved input."""
  policy = REMAT_POLICIES[remat]
  if policy is None:
    return _call_block
  return nnx.remat(_call_block, policy=getattr(jax.checkpoint_policies, policy))


def init_model(config: ModelConfig, seed: int = 0) -> Transformer:
  """A randomly initialised model."""
  return Transformer(config, rngs=nnx.Rngs(params=seed))


def abstract_model(config: ModelConfig) -> Transformer:
  """The model with `jax.ShapeDtypeStruct` parameters (no memory): for shapes, shardings, AOT."""
  return nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(params=0)))
