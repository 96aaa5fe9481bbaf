"""The sampler's data and the pure helpers it is built from (`arena_jax.sampling.sampler` runs them).

SampleOutput, StreamChunk   what a call returns, and what a streamed call yields after each chunk
concat_outputs              the SampleOutputs of several calls as one (a rollout split into calls)
DecodeState, Results        the decode loop's state (donated between segments) and finished rows kept aside
bucket_length, cache_chunking, mask_after_stop   static shapes and the stop rule, pure functions
ForcedStops                 a logits processor fixing each row's length (benchmarks, tests)
model_from_params           a `Transformer` from a pure parameter dict (one cached graph per config)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arena_jax.models.config import ModelConfig
from arena_jax.models.kv_cache import KVCache
from arena_jax.models.transformer import Transformer, abstract_model

DEFAULT_PROMPT_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
# `Sampler.decode_cache`: every completion chunk allocated by the prefill, or one chunk at a time.
DECODE_CACHES = ("dense", "growing")


@flax.struct.dataclass
class SampleOutput:
  """What one sampler call returns. Rows are grouped: rows b·G … b·G+G−1 are the G samples of prompt b.

  Attributes:
    tokens: int32 [B·G, N] completion tokens; `pad_id` after the stop token (which is included).
    logprobs: float32 [B·G, N] behaviour log-probs log softmax(logits/T)[token] over the full
      vocabulary, T = the method's `logprob_temperature` (the sampling temperature; 1 for greedy);
      0 at padding and on the greedy anchor row of `greedy_first` (decoded with probability 1).
      π_old of CISPO (SPEC §2).
    lengths: int32 [B·G] completion lengths (stop token included).
    truncated: bool [B·G] the row hit `max_new_tokens` without a stop token.
    completion_step: int32 [B·G] decode step (0-based) at which the row produced its last token: the
      live tournament's arrival order (SPEC §5), ties broken by row index.
    is_greedy: bool [B·G] the row was decoded greedily (ArenaRL's anchor, `Sampler.greedy_first`).
    prompt_tokens: int32 [B, P] the prompts, right-padded to the bucket P.
    prompt_lengths: int32 [B].
    num_samples: G.
    peak_cache_bytes: the most bytes of K/V cache (all layers, prompt part included, over all devices)
      the call held at once, from the shapes of the caches it held (a compaction's gather: the old cache
      and the part of the new one written so far). Host-side metadata, not a pytree leaf.
  """

  tokens: jax.Array
  logprobs: jax.Array
  lengths: jax.Array
  truncated: jax.Array
  completion_step: jax.Array
  is_greedy: jax.Array
  prompt_tokens: jax.Array
  prompt_lengths: jax.Array
  num_samples: int = flax.struct.field(pytree_node=False, default=1)
  peak_cache_bytes: int = flax.struct.field(pytree_node=False, default=0)

  def grouped(self, x: jax.Array) -> jax.Array:
    """[B·G, ...] → [B, G, ...]."""
    return x.reshape((-1, self.num_samples) + x.shape[1:])

  def completion_mask(self) -> jax.Array:
    """bool [B·G, N]: True on completion tokens (stop token included), False on padding."""
    return jnp.arange(self.tokens.shape[1])[None, :] < self.lengths[:, None]


@dataclasses.dataclass
class StreamChunk:
  """The rows that finished decoding during one chunk of a streamed call (`Sampler.stream`), host arrays.

  Attributes:
    index: the chunk (0-based, in decoding order).
    rows: int [k] row indices b·G + i, in arrival order (completion step, then row).
    tokens, logprobs: [k, N] as in `SampleOutput`; lengths, completion_step, truncated: [k].
    output: on the last chunk only, the call's whole `SampleOutput` (what `__call__` returns).
    decoded: with `stream(..., partial=True)`, every row's tokens so far, int [B·G, N] (what a server streams
      while rows still decode): positions ≥ `end` are not decoded yet, and a finished row's after its stop token
      are `pad_id`; None otherwise.
    end: the completion positions decoded so far (the chunk decoded up to position `end` − 1).
  """

  index: int
  rows: np.ndarray
  tokens: np.ndarray
  logprobs: np.ndarray
  lengths: np.ndarray
  completion_step: np.ndarray
  truncated: np.ndarray
  output: SampleOutput | None = None
  decoded: np.ndarray | None = None
  end: int = 0


@flax.struct.dataclass
class DecodeState:
  """The while_loops' carry. `step` t = tokens sampled so far; the next step feeds the last one,
  completion token t − 1, into completion slot t − 1 of the cache. `rows` int32 [R]: each row's index
  b·G + i in the call (the identity until a compaction; `_NO_ROW` for a compacted state's filler rows).
  `finish`: the step of the row's last token, −1 for a filler row, N while it decodes. `row_offset`: int32
  scalar added to `rows` where they pick a row's greedy flag and logits-processor row (`Sampler.__call__`)."""

  step: jax.Array
  tokens: jax.Array
  logprobs: jax.Array
  done: jax.Array
  finish: jax.Array
  last_token: jax.Array
  cache: KVCache
  uniforms: jax.Array
  rows: jax.Array
  row_offset: jax.Array


@flax.struct.dataclass
class Results:
  """Per row of the call (padded batch) [R₀, …]: what a compacted decode has written so far."""

  tokens: jax.Array
  logprobs: jax.Array
  finish: jax.Array


_NO_ROW = np.iinfo(np.int32).max  # a compacted state's filler rows: dropped when scattered back
COMPACT_FLOOR = 16  # compaction keeps at least 1/COMPACT_FLOOR of a call's rows (`compaction.compact`)


# ─────────────────────────────────────── pure helpers ───────────────────────────────────────


def bucket_length(length: int, buckets: Sequence[int]) -> int:
  """The smallest bucket ≥ length (or length itself, rounded up to a multiple of 8, past the last)."""
  for b in sorted(buckets):
    if length <= b:
      return b
  return -(-length // 8) * 8


def cache_chunking(max_new_tokens: int, chunk: int | None = None, *, growing: bool = False) -> tuple[int, int]:
  """(chunk size, number of chunks) covering the N − 1 completion slots that decoding writes.

  By default up to 4 chunks of ≥ 16 slots (a multiple of 8): each chunk is one while_loop (one more
  copy of the decode step to compile) and lets the earlier steps skip reading the unwritten tail.
  `growing` (`Sampler.decode_cache`): up to 16 chunks of ≥ 8 slots, ~N/16 each, since a growing cache
  allocates one chunk at a time and so follows the live tokens to within a chunk; the price is more
  decode programs (one per chunk and row bucket) and a host round trip at each chunk's end.
  """
  slots = max(1, max_new_tokens - 1)
  if chunk is None:
    most, least = (16, 8) if growing else (4, 16)
    n = min(most, -(-slots // least))
    chunk = -(-slots // n)
  chunk = -(-chunk // 8) * 8
  return chunk, -(-slots // chunk)


def concat_outputs(outputs: Sequence[SampleOutput], pad_id: int = 0) -> SampleOutput:
  """Host copies of `outputs` (calls with the same N and G, in row order) as one `SampleOutput`: rows and
  prompts concatenated, prompts right-padded with `pad_id` to the widest bucket; `peak_cache_bytes` is the
  largest call's (the calls run one after another, each freeing its cache)."""
  outputs = [jax.device_get(o) for o in outputs]
  if len({o.num_samples for o in outputs}) != 1:
    raise ValueError(f"outputs of different group sizes: {[o.num_samples for o in outputs]}")
  width = max(o.prompt_tokens.shape[1] for o in outputs)
  cat = lambda name: np.concatenate([np.asarray(getattr(o, name)) for o in outputs])
  pad = lambda x: np.pad(np.asarray(x), ((0, 0), (0, width - x.shape[1])), constant_values=pad_id)
  prompts = np.concatenate([pad(o.prompt_tokens) for o in outputs])
  return SampleOutput(
    tokens=cat("tokens"),
    logprobs=cat("logprobs"),
    lengths=cat("lengths"),
    truncated=cat("truncated"),
    completion_step=cat("completion_step"),
    is_greedy=cat("is_greedy"),
    prompt_tokens=prompts,
    prompt_lengths=cat("prompt_lengths"),
    num_samples=outputs[0].num_samples,
    peak_cache_bytes=max(o.peak_cache_bytes for o in outputs),
  )


def mask_after_stop(tokens: jax.Array, stop_tokens: Sequence[int], pad_id: int) -> jax.Array:
  """Replaces every token after the first stop token of each row with `pad_id` (the stop stays)."""
  if not stop_tokens:
    return tokens
  is_stop = jnp.isin(tokens, jnp.asarray(stop_tokens))
  after = (jnp.cumsum(is_stop, axis=-1) - is_stop) > 0
  return jnp.where(after, pad_id, tokens)


@dataclasses.dataclass(frozen=True)
class ForcedStops:
  """A `Sampler.logits_processor` that makes row r stop at decode step `positions[r]` (its completion
  then has positions[r] + 1 tokens, the stop token included) and never earlier: every logit but
  `token`'s is masked at that step, `token`'s before it. Completion lengths fixed in advance, for
  benchmarks and tests of what a sampler does with rows that finish at different times (a random
  policy does not stop by itself). Rows past the table (filler rows) use its last entry.
  """

  positions: tuple[int, ...]
  token: int

  def __call__(self, logits: jax.Array, step, rows: jax.Array) -> jax.Array:
    at = jnp.asarray(self.positions, jnp.int32)[jnp.minimum(rows, len(self.positions) - 1)]
    is_stop = jnp.arange(logits.shape[-1]) == self.token
    forced = jnp.where(is_stop, 0.0, -1e30)
    return jnp.where((step == at)[:, None], forced, jnp.where(is_stop, -1e30, logits))


def model_from_params(config: ModelConfig, params: Any) -> Transformer:
  """A `Transformer` from a model, an `nnx.State` or a pure dict of its parameters."""
  if isinstance(params, Transformer):
    return params
  graphdef = _graphdef(config)
  if isinstance(params, nnx.State):
    params = nnx.to_pure_dict(params)
  return nnx.merge(graphdef, params)


@functools.partial(jax.jit, static_argnums=1)
def _cast_tree(params, dtype):
  """`params` in `dtype` (elementwise, so each output keeps its input's sharding)."""
  return jax.tree.map(lambda x: x.astype(dtype), params)


@functools.lru_cache(maxsize=64)
def _graphdef(config: ModelConfig):
  return nnx.graphdef(abstract_model(config))
