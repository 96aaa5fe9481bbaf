"""KV-cache sampler: one prefill per prompt, then G samples per prompt decoded in jitted while_loops.

Over 600 lines, one concern: the decode loop, its jitted programs and their layouts (its data types are in
`decode_state.py`); splitting it would part a program from the layout it is jitted with.

Shape of a call (gemma's `_prefill.py` + `_sampler_loop.py`, reshaped for RL groups):

  prompts [B] ──pad right to a bucket P──► prefill (jit) ──► KVCache (prompt part [B, …], once per
                                             │                group) + logits of completion token 0
                                             ▼                rows b·G … b·G+G−1 are prompt b's group
         decode (jit, state donated): one lax.while_loop per cache chunk over steps t = 1 … N−1,
                                      stopping as soon as every row is done
                                             ▼
  SampleOutput: tokens, behaviour log-probs, lengths, truncated, completion_step  [B·G, …]

Cache (`arena_jax.models.kv_cache`): the G samples of a prompt share its prefilled keys and values;
completion token t of every row goes to completion slot t (one in-place dynamic_update_slice per layer
and step), and the step only reads the completion chunks written so far. RoPE positions are per row
(prompt_length + t), exactly as if the prompt were unpadded; `token_logprobs` scores (prompt,
completion) with the same positions.

Static shapes: P is the smallest bucket ≥ the longest prompt, N = `max_new_tokens` is fixed, and the
number of prompts is padded to a multiple of the mesh's batch shards, so an RL run compiles one
prefill and one decode program per prompt bucket, whatever the params.

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

Several calls (`row_offset`): a rollout split into calls of fewer prompts passes each call the index of
its first row in the whole rollout, a multiple of G; row r of the call then draws the uniforms and gets the
greedy flag and logits-processor row of row row_offset + r, so the split gives the one call's samples.

Peak memory: every output records `peak_cache_bytes`, the most K/V cache bytes the call held at once (all
layers, prompt part included), from the shapes of the caches it held; a dense call without compaction holds
its one allocation.

Randomness: one uniform per row and step, drawn before the loop (the loop body holds no RNG): row r's
N numbers come from fold_in(rng, row_offset + r), so they depend on the key and the row index only — not on the
batch padding a mesh needs, nor on the device count (jax's threefry is partitionable): the same key
gives the same tokens on one device or on a mesh.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from arena_jax import parallel
from arena_jax import program_cache
from arena_jax.models.config import ModelConfig
from arena_jax.models.sharding import LOGICAL_AXIS_RULES, logical_sharding, num_batch_shards, param_shardings
from arena_jax.models.attention import traced_on_mesh
from arena_jax.models.kv_cache import KVCache
from arena_jax.models.params import pure_params
from arena_jax.models.transformer import abstract_model
from arena_jax.sampling.decode_state import (
  COMPACT_FLOOR,
  DECODE_CACHES,
  DEFAULT_PROMPT_BUCKETS,
  DecodeState,
  Results,
  SampleOutput,
  StreamChunk,
  _NO_ROW,
  _cast_tree,
  bucket_length,
  cache_chunking,
  model_from_params,
)
from arena_jax.sampling.methods import RandomSampling, SamplingMethod, uniforms

# ─────────────────────────────────────── the sampler ───────────────────────────────────────


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sampler:
  """Samples G completions per prompt from a `Transformer` with a KV cache.

  A small frozen object: everything here is static (shapes, method, stop tokens); params, prompts
  and the key are the call's arguments, so calling it every RL step with new params never recompiles.

  Attributes:
    config: the model's config.
    max_new_tokens: N, the completion budget (static).
    num_samples: G, samples per prompt (consecutive rows).
    method: `RandomSampling(temperature, top_k, top_p)` or `Greedy()`.
    stop_tokens: a row is done after producing one of these (it is kept in the output).
    pad_id: written after the stop token.
    greedy_first: decode the first member of every group greedily (ArenaRL's anchor, SPEC §5).
    prompt_buckets: prompt lengths are padded up to one of these.
    mesh: run sharded: batch over the mesh axes of the `batch` rule (data, fsdp), heads and MLP over
      `tensor` (see `arena_jax.models.sharding`). None = the default device.
    rules: logical axis rules.
    cache_dtype: KV cache dtype (default: the model's compute dtype).
    cache_chunk: completion slots per cache chunk (default: `cache_chunking`'s choice, finer for a
      growing cache).
    compact_every: > 0: every this many decode steps (and at each cache chunk's end) gather the live
      rows into a smaller batch when they fit one (see the module docstring; one host round trip per
      check, one more decode program per row bucket); 0: never, one jitted call decodes every row to
      the end of the longest.
    logits_processor: `f(logits [R, V], step, rows [R]) → logits`, applied before choosing each token
      (step 0 = the prefill's token; rows = the rows' indices b·G + i in the call); the behaviour
      log-probs are those of the processed logits. For constraints (e.g. forcing a stop token) that
      must not depend on batch composition; must be jax-traceable and hashable.
    decode_cache: "dense": the prefill allocates the whole completion cache (rows × budget); "growing":
      one chunk at a time, finished rows compacted away at each chunk's end (module docstring). The same
      samples; a growing call is host-driven (`stream`).
  """

  config: ModelConfig
  max_new_tokens: int
  num_samples: int = 1
  method: SamplingMethod = RandomSampling()
  stop_tokens: tuple[int, ...] = ()
  pad_id: int = 0
  greedy_first: bool = False
  prompt_buckets: tuple[int, ...] = DEFAULT_PROMPT_BUCKETS
  mesh: Mesh | None = None
  rules: tuple[tuple[str, Any], ...] = LOGICAL_AXIS_RULES
  cache_dtype: str | None = None
  cache_chunk: int | None = None
  compact_every: int = 0
  logits_processor: Callable[[jax.Array, jax.Array, jax.Array], jax.Array] | None = None
  decode_cache: str = "dense"

  def __post_init__(self):
    object.__setattr__(self, "stop_tokens", tuple(int(t) for t in self.stop_tokens))
    object.__setattr__(self, "prompt_buckets", tuple(self.prompt_buckets))
    object.__setattr__(self, "rules", tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in self.rules))
    if self.max_new_tokens < 1:
      raise ValueError(f"max_new_tokens must be ≥ 1 (got {self.max_new_tokens})")
    if self.num_samples < 1:
      raise ValueError(f"num_samples must be ≥ 1 (got {self.num_samples})")
    if self.compact_every < 0:
      raise ValueError(f"compact_every must be ≥ 0 (got {self.compact_every})")
    if self.decode_cache not in DECODE_CACHES:
      raise ValueError(f"decode_cache must be one of {DECODE_CACHES} (got {self.decode_cache!r})")

  @property
  def logprob_temperature(self) -> float:
    """T of the behaviour log-probs: score the loss with `token_logprobs(..., temperature=T)`."""
    return self.method.logprob_temperature

  @property
  def _growing(self) -> bool:
    return self.decode_cache == "growing"

  @property
  def _chunking(self) -> tuple[int, int]:
    """(slots per cache chunk, number of chunks)."""
    return cache_chunking(self.max_new_tokens, self.cache_chunk, growing=self._growing)

  # ── public entry point ──

  def __call__(
    self,
    params: Any,
    prompts: Sequence[Sequence[int]] | tuple[np.ndarray, np.ndarray],
    rng: jax.Array,
    *,
    row_offset: int = 0,
  ) -> SampleOutput:
    """Samples `num_samples` completions for each prompt.

    Args:
      params: a `Transformer`, its `nnx.State`, or the pure dict of its parameters.
      prompts: token lists, or (tokens [B, L] right-padded, lengths [B]). Every prompt needs ≥ 1 token.
      rng: a `jax.random.key`.
      row_offset: the index of this call's first row among several calls' (a multiple of G): row r
        samples as row row_offset + r of one call with all their prompts would (module docstring).
    """
    if self._growing or (self.compact_every and len(self._segments(self.compact_every)) > 1):
      # host-driven: a compaction check after each segment (and, growing, a chunk appended before it)
      *_, last = self.stream(params, prompts, rng, row_offset=row_offset)
      return last.output
    state, tokens, _, num_prompts = self._start(params, prompts, rng, row_offset)
    held = state.cache.nbytes  # its one allocation
    # The final state (whose cache aliases the donated one) is dropped here, freeing the cache.
    out, _ = self._decode_fn(pure_params(params), state, jnp.asarray(tokens))
    return self._trim(out, num_prompts).replace(peak_cache_bytes=held)

  def stream(
    self,
    params: Any,
    prompts: Sequence[Sequence[int]] | tuple[np.ndarray, np.ndarray],
    rng: jax.Array,
    *,
    every: int = 0,
    row_offset: int = 0,
    refresh: Callable[[int], Any] | None = None,
  ) -> Iterator[StreamChunk]:
    """`__call__`, yielding after each chunk of decoding the rows that finished in it (issue 14: judging
    starts while decoding goes on). The last chunk carries the rows cut at `max_new_tokens` and the
    call's `SampleOutput`, equal to `__call__`'s for the same arguments (the same decode steps, split
    into more jitted loops).

    A chunk ends at each cache chunk's end (`cache_chunking`) and, with `every` > 0, every `every`
    decode steps (with compaction, also every `compact_every` steps). Each chunk costs one host round
    trip (its finished rows are read back): the plain call without compaction has none. Multi-host:
    every host runs the same chunks and receives every row. `row_offset`: as in `__call__`; a chunk's
    `rows` are the call's own (0 … B·G − 1).

    `refresh` (the asynchronous loop's in-flight weight updates, `train.async_loop`): called before each
    decode segment with the completion position the segment decodes first (the prefill chose position 0);
    when it returns parameters (not None) those decode from then on. The K/V already in the
    cache stay as computed, and each token's behaviour log-prob is the one of the parameters that chose it,
    so the recorded log-probs remain the behaviour policy's (SPEC §2). None: the same parameters throughout.
    """
    state, tokens, lengths, num_prompts = self._start(params, prompts, rng, row_offset)
    params = pure_params(params)
    real, n = num_prompts * self.num_samples, self.max_new_tokens
    reported = np.zeros(real, bool)
    compacting = bool(self.compact_every) or self._growing
    # With compaction: every row's results so far, scattered from the state after each segment, and
    # the host's copy of `state.rows` (which of the call's rows the state holds; −1: filler).
    results, held = None, np.arange(state.tokens.shape[0])
    # The most K/V bytes held at once; a growing cache never holds more than `dense_bytes`, the cache of
    # every chunk for every row of the call (what the prefill allocates when dense).
    peak = state.cache.nbytes
    dense_bytes = peak + (self._chunking[1] - state.cache.num_chunks) * _chunk_bytes(state.cache)

    def chunk(index, view, finish, last=False):
      finish = finish[:real]
      new = ~reported & ((finish < n) | last)
      rows = np.flatnonzero(new)
      rows = rows[np.lexsort((rows, np.where(finish[rows] < n, finish[rows], n - 1)))]  # arrival order
      reported[rows] = True
      toks, lps = (np.asarray(a) for a in parallel.gather((view.tokens, view.logprobs))) if len(rows) else (None, None)
      lengths = np.where(finish[rows] < n, finish[rows] + 1, n).astype(np.int32)
      return StreamChunk(
        index,
        rows,
        toks[rows] if len(rows) else np.zeros((0, n), np.int32),
        lps[rows] if len(rows) else np.zeros((0, n), np.float32),
        lengths,
        lengths - 1,
        finish[rows] >= n,
      )

    def run(index, end, read_chunks):
      nonlocal state, results, peak, params, first
      if refresh is not None and (new := refresh(first)) is not None:
        params = pure_params(new)
      first = end
      if state.cache.num_chunks < read_chunks:  # growing: the chunk this segment writes into, empty
        state = self._grow(state)
        peak = max(peak, state.cache.nbytes)
      state = self._segment_fn(read_chunks)(params, state, np.int32(end))
      if compacting:
        results = self._merge_fn(results, state)
      view = results if compacting else state
      return view, np.asarray(parallel.gather(view.finish))  # the segment's one host round trip

    segments = self._segments(every, self.compact_every)
    first = 1  # the completion position the next segment decodes first
    # Compactions happen at the ends of `__call__`'s segments only, whatever `every`: the same rows are
    # gathered at the same steps, so the output is `__call__`'s to the bit. Growing: at least at each
    # chunk's end (`_segments` ends one there), before the next chunk is allocated.
    checks = {end for end, _ in self._segments(self.compact_every)} if compacting else set()
    for index, (end, read_chunks) in enumerate(segments[:-1]):
      view, finish = run(index, end, read_chunks)
      yield chunk(index, view, finish)
      if (finish != n).all():
        break  # the remaining loops would not run a step (every row is done)
      if end in checks:
        if self._growing:
          next_chunks = max(state.cache.num_chunks, segments[index + 1][1])
          state, held, gathering = self._regroup(state, held, finish, next_chunks, dense_bytes)
        else:
          state, held, gathering = self._compact(state, held, finish)
        peak = max(peak, gathering)
    end, read_chunks = segments[-1]
    view, finish = run(len(segments) - 1, end, read_chunks)
    last = chunk(len(segments) - 1, view, finish, last=True)
    out = self._trim(self._finish_fn(view, tokens, lengths), num_prompts)
    last.output = out.replace(peak_cache_bytes=int(peak))
    yield last

  def _compact(self, state: DecodeState, held: np.ndarray, finish: np.ndarray) -> tuple[DecodeState, np.ndarray, int]:
    """(the state with only its live rows, the new `held`, the cache bytes held during the gather: both
    caches) when they fit a smaller row bucket, else (`state`, `held`, 0). Never below 1/16 of the call's
    rows (`COMPACT_FLOOR`: a step over that few rows costs about its weight reads, and each bucket is one
    more program to compile), nor into a cache larger than the current one (so that decoding never needs
    more memory than its first program). The dense cache's compaction; `_regroup` is the growing one's."""
    live = np.flatnonzero((held >= 0) & (finish[np.maximum(held, 0)] == self.max_new_tokens))
    rows = max(self._row_bucket(len(live)), self._row_bucket(-(-len(finish) // COMPACT_FLOOR)))
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
    if self.mesh is not None:
      index = jax.device_put(index, NamedSharding(self.mesh, PartitionSpec()))
    new = self._compact_fn(state, index)
    return new, new_held, state.cache.nbytes + new.cache.nbytes

  def _row_bucket(self, live: int) -> int:
    """The smallest row count shards × 2^i or shards × 3·2^i holding `live` ≥ 1 rows."""
    shards = num_batch_shards(self.mesh, self.rules)
    sizes = sorted({shards << i for i in range(32)} | {(3 * shards) << i for i in range(31)})
    return next(size for size in sizes if size >= live)

  def _regroup(
    self, state: DecodeState, held: np.ndarray, finish: np.ndarray, next_chunks: int, limit: int
  ) -> tuple[DecodeState, np.ndarray, int]:
    """The growing cache's compaction: (the state with only its live rows, the new `held`, the most cache
    bytes held during the gather), or (`state`, `held`, 0) when no layout is smaller.

    The live rows of each prompt are regrouped into subgroups of G' rows (G' = G, G/2, … 1, at most the
    current group) sharing one copy of the prompt, in the smallest row bucket holding them (`_row_bucket`
    copies of the prompt, G' rows each; never below 1/16 of the call's rows): of these layouts, the one
    whose cache is smallest in the next segment (`next_chunks` chunks: the one about to be appended
    included), if it is smaller than the current layout's then and its gather holds at most `limit`
    bytes. Regrouping, not one prompt per row, because a prompt copy per row can outweigh the completion
    rows it frees (a prompt of P tokens shared by G rows costs P/G slots per row; copied per row, P)."""
    n, g0 = self.max_new_tokens, self.num_samples
    cache = state.cache
    slots, group, rows = cache.num_prompts, cache.group, len(held)
    prompt_bytes = _prompt_bytes(cache) / slots  # per copy of a prompt
    chunk_bytes = _chunk_bytes(cache) / rows  # per row and chunk
    live = np.flatnonzero((held >= 0) & (finish[np.maximum(held, 0)] == n))
    if not live.size:
      return state, held, 0
    by_prompt: dict[int, list[int]] = {}  # the call's prompt → the positions of its live rows, in row order
    for pos in live[np.argsort(held[live], kind="stable")]:
      by_prompt.setdefault(int(held[pos]) // g0, []).append(int(pos))
    floor = self._row_bucket(-(-len(finish) // COMPACT_FLOOR))
    size = lambda copies, g: copies * prompt_bytes + copies * g * next_chunks * chunk_bytes
    best = None
    for g in sorted({max(1, g0 >> i) for i in range(g0.bit_length())}, reverse=True):
      copies = self._row_bucket(max(sum(-(-len(p) // g) for p in by_prompt.values()), -(-floor // g)))
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
    if self.mesh is not None:
      source, index = jax.device_put((source, index), NamedSharding(self.mesh, PartitionSpec()))
    kt, v, batch1 = self._cache_shardings if self.mesh is not None else (None, None, None)

    def moved(x, i, sharding):
      y = self._take_fn(sharding)(x, i)
      # Freed once copied (the runtime waits for the copy): the gather holds the old cache and the new
      # arrays so far, never both whole caches (`_gather_peak`, in this order).
      x.delete()
      return y

    new = self._regroup_rows_fn(state.replace(cache=None), index)
    new_k = tuple(tuple(moved(x, index, kt) for x in layer) for layer in cache.k)
    new_v = tuple(tuple(moved(x, index, v) for x in layer) for layer in cache.v)
    new_cache = KVCache(
      prompt_k=tuple(moved(x, source, kt) for x in cache.prompt_k),
      prompt_v=tuple(moved(x, source, v) for x in cache.prompt_v),
      k=new_k,
      v=new_v,
      prompt_lengths=self._take_fn(batch1)(cache.prompt_lengths, source),
    )
    return new.replace(cache=new_cache), new_held, gathering

  def _grow(self, state: DecodeState) -> DecodeState:
    """The state with one more (empty) completion chunk per layer for its rows: a growing cache's next."""
    cache = state.cache
    k, v = self._empty_chunk_fn(cache.num_rows, jnp.dtype(cache.k[0][0].dtype).name)
    return state.replace(
      cache=cache.replace(
        k=tuple(layer + (x,) for layer, x in zip(cache.k, k)), v=tuple(layer + (x,) for layer, x in zip(cache.v, v))
      )
    )

  def _start(self, params, prompts, rng, row_offset: int = 0) -> tuple[DecodeState, np.ndarray, np.ndarray, int]:
    """Pads and places the prompts and prefills: (the decode state, the padded prompts, their lengths,
    the number of real prompts)."""
    if not (isinstance(row_offset, (int, np.integer)) and row_offset >= 0 and row_offset % self.num_samples == 0):
      raise ValueError(
        f"row_offset must be a multiple ≥ 0 of num_samples = {self.num_samples} (the index of the call's "
        f"first row among all calls' rows), got {row_offset!r}"
      )
    tokens, lengths = self.pad_prompts(prompts)
    num_prompts = tokens.shape[0]
    shards = num_batch_shards(self.mesh, self.rules)
    padded = -(-num_prompts // shards) * shards
    active = np.arange(padded) < num_prompts
    if padded != num_prompts:  # filler prompts of one pad token, born done
      tokens = np.concatenate([tokens, np.full((padded - num_prompts, tokens.shape[1]), self.pad_id, np.int32)])
      lengths = np.concatenate([lengths, np.ones(padded - num_prompts, np.int32)])
    params = pure_params(params)
    if self.mesh is not None and jax.process_count() > 1:
      # A multi-process jit refuses numpy inputs with non-trivial shardings: every host passes the same
      # prompts, placed here as global arrays (a key array cannot be placed across hosts, its data can).
      b1 = self._batch_sharding(1)
      tokens, lengths, active, key = jax.device_put(
        (tokens, lengths, active, np.asarray(jax.random.key_data(rng))),
        (self._batch_sharding(2), b1, b1, NamedSharding(self.mesh, PartitionSpec())),
      )
      rng = jax.random.wrap_key_data(key)
    state = self._prefill_fn(params, tokens, lengths, active, rng, np.int32(row_offset))
    return state, tokens, lengths, num_prompts

  def _trim(self, out: SampleOutput, num_prompts: int) -> SampleOutput:
    """Drops the filler prompts' rows."""
    if out.prompt_tokens.shape[0] == num_prompts:
      return out
    rows = num_prompts * self.num_samples
    return SampleOutput(
      tokens=out.tokens[:rows],
      logprobs=out.logprobs[:rows],
      lengths=out.lengths[:rows],
      truncated=out.truncated[:rows],
      completion_step=out.completion_step[:rows],
      is_greedy=out.is_greedy[:rows],
      prompt_tokens=out.prompt_tokens[:num_prompts],
      prompt_lengths=out.prompt_lengths[:num_prompts],
      num_samples=self.num_samples,
    )

  def _segments(self, *everys: int) -> list[tuple[int, int]]:
    """(end step, cache chunks read) of each decode loop: one per cache chunk, split every `e` steps of
    it for each `e` > 0 of `everys`."""
    n = self.max_new_tokens
    chunk, num_chunks = self._chunking
    out = []
    for j in range(num_chunks):
      start, end = j * chunk + 1, min((j + 1) * chunk + 1, n)
      cuts = {c for e in everys if e > 0 for c in range(start + e, end, e)}
      out.extend((e, j + 1) for e in sorted(cuts) + [end])
    return out

  def pad_prompts(self, prompts) -> tuple[np.ndarray, np.ndarray]:
    """(tokens int32 [B, P] right-padded with `pad_id` to the bucket P, lengths int32 [B])."""
    if isinstance(prompts, tuple) and len(prompts) == 2 and np.ndim(prompts[0]) == 2:
      tokens, lengths = np.asarray(prompts[0], np.int32), np.asarray(prompts[1], np.int32)
      rows = [tokens[i, :n] for i, n in enumerate(lengths)]
    else:
      rows = [np.asarray(p, np.int32) for p in prompts]
      lengths = np.asarray([len(r) for r in rows], np.int32)
    if len(rows) == 0:
      raise ValueError("no prompts")
    if lengths.min() < 1:
      raise ValueError("every prompt needs at least one token (e.g. BOS)")
    p = bucket_length(int(lengths.max()), self.prompt_buckets)
    out = np.full((len(rows), p), self.pad_id, np.int32)
    for i, r in enumerate(rows):
      out[i, : len(r)] = r
    return out, lengths

  def shard_params(self, params: Any) -> dict:
    """The parameters as a pure dict in `config.param_dtype`, placed on `mesh` by their logical axes.

    Float32 masters under bfloat16 compute (`models.sampling_config`) become a bfloat16 copy here: cast
    where they lie (one jitted elementwise pass, each device its own shards), then moved to the sampler's
    layout at half the bytes. Parameters already in that dtype are only placed (as-is without a mesh)."""
    params = pure_params(params)
    dtype = jnp.dtype(self.config.param_dtype)
    if any(jnp.result_type(x) != dtype for x in jax.tree.leaves(params)):
      params = _cast_tree(params, dtype)
    if self.mesh is None:
      return params
    return jax.device_put(params, self._param_shardings)

  def lower(self, num_prompts: int, prompt_len: int) -> tuple[jax.stages.Lowered, jax.stages.Lowered]:
    """(prefill, decode) `jax.stages.Lowered` of the two programs a call runs, on abstract inputs.

    B = `num_prompts` prompts padded to the bucket P = `prompt_len` (decoded into B·G rows of
    `max_new_tokens`); parameters, prompts and key are `jax.ShapeDtypeStruct`s laid out as a call lays
    them out, so nothing is allocated. `.compile().memory_analysis()` of each is what the program needs
    per device (`arena_jax.aot`: real-size samplers against TPU topologies). With a mesh, B must be a
    multiple of its batch shards (a call pads to it). A growing cache's: those of the dense cache of the
    same chunking, every chunk allocated, which bound what its host-driven segments hold.
    """
    if self._growing:
      dense = dataclasses.replace(self, decode_cache="dense", cache_chunk=self._chunking[0])
      return dense.lower(num_prompts, prompt_len)
    shards = num_batch_shards(self.mesh, self.rules)
    if num_prompts < 1 or num_prompts % shards:
      raise ValueError(
        f"num_prompts = {num_prompts} must be a positive multiple of the mesh's {shards} batch "
        "shards (a call pads the prompts to it)"
      )
    if prompt_len < 1:
      raise ValueError(f"prompt_len must be ≥ 1 (got {prompt_len})")
    sds = jax.ShapeDtypeStruct
    params = nnx.to_pure_dict(nnx.state(abstract_model(self.config)))
    if self.mesh is not None:
      params = jax.tree.map(lambda p, s: sds(p.shape, p.dtype, sharding=s), params, self._param_shardings)
    tokens = sds((num_prompts, prompt_len), jnp.int32)
    lengths, active = sds((num_prompts,), jnp.int32), sds((num_prompts,), jnp.bool_)
    rng = jax.eval_shape(lambda: jax.random.key(0))
    row_offset = sds((), jnp.int32)
    prefill = self._prefill_fn.lower(params, tokens, lengths, active, rng, row_offset)
    state = jax.eval_shape(self._prefill, params, tokens, lengths, active, rng, row_offset)
    return prefill, self._decode_fn.lower(params, state, tokens)

  # ── jitted programs (built once per set of equal samplers: `program_cache.shared_property`) ──

  @program_cache.shared_property
  def _prefill_fn(self):
    if self.mesh is None:
      return jax.jit(self._prefill)
    batch1, rep = self._batch_sharding(1), NamedSharding(self.mesh, PartitionSpec())
    # Traced inside `kernel_mesh`: the prompt pass's attention kernel (splash, cudnn) runs per shard.
    return jax.jit(
      traced_on_mesh(self._prefill, self.mesh, self.rules),
      in_shardings=(self._param_shardings, self._batch_sharding(2), batch1, batch1, rep, rep),
      out_shardings=self._state_shardings_for(1 if self._growing else self._chunking[1]),
    )

  @program_cache.shared_property
  def _decode_fn(self):
    if self.mesh is None:
      return jax.jit(self._decode, donate_argnums=1)
    return jax.jit(
      self._decode,
      donate_argnums=1,
      in_shardings=(self._param_shardings, self._state_shardings, self._batch_sharding(2)),
      out_shardings=(self._output_shardings, self._state_shardings),
    )

  @program_cache.shared_property
  def _segment_fns(self) -> dict:
    return {}

  def _segment_fn(self, read_chunks: int):
    """One decode loop up to a traced end step, reading `read_chunks` cache chunks (`stream`; a growing
    cache holds exactly those)."""
    if read_chunks not in self._segment_fns:
      fn = functools.partial(self._segment, read_chunks=read_chunks)
      if self.mesh is None:
        self._segment_fns[read_chunks] = jax.jit(fn, donate_argnums=1)
      else:
        rep = NamedSharding(self.mesh, PartitionSpec())
        state = self._state_shardings_for(read_chunks if self._growing else self._chunking[1])
        self._segment_fns[read_chunks] = jax.jit(
          fn, donate_argnums=1, in_shardings=(self._param_shardings, state, rep), out_shardings=state
        )
    return self._segment_fns[read_chunks]

  @program_cache.shared_property
  def _finish_fn(self):
    if self.mesh is None:
      return jax.jit(self._output)
    return jax.jit(self._output, out_shardings=self._output_shardings)

  @program_cache.shared_property
  def _merge_fn(self):
    """(results or None, state) → the results with the state's rows written in (results donated)."""
    if self.mesh is None:
      return jax.jit(self._merge, donate_argnums=0)
    batch1, batch2 = self._batch_sharding(1), self._batch_sharding(2)
    return jax.jit(self._merge, donate_argnums=0, out_shardings=Results(tokens=batch2, logprobs=batch2, finish=batch1))

  @program_cache.shared_property
  def _compact_fn(self):
    """(state, index int32 [R']) → the state's rows `index` (−1: a filler row, born done)."""
    # Not donated: no output has an input's shape; the old state is freed when the caller drops it.
    if self.mesh is None:
      return jax.jit(self._gather_rows)
    return jax.jit(self._gather_rows, out_shardings=self._state_shardings)

  @program_cache.shared_property
  def _regroup_rows_fn(self):
    """(state without its cache, index int32 [R']) → its rows `index` (−1: a filler row, born done)."""
    if self.mesh is None:
      return jax.jit(self._gather_row_data)
    return jax.jit(self._gather_row_data, out_shardings=self._state_shardings_for(1).replace(cache=None))

  @program_cache.shared_property
  def _take_fns(self) -> dict:
    return {}

  def _take_fn(self, sharding: NamedSharding | None):
    """(x [R, …], index int32 [R']) → x[index] (−1: row 0), laid out as `sharding` (None without a mesh):
    one array of a regrouped cache."""
    sharding = None if self.mesh is None else sharding
    if sharding not in self._take_fns:
      take = lambda x, index: jnp.take(x, jnp.maximum(index, 0), axis=0)
      self._take_fns[sharding] = jax.jit(take) if sharding is None else jax.jit(take, out_shardings=sharding)
    return self._take_fns[sharding]

  @program_cache.shared_property
  def _empty_chunk_fn(self):
    """(rows, dtype name) → one empty completion chunk per layer, (k's, v's): a growing cache's next."""
    if self.mesh is None:
      return jax.jit(self._empty_chunk, static_argnums=(0, 1))
    kt, v, _ = self._cache_shardings
    layers = self.config.num_layers
    return jax.jit(self._empty_chunk, static_argnums=(0, 1), out_shardings=((kt,) * layers, (v,) * layers))

  @functools.cached_property
  def _output_shardings(self) -> SampleOutput:
    batch1, batch2 = self._batch_sharding(1), self._batch_sharding(2)
    return SampleOutput(
      tokens=batch2,
      logprobs=batch2,
      lengths=batch1,
      truncated=batch1,
      completion_step=batch1,
      is_greedy=batch1,
      prompt_tokens=batch2,
      prompt_lengths=batch1,
      num_samples=self.num_samples,
    )

  @functools.cached_property
  def _param_shardings(self):
    return param_shardings(nnx.state(abstract_model(self.config)), self.mesh, self.rules)

  def _batch_sharding(self, ndim: int) -> NamedSharding:
    shards = num_batch_shards(self.mesh, self.rules)
    return logical_sharding(("batch",) + (None,) * (ndim - 1), (shards,) + (1,) * (ndim - 1), self.mesh, self.rules)

  @functools.cached_property
  def _cache_shardings(self) -> tuple[NamedSharding, NamedSharding, NamedSharding]:
    """(keys [R, K, H, C], values [R, K, C, H], prompt lengths [B]) of the cache, prompt part included."""
    c = self.config
    shards = num_batch_shards(self.mesh, self.rules)

    def cache(names):
      shape = (shards, c.num_kv_heads, c.head_dim, c.head_dim)  # only the batch and head dims matter
      return logical_sharding(names, shape, self.mesh, self.rules)

    kt = cache(("batch", "kv_heads", "head_dim", "cache_seq"))
    v = cache(("batch", "kv_heads", "cache_seq", "head_dim"))
    return kt, v, self._batch_sharding(1)

  @functools.cached_property
  def _state_shardings(self) -> DecodeState:
    """Of the dense cache's state (every chunk)."""
    return self._state_shardings_for(self._chunking[1])

  def _state_shardings_for(self, num_chunks: int) -> DecodeState:
    """Of a state whose cache holds `num_chunks` completion chunks."""
    c = self.config
    kt, v, _ = self._cache_shardings
    batch1, batch2 = self._batch_sharding(1), self._batch_sharding(2)
    rep = NamedSharding(self.mesh, PartitionSpec())
    columns = NamedSharding(self.mesh, PartitionSpec(None, batch1.spec[0]))
    layers = range(c.num_layers)
    kv = KVCache(
      prompt_k=tuple(kt for _ in layers),
      prompt_v=tuple(v for _ in layers),
      k=tuple((kt,) * num_chunks for _ in layers),
      v=tuple((v,) * num_chunks for _ in layers),
      prompt_lengths=batch1,
    )
    return DecodeState(
      step=rep,
      tokens=batch2,
      logprobs=batch2,
      done=batch1,
      finish=batch1,
      last_token=batch1,
      cache=kv,
      uniforms=columns,
      rows=batch1,
      row_offset=rep,
    )

  # ── traced bodies ──

  def _choose(self, logits: jax.Array, u: jax.Array, step, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Next tokens [R] of the rows `rows` (indices b·G + i) at decode step `step`, and their behaviour
    log-probs [R] (see `SampleOutput.logprobs`)."""
    if self.logits_processor is not None:
      logits = self.logits_processor(logits, step, rows)
    tokens = self.method(logits, u)
    scaled = logits / self.method.logprob_temperature
    picked = jnp.take_along_axis(scaled, tokens[:, None], axis=-1)[:, 0]
    logprobs = picked - jax.nn.logsumexp(scaled, axis=-1)
    if self.greedy_first:
      # The anchor row was decoded greedily: its behaviour policy chose the argmax with probability 1,
      # so its behaviour log-prob is log 1 = 0, not the tempered policy's (CISPO's ratio for it is then
      # π_θ(o_t) itself, SPEC §2).
      greedy = (rows % self.num_samples) == 0
      tokens = jnp.where(greedy, jnp.argmax(logits, axis=-1).astype(jnp.int32), tokens)
      logprobs = jnp.where(greedy, 0.0, logprobs)
    return tokens, logprobs

  def _stopped(self, tokens: jax.Array) -> jax.Array:
    if not self.stop_tokens:
      return jnp.zeros(tokens.shape, bool)
    return jnp.isin(tokens, jnp.asarray(self.stop_tokens, jnp.int32))

  def _prefill(self, params, tokens, lengths, active, rng, row_offset) -> DecodeState:
    model = model_from_params(self.config, params)
    g, n = self.num_samples, self.max_new_tokens
    chunk, num_chunks = self._chunking
    num_chunks = 1 if self._growing else num_chunks  # a growing cache: the first chunk only
    cache_dtype = jnp.dtype(self.cache_dtype) if self.cache_dtype else None
    logits, cache = model.prefill(tokens, lengths, group=g, num_chunks=num_chunks, chunk=chunk, cache_dtype=cache_dtype)
    # One prefill per prompt: its G samples share the cached prompt and start from the same logits.
    logits, active = jnp.repeat(logits, g, axis=0), jnp.repeat(active, g, axis=0)
    rows = logits.shape[0]
    row_ids = jnp.arange(rows, dtype=jnp.int32)
    row_offset = jnp.asarray(row_offset, jnp.int32)
    u = jax.vmap(lambda r: uniforms(jax.random.fold_in(rng, r), (n,)), out_axes=1)(row_offset + row_ids)
    first, first_lp = self._choose(logits, u[0], jnp.asarray(0, jnp.int32), row_offset + row_ids)
    done0 = ~active
    first = jnp.where(done0, self.pad_id, first)
    first_lp = jnp.where(done0, 0.0, first_lp)
    stopped = self._stopped(first) & active
    return DecodeState(
      step=jnp.asarray(1, jnp.int32),
      tokens=jnp.full((rows, n), self.pad_id, jnp.int32).at[:, 0].set(first),
      logprobs=jnp.zeros((rows, n), jnp.float32).at[:, 0].set(first_lp),
      done=done0 | stopped,
      finish=jnp.where(stopped, 0, jnp.where(done0, -1, n)).astype(jnp.int32),
      last_token=first,
      cache=cache,
      uniforms=u,
      rows=row_ids,
      row_offset=row_offset,
    )

  def _decode(self, params, state: DecodeState, prompt_tokens) -> tuple[SampleOutput, DecodeState]:
    model = model_from_params(self.config, params)
    s = state
    for end, read_chunks in self._segments():
      s = self._loop(model, s, end, read_chunks)
    return self._output(s, prompt_tokens, s.cache.prompt_lengths), s

  def _segment(self, params, state: DecodeState, end, *, read_chunks: int) -> DecodeState:
    return self._loop(model_from_params(self.config, params), state, end, read_chunks)

  def _loop(self, model, state: DecodeState, end, read_chunks: int) -> DecodeState:
    """Decode steps t < `end` (whose fed token, slot t − 1, lies in the first `read_chunks` cache chunks,
    which are all they read), stopping early once every row is done."""

    def body(s: DecodeState) -> DecodeState:
      t = s.step
      logits, cache = model.decode(s.last_token, t - 1, s.cache, read_chunks)
      rows = jnp.where(s.rows == _NO_ROW, _NO_ROW, s.rows + s.row_offset)  # filler rows stay out of range
      tok, lp = self._choose(logits, lax.dynamic_index_in_dim(s.uniforms, t, keepdims=False), t, rows)
      tok = jnp.where(s.done, self.pad_id, tok)
      lp = jnp.where(s.done, 0.0, lp)
      stopped = self._stopped(tok) & ~s.done
      return DecodeState(
        step=t + 1,
        tokens=lax.dynamic_update_slice(s.tokens, tok[:, None], (0, t)),
        logprobs=lax.dynamic_update_slice(s.logprobs, lp[:, None], (0, t)),
        done=s.done | stopped,
        finish=jnp.where(stopped, t, s.finish),
        last_token=tok,
        cache=cache,
        uniforms=s.uniforms,
        rows=s.rows,
        row_offset=s.row_offset,
      )

    return lax.while_loop(lambda s: (s.step < end) & ~jnp.all(s.done), body, state)

  def _output(self, s: DecodeState | Results, prompt_tokens, prompt_lengths) -> SampleOutput:
    n = self.max_new_tokens
    finished = s.finish < n  # includes filler rows (finish −1), dropped by the caller
    lengths = jnp.where(finished, s.finish + 1, n).astype(jnp.int32)
    rows = s.tokens.shape[0]
    is_greedy = jnp.full((rows,), self.greedy_first) & ((jnp.arange(rows) % self.num_samples) == 0)
    return SampleOutput(
      tokens=s.tokens,
      logprobs=s.logprobs,
      lengths=lengths,
      truncated=~finished,
      completion_step=lengths - 1,
      is_greedy=is_greedy,
      prompt_tokens=prompt_tokens,
      prompt_lengths=jnp.asarray(prompt_lengths, jnp.int32),
      num_samples=self.num_samples,
    )

  def _merge(self, results: Results | None, s: DecodeState) -> Results:
    if results is None:  # the first segment: the state holds every row (copied: the state is donated next)
      return Results(tokens=jnp.copy(s.tokens), logprobs=jnp.copy(s.logprobs), finish=jnp.copy(s.finish))
    put = lambda full, part: full.at[s.rows].set(part, mode="drop")  # drops the filler rows (_NO_ROW)
    return Results(
      tokens=put(results.tokens, s.tokens),
      logprobs=put(results.logprobs, s.logprobs),
      finish=put(results.finish, s.finish),
    )

  def _gather_rows(self, s: DecodeState, index: jax.Array) -> DecodeState:
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
    return self._gather_row_data(s.replace(cache=None), index).replace(cache=cache)

  def _gather_row_data(self, s: DecodeState, index: jax.Array) -> DecodeState:
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

  def _empty_chunk(self, rows: int, dtype: str) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
    c, (chunk, _) = self.config, self._chunking
    k = tuple(jnp.zeros((rows, c.num_kv_heads, c.head_dim, chunk), dtype) for _ in range(c.num_layers))
    v = tuple(jnp.zeros((rows, c.num_kv_heads, chunk, c.head_dim), dtype) for _ in range(c.num_layers))
    return k, v


def _nbytes(x) -> int:
  return math.prod(x.shape) * jnp.dtype(x.dtype).itemsize


def _prompt_bytes(cache: KVCache) -> int:
  """Bytes of the cache's prompt part (all layers)."""
  return sum(_nbytes(x) for x in (*cache.prompt_k, *cache.prompt_v))


def _chunk_bytes(cache: KVCache) -> int:
  """Bytes of one completion chunk of every row the cache holds (all layers, keys and values)."""
  return sum(_nbytes(layer[0]) for layer in (*cache.k, *cache.v))


def _gather_peak(cache: KVCache, prompt_scale: float, row_scale: float) -> int:
  """Cache bytes held at most while `Sampler._regroup` copies `cache` array by array into one with
  `prompt_scale` × its prompt copies and `row_scale` × its rows, freeing each old array once copied:
  completion chunks first (they shrink), then the prompt part (which may grow)."""
  held = peak = cache.nbytes
  arrays = [(x, row_scale) for layer in (*cache.k, *cache.v) for x in layer]
  for x, scale in arrays + [(x, prompt_scale) for x in (*cache.prompt_k, *cache.prompt_v)]:
    held += _nbytes(x) * scale
    peak = max(peak, held)
    held -= _nbytes(x)
  return int(round(peak))
