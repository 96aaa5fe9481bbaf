"""Compaction and the growing cache of a host-driven `Sampler` call: between decode segments, the rows still
decoding are gathered into a smaller state, and a growing cache gets its next chunk. The host-side choices
(`compact`, `regroup`, `grow`, given the sampler whose jitted programs they run) and the traced gathers those
programs are built from (`gather_rows`, `gather_row_data`, `merge`, `empty_chunk`).

Compaction (`compact_every` > 0, SPEC §1's groups finish at very different lengths): decoding runs in
segments of at most `compact_every` steps (and at each cache chunk's end); after each, the host reads
which rows are done and, when the live rows fit a smaller bucket of rows (shards × 2^i or shards × 3·2^i),
gathers them — tokens, log-probs, uniforms, every layer's cache — into a state of that many rows, so the
later steps stop paying for finished rows. Finished rows are scattered into a full-size result first.
The compacted cache keeps one prompt per row (a group's rows no longer share it), so a compaction is
made only when the compacted cache is no larger than the current one: decoding never needs more memory
than the call's first program (the gather itself briefly holds both). Buckets stay multiples of the
mesh's batch shards and ≥ 1/16 of the call's rows (fewer programs to compile; a step over so few rows
costs about its weight reads anyway). Rows keep their original index
(`DecodeState.rows`), which picks their uniforms and their greedy flag: a row's tokens do not depend on
compaction.

Growing cache (`decode_cache = "growing"`; "dense" is all of the above): the prefill allocates the first
completion chunk only, and the host-driven segments (`stream`) append one empty chunk, for the rows then
held, just before the first segment that writes into it; compaction is checked at every chunk's end, before
the next chunk is allocated, so the cache holds about the live rows' tokens instead of rows × budget (SPEC §1:
a group's lengths are spread; most rows are short). Chunks are finer by default (~N/16 slots,
`cache_chunking(growing=True)`): the cache then overshoots the live tokens by under a chunk, for one decode
program per chunk (and row bucket) and one host round trip per chunk. Its compaction keeps the prompt shared:
the live rows of a prompt are regrouped into subgroups of G' = G, G/2, … 1 rows sharing one copy of its
prompt (the prefill's layout with fewer rows per prompt), with the G' and row bucket that make the next
segment's cache smallest, and only if that is smaller than not compacting. It gathers array by array,
freeing each old array once copied, so that it holds the old cache plus one array rather than both caches,
and it never holds more than the dense cache of the same chunking (what `lower` compiles for it). The
samples are the dense cache's (rows keep their index): bit for bit until a regrouping, then to float32
round-off (the same steps over a batch of another shape, as with the dense cache's compaction).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from arena_jax.models.config import ModelConfig
from arena_jax.models.kv_cache import KVCache
from arena_jax.sampling.decode_state import _NO_ROW, COMPACT_FLOOR, DecodeState, Results

if TYPE_CHECKING:
  from arena_jax.sampling.sampler import Sampler

# ─────────────────────────────────────── host side ───────────────────────────────────────


def compact(
  sampler: Sampler, state: DecodeState, held: np.ndarray, finish: np.ndarray
) -> tuple[DecodeState, np.ndarray, int]:
  """(the state with only its live rows, the new `held`, the cache bytes held during the gather: both
  caches) when they fit a smaller row bucket, else (`state`, `held`, 0). Never below 1/16 of the call's
  rows (`COMPACT_FLOOR`: a step over that few rows costs about its weight reads, and each bucket is one
  more program to compile), nor into a cache larger than the current one (so that decoding never needs
  more memory than its first program). The dense cache's compaction; `regroup` is the growing one's."""
  live = np.flatnonzero((held >= 0) & (finish[np.maximum(held, 0)] == sampler.max_new_tokens))
  rows = max(sampler._row_bucket(len(live)), sampler._row_bucket(-(-len(finish) // COMPACT_FLOOR)))
  cache = state.cache
  slots = cache.num_chunks * cache.chunk
  if (
    not live.size
    or rows >= len(held)
    or (rows * (cache.prompt_bucket + slots) > cache.num_prompts * cache.prompt_bucket + len(held) * slots)
  ):
    return state, held, 0
  index = np.full(rows, -1, np.int32)
  index[: len(live)] = live
  new_held = np.full(rows, -1, held.dtype)
  new_held[: len(live)] = held[live]
  if sampler.mesh is not None:
    index = jax.device_put(index, NamedSharding(sampler.mesh, PartitionSpec()))
  new = sampler._compact_fn(state, index)
  return new, new_held, state.cache.nbytes + new.cache.nbytes


def row_bucket(live: int, shards: int) -> int:
  """The smallest row count shards × 2^i or shards × 3·2^i holding `live` ≥ 1 rows."""
  sizes = sorted({shards << i for i in range(32)} | {(3 * shards) << i for i in range(31)})
  return next(size for size in sizes if size >= live)


def regroup(
  sampler: Sampler, state: DecodeState, held: np.ndarray, finish: np.ndarray, next_chunks: int, limit: int
) -> tuple[DecodeState, np.ndarray, int]:
  """The growing cache's compaction: (the state with only its live rows, the new `held`, the most cache
  bytes held during the gather), or (`state`, `held`, 0) when no layout is smaller.

  The live rows of each prompt are regrouped into subgroups of G' rows (G' = G, G/2, … 1, at most the
  current group) sharing one copy of the prompt, in the smallest row bucket holding them (`row_bucket`
  copies of the prompt, G' rows each; never below 1/16 of the call's rows): of these layouts, the one
  whose cache is smallest in the next segment (`next_chunks` chunks: the one about to be appended
  included), if it is smaller than the current layout's then and its gather holds at most `limit`
  bytes. Regrouping, not one prompt per row, because a prompt copy per row can outweigh the completion
  rows it frees (a prompt of P tokens shared by G rows costs P/G slots per row; copied per row, P)."""
  n, g0 = sampler.max_new_tokens, sampler.num_samples
  cache = state.cache
  slots, group, rows = cache.num_prompts, cache.group, len(held)
  prompt_bytes = _prompt_bytes(cache) / slots  # per copy of a prompt
  row_chunk_bytes = chunk_bytes(cache) / rows  # per row and chunk
  live = np.flatnonzero((held >= 0) & (finish[np.maximum(held, 0)] == n))
  if not live.size:
    return state, held, 0
  by_prompt: dict[int, list[int]] = {}  # the call's prompt → the positions of its live rows, in row order
  for pos in live[np.argsort(held[live], kind="stable")]:
    by_prompt.setdefault(int(held[pos]) // g0, []).append(int(pos))
  floor = sampler._row_bucket(-(-len(finish) // COMPACT_FLOOR))
  size = lambda copies, g: copies * prompt_bytes + copies * g * next_chunks * row_chunk_bytes
  best = None
  for g in sorted({max(1, g0 >> i) for i in range(g0.bit_length())}, reverse=True):
    copies = sampler._row_bucket(max(sum(-(-len(p) // g) for p in by_prompt.values()), -(-floor // g)))
    if g > group or (copies, g) == (slots, group) or size(copies, g) >= size(slots, group):
      continue
    gathering = _gather_peak(cache, copies / slots, copies * g / rows)
    if gathering <= limit and (best is None or size(copies, g) < best[0]):
      best = (size(copies, g), copies, g, gathering)
  if best is None:
    return state, held, 0
  _, copies, g, gathering = best
  source, index = [], []  # each new copy's old prompt slot; each new row's old position (−1: filler)
  for positions in by_prompt.values():
    for i in range(0, len(positions), g):
      part = positions[i : i + g]
      source.append(part[0] // group)
      index.extend(part + [-1] * (g - len(part)))
  source += [0] * (copies - len(source))
  index += [-1] * (copies * g - len(index))
  source, index = np.asarray(source, np.int32), np.asarray(index, np.int32)
  new_held = np.where(index >= 0, held[np.maximum(index, 0)], -1)
  if sampler.mesh is not None:
    source, index = jax.device_put((source, index), NamedSharding(sampler.mesh, PartitionSpec()))
  kt, v, batch1 = sampler._cache_shardings if sampler.mesh is not None else (None, None, None)

  def moved(x, i, sharding):
    y = sampler._take_fn(sharding)(x, i)
    # Freed once copied (the runtime waits for the copy): the gather holds the old cache and the new
    # arrays so far, never both whole caches (`_gather_peak`, in this order).
    x.delete()
    return y

  new = sampler._regroup_rows_fn(state.replace(cache=None), index)
  new_k = tuple(tuple(moved(x, index, kt) for x in layer) for layer in cache.k)
  new_v = tuple(tuple(moved(x, index, v) for x in layer) for layer in cache.v)
  new_cache = KVCache(
    prompt_k=tuple(moved(x, source, kt) for x in cache.prompt_k),
    prompt_v=tuple(moved(x, source, v) for x in cache.prompt_v),
    k=new_k,
    v=new_v,
    prompt_lengths=sampler._take_fn(batch1)(cache.prompt_lengths, source),
  )
  return new.replace(cache=new_cache), new_held, gathering


def grow(sampler: Sampler, state: DecodeState) -> DecodeState:
  """The state with one more (empty) completion chunk per layer for its rows: a growing cache's next."""
  cache = state.cache
  k, v = sampler._empty_chunk_fn(cache.num_rows, jnp.dtype(cache.k[0][0].dtype).name)
  return state.replace(
    cache=cache.replace(
      k=tuple(layer + (x,) for layer, x in zip(cache.k, k)), v=tuple(layer + (x,) for layer, x in zip(cache.v, v))
    )
  )


# ─────────────────────────────────────── traced bodies ───────────────────────────────────────


def merge(results: Results | None, s: DecodeState) -> Results:
  """The results with the state's rows written in (the first segment's: a copy of its rows)."""
  if results is None:  # the first segment: the state holds every row (copied: the state is donated next)
    return Results(tokens=jnp.copy(s.tokens), logprobs=jnp.copy(s.logprobs), finish=jnp.copy(s.finish))
  put = lambda full, part: full.at[s.rows].set(part, mode="drop")  # drops the filler rows (_NO_ROW)
  return Results(
    tokens=put(results.tokens, s.tokens),
    logprobs=put(results.logprobs, s.logprobs),
    finish=put(results.finish, s.finish),
  )


def gather_rows(s: DecodeState, index: jax.Array) -> DecodeState:
  """The state's rows `index` (−1: a filler row, born done), each with its own copy of its prompt's cache."""
  i = jnp.maximum(index, 0)
  c = s.cache
  p = i // c.group  # each row keeps its own copy of its prompt's keys and values (group 1)
  take = lambda x: jnp.take(x, i, axis=0)
  cache = KVCache(
    prompt_k=tuple(x[p] for x in c.prompt_k),
    prompt_v=tuple(x[p] for x in c.prompt_v),
    k=tuple(tuple(take(x) for x in layer) for layer in c.k),
    v=tuple(tuple(take(x) for x in layer) for layer in c.v),
    prompt_lengths=c.prompt_lengths[p],
  )
  return gather_row_data(s.replace(cache=None), index).replace(cache=cache)


def gather_row_data(s: DecodeState, index: jax.Array) -> DecodeState:
  """The state's rows `index` (−1: a filler row, born done), all but the cache (left as it is)."""
  real = index >= 0
  i = jnp.maximum(index, 0)
  take = lambda x: jnp.take(x, i, axis=0)
  return DecodeState(
    step=s.step,
    tokens=take(s.tokens),
    logprobs=take(s.logprobs),
    done=jnp.where(real, take(s.done), True),
    finish=jnp.where(real, take(s.finish), -1),
    last_token=take(s.last_token),
    cache=s.cache,
    uniforms=s.uniforms[:, i],
    rows=jnp.where(real, take(s.rows), _NO_ROW),
    row_offset=s.row_offset,
  )


def empty_chunk(config: ModelConfig, chunk: int, rows: int, dtype: str) -> tuple[tuple[jax.Array, ...], ...]:
  """One empty completion chunk of `chunk` slots per layer for `rows` rows: (k's, v's)."""
  c = config
  k = tuple(jnp.zeros((rows, c.num_kv_heads, c.head_dim, chunk), dtype) for _ in range(c.num_layers))
  v = tuple(jnp.zeros((rows, c.num_kv_heads, chunk, c.head_dim), dtype) for _ in range(c.num_layers))
  return k, v


# ─────────────────────────────────────── cache bytes ───────────────────────────────────────


def _nbytes(x) -> int:
  return math.prod(x.shape) * jnp.dtype(x.dtype).itemsize


def _prompt_bytes(cache: KVCache) -> int:
  """Bytes of the cache's prompt part (all layers)."""
  return sum(_nbytes(x) for x in (*cache.prompt_k, *cache.prompt_v))


def chunk_bytes(cache: KVCache) -> int:
  """Bytes of one completion chunk of every row the cache holds (all layers, keys and values)."""
  return sum(_nbytes(layer[0]) for layer in (*cache.k, *cache.v))


def _gather_peak(cache: KVCache, prompt_scale: float, row_scale: float) -> int:
  """Cache bytes held at most while `regroup` copies `cache` array by array into one with
  `prompt_scale` × its prompt copies and `row_scale` × its rows, freeing each old array once copied:
  completion chunks first (they shrink), then the prompt part (which may grow)."""
  held = peak = cache.nbytes
  arrays = [(x, row_scale) for layer in (*cache.k, *cache.v) for x in layer]
  for x, scale in arrays + [(x, prompt_scale) for x in (*cache.prompt_k, *cache.prompt_v)]:
    held += _nbytes(x) * scale
    peak = max(peak, held)
    held -= _nbytes(x)
  return int(round(peak))
