"""Full-sequence attention through the kernel libraries: the training forward, the prefill and
the log-prob pass call `full_attention`; one-token decode steps keep `kv_cache.attend_cached`.

    impl     where            what runs
    xla      CPU (reference)  `attend`: float32 scores of the whole [T, S] block under a dense [B, T, S] mask
    splash   TPU              Pallas splash attention (`jax.experimental.pallas.ops.tpu.splash_attention`),
                              causal or local mask, segment ids; elsewhere the same kernel in interpret mode
    cudnn    GPU              `jax.nn.dot_product_attention(..., implementation="cudnn")` (flash attention)

`ModelConfig.attention` names one of them or `auto`, which picks by the platform the program is traced for
(`resolve_attention`): splash on TPU, cudnn on GPU, xla elsewhere. Like `remat`, it says how a program
computes, never what it computes: every kernel is tested against `attend` (tests/models/test_attention.py).

Which keys a query sees (SPEC §2's π_θ is the causal LM): key j ≤ query i of the same row, with the same
segment id (packed rows hold several sequences, `train.packing`; padding is its own segment), and, for a
sliding-window layer, i − j < window. The kernels count the window in indices, so the caller's layout must
advance positions by one along each segment (the prefill, packed rows and `token_logprobs`' kernel layout
do); the xla reference counts it in RoPE positions and accepts any layout.

Under a mesh the kernels run per shard (`jax.shard_map`, batch and heads split as the logical axis rules
say): a Pallas call cannot be partitioned by GSPMD. The trainer and the sampler trace their programs inside
`kernel_mesh(mesh, rules)`; without it a kernel sees whole arrays.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from arena_jax.models import kv_cache
from arena_jax.models.config import ATTENTION_CHOICES, ATTENTION_IMPLS  # noqa: F401 (re-exported)

_BY_PLATFORM = {"tpu": "splash", "gpu": "cudnn", "cuda": "cudnn"}

# Splash's tiles: T is padded to a multiple of _SPLASH_MULTIPLE and split into blocks of up to _SPLASH_BLOCK.
_SPLASH_MULTIPLE = 128
_SPLASH_BLOCK = 512

_MESH: contextvars.ContextVar = contextvars.ContextVar("arena_jax_kernel_mesh", default=None)


@contextlib.contextmanager
def kernel_mesh(mesh, rules: Sequence[tuple[str, Any]] | None = None):
  """Traces inside it run the attention kernels per shard of `mesh` (None: unsharded)."""
  from arena_jax.models.sharding import LOGICAL_AXIS_RULES  # pylint: disable=g-import-not-at-top

  token = _MESH.set(None if mesh is None else (mesh, tuple(rules or LOGICAL_AXIS_RULES)))
  try:
    yield
  finally:
    _MESH.reset(token)


def traced_on_mesh(fn, mesh, rules):
  """`fn`, tracing inside `kernel_mesh(mesh, rules)`: wrap a function before `jax.jit` so that every trace
  of it (first call, `lower`, AOT) sees the mesh."""

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    with kernel_mesh(mesh, rules):
      return fn(*args, **kwargs)

  return wrapped


def _platform() -> str:
  ctx = _MESH.get()
  if ctx is not None:
    return ctx[0].devices.flat[0].platform
  return jax.default_backend()


def resolve_attention(name: str, platform: str | None = None) -> str:
  """The implementation that `name` (a key of `ATTENTION_CHOICES`) runs on `platform` (default: the platform
  of the mesh being traced for, else the default backend)."""
  if name not in ATTENTION_CHOICES:
    raise ValueError(f"attention must be one of {ATTENTION_CHOICES} (got {name!r})")
  if name != "auto":
    return name
  return _BY_PLATFORM.get(platform or _platform(), "xla")


# ─────────────────────────────────────── the reference ───────────────────────────────────────


def attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
  """Grouped-query attention. q [B, T, K, R, H] (already scaled); k, v [B, K, S, H]; mask [B, T, S].

  Returns [B, T, K·R, H]. Scores and softmax are float32.
  """
  scores = jnp.einsum("btkrh,bksh->bktrs", q, k, preferred_element_type=jnp.float32)
  scores = jnp.where(mask[:, None, :, None, :], scores, kv_cache.MASK_VALUE)
  probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
  out = jnp.einsum("bktrs,bksh->btkrh", probs, v)
  b, t, kh, r, h = out.shape
  return out.reshape(b, t, kh * r, h)


def reference_mask(
  t: int, positions: jax.Array, valid: jax.Array | None, segment_ids: jax.Array | None, window: int | None
) -> jax.Array:
  """The xla path's [B, T, T] mask: causal in indices; keys of the query's segment (with `segment_ids`) or
  valid keys (with `valid` only: today's unpacked rows); the window in RoPE positions."""
  mask = jnp.tril(jnp.ones((t, t), bool))[None]
  if segment_ids is not None:
    mask = mask & (segment_ids[:, :, None] == segment_ids[:, None, :])
  elif valid is not None:
    mask = mask & valid[:, None, :]
  mask = jnp.broadcast_to(mask, (positions.shape[0], t, t))
  if window is not None:
    mask = mask & ((positions[:, :, None] - positions[:, None, :]) < window)
  return mask


# ─────────────────────────────────────── the entry point ───────────────────────────────────────


def full_attention(
  q: jax.Array,
  k: jax.Array,
  v: jax.Array,
  *,
  impl: str,
  positions: jax.Array,
  valid: jax.Array | None = None,
  segment_ids: jax.Array | None = None,
  lengths: jax.Array | None = None,
  window: int | None = None,
) -> jax.Array:
  """Causal self-attention of one layer over a whole sequence (module docstring).

  Args:
    q: [B, T, K, R, H], rotated and scaled by 1/√H.
    k, v: [B, K, T, H].
    impl: a key of `ATTENTION_CHOICES`.
    positions: int [B, T] RoPE positions (the xla path's window).
    valid: bool [B, T] (without `segment_ids`): invalid keys are never attended to.
    segment_ids: int [B, T]: a query sees only keys of its own segment (packed rows; 0 for padding).
    lengths: int [B]: each row is one sequence in [0, length) then padding (a hint the cudnn path uses
      instead of a mask); only without `segment_ids`.
    window: the layer's sliding window, or None.

  Returns [B, T, K·R, H] in v's dtype.
  """
  impl = resolve_attention(impl)
  t = q.shape[1]
  if impl == "xla":
    return attend(q, k, v, reference_mask(t, positions, valid, segment_ids, window))
  if segment_ids is None:
    segment_ids = jnp.ones(q.shape[:2], jnp.int32) if valid is None else valid.astype(jnp.int32)
  b, _, kh, r, h = q.shape
  q = q.reshape(b, t, kh * r, h)
  if impl == "splash":
    return _sharded(_splash, q, k, v, segment_ids, window=window)
  if impl == "cudnn":
    return _sharded(
      functools.partial(_dot_product_attention, implementation="cudnn"),
      q,
      k,
      v,
      segment_ids,
      window=window,
      lengths=lengths,
    )
  raise AssertionError(impl)


def _sharded(kernel, q, k, v, segment_ids, *, window, lengths=None):
  """`kernel(q [B, T, N, H], k [B, K, T, H], v, segment_ids [B, T], lengths, window)` per shard of the traced
  mesh (`kernel_mesh`): batch over the `batch` rule's axes, heads over the `heads` rule's axes when they
  divide the query heads. When they do not divide the KV heads, K/V are repeated to one per query head
  first (each shard then holds its heads' own copies)."""
  ctx = _MESH.get()
  if ctx is None or ctx[0].size == 1:
    return kernel(q, k, v, segment_ids, lengths, window)
  from arena_jax.models.sharding import logical_to_spec  # pylint: disable=g-import-not-at-top

  mesh, rules = ctx
  b, t, n, h = q.shape
  kh = k.shape[1]
  batch = logical_to_spec(("batch",), (b,), mesh, rules)[0]
  heads = logical_to_spec(("heads",), (n,), mesh, rules)[0]
  if heads is not None:
    shards = int(np.prod([mesh.shape[a] for a in ((heads,) if isinstance(heads, str) else heads)]))
    if kh % shards:
      k, v = jnp.repeat(k, n // kh, axis=1), jnp.repeat(v, n // kh, axis=1)
  P = jax.sharding.PartitionSpec
  in_specs = [P(batch, None, heads, None), P(batch, heads, None, None), P(batch, heads, None, None), P(batch, None)]
  args = [q, k, v, segment_ids]
  if lengths is not None:
    in_specs.append(P(batch))
    args.append(lengths)

  def local(q, k, v, seg, *rest):
    return kernel(q, k, v, seg, rest[0] if rest else None, window)

  fn = jax.shard_map(local, mesh=mesh, in_specs=tuple(in_specs), out_specs=P(batch, None, heads, None), check_vma=False)
  return fn(*args)


# ─────────────────────────────────────── the kernels ───────────────────────────────────────


def _dot_product_attention(q, k, v, segment_ids, lengths, window, *, implementation):
  """`jax.nn.dot_product_attention` (q [B, T, N, H], k/v [B, S, K, H] in its layout). Rows that are one
  sequence (`lengths`) pass sequence lengths; packed rows pass their segments as a [B, 1, T, T] mask (the
  public API has no segment ids)."""
  mask = None
  seq = {}
  if lengths is not None:
    seq = dict(query_seq_lengths=lengths.astype(jnp.int32), key_value_seq_lengths=lengths.astype(jnp.int32))
  else:
    mask = (segment_ids[:, :, None] == segment_ids[:, None, :])[:, None]
  out = jax.nn.dot_product_attention(
    q,
    k.transpose(0, 2, 1, 3),
    v.transpose(0, 2, 1, 3),
    mask=mask,
    scale=1.0,
    is_causal=True,
    local_window_size=None if window is None else (window - 1, 0),
    implementation=implementation,
    **seq,
  )
  return out.astype(v.dtype)


@functools.lru_cache(maxsize=64)
def _splash_kernel(t: int, heads: int, window: int | None, interpret: bool):
  from jax.experimental.pallas.ops.tpu.splash_attention import (  # pylint: disable=g-import-not-at-top
    splash_attention_kernel as splash,
    splash_attention_mask as masks,
  )

  if window is None:
    one = masks.CausalMask((t, t))
  else:  # keys at indices i − window < j ≤ i
    one = masks.LocalMask((t, t), window_size=(window - 1, 0), offset=0)
  block = min(_SPLASH_BLOCK, t)
  sizes = splash.BlockSizes(
    block_q=block,
    block_kv=block,
    block_kv_compute=block,
    block_q_dkv=block,
    block_kv_dkv=block,
    block_kv_dkv_compute=block,
    block_q_dq=block,
    block_kv_dq=block,
  )
  # Concrete constants (the mask's block tables), so that the cached kernel holds no tracer of the trace
  # that built it.
  with jax.ensure_compile_time_eval():
    return splash.make_splash_mha(
      masks.MultiHeadMask([one] * heads), block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret
    )


def _splash(q, k, v, segment_ids, lengths, window):
  """Splash attention: q [B, T, N, H], k/v [B, K, T, H] (N a multiple of K), vmapped over rows. T is padded to
  a multiple of 128 with a segment of its own; off TPU the kernel runs in Pallas interpret mode."""
  from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash  # pylint: disable=g-import-not-at-top

  del lengths
  b, t, n, h = q.shape
  tp = -(-t // _SPLASH_MULTIPLE) * _SPLASH_MULTIPLE
  if tp != t:
    pad = ((0, 0), (0, tp - t), (0, 0), (0, 0))
    q = jnp.pad(q, pad)
    k, v = (jnp.pad(x, ((0, 0), (0, 0), (0, tp - t), (0, 0))) for x in (k, v))
    segment_ids = jnp.pad(segment_ids, ((0, 0), (0, tp - t)), constant_values=-1)
  kernel = _splash_kernel(tp, n, window, _platform() != "tpu")
  segment_ids = segment_ids.astype(jnp.int32)
  out = jax.vmap(lambda q, k, v, s: kernel(q.swapaxes(0, 1), k, v, segment_ids=splash.SegmentIds(q=s, kv=s)))(
    q, k, v, segment_ids
  )
  return out.swapaxes(1, 2)[:, :t].astype(v.dtype)
