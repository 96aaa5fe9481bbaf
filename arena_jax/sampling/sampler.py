"""KV-cache sampler: one prefill per prompt, then G samples per prompt decoded in jitted while_loops.

`Sampler` is the façade (gemma's `_sampler.py`): its fields are the static settings, `__call__` / `stream` run
a call, `lower` gives its programs abstractly. It composes, one file each:

  methods.py       the sampling of one token (`TokenChoice`: logits processor, method, behaviour log-prob,
                   greedy anchor) and the sampling methods: adding a method touches that file only
  prefill.py       prompts padded to a bucket, the prefill pass and the decode state it starts
  decode_loop.py   the decode step, the while_loop repeating it and the output: changing the step touches it only
  compaction.py    between segments: live rows gathered into a smaller state, a growing cache's next chunk
  programs.py      the jitted programs and the layouts they are jitted with (the base class `SamplerPrograms`)
  decode_state.py  the data (`SampleOutput`, `DecodeState`, …) and pure helpers

Shape of a call (gemma's `_prefill.py` + `_sampler_loop.py`, reshaped for RL groups):

  prompts [B] ──pad right to a bucket P──► prefill (jit) ──► KVCache (prompt part [B, …], once per
                                             │                group) + logits of completion token 0
                                             ▼                rows b·G … b·G+G−1 are prompt b's group
         decode (jit, state donated): one lax.while_loop per cache chunk over steps t = 1 … N−1,
                                      stopping as soon as every row is done
                                             ▼
  SampleOutput: tokens, behaviour log-probs, lengths, truncated, completion_step  [B·G, …]

Static shapes: P is the smallest bucket ≥ the longest prompt, N = `max_new_tokens` is fixed, and the
number of prompts is padded to a multiple of the mesh's batch shards, so an RL run compiles one
prefill and one decode program per prompt bucket, whatever the params.

Compaction (`compact_every` > 0) and the growing cache (`decode_cache = "growing"`) make a call host-driven:
decoding runs in segments, and between them finished rows are compacted away and a growing cache gets its
next chunk (compaction.py says how, and why the samples stay those of the plain call).

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
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from arena_jax import parallel
from arena_jax.models.config import ModelConfig
from arena_jax.models.sharding import LOGICAL_AXIS_RULES, num_batch_shards
from arena_jax.models.params import pure_params
from arena_jax.models.transformer import abstract_model
from arena_jax.sampling import compaction
from arena_jax.sampling.decode_loop import DecodeLoop
from arena_jax.sampling.decode_state import (
  DECODE_CACHES,
  DEFAULT_PROMPT_BUCKETS,
  DecodeState,
  SampleOutput,
  StreamChunk,
  _cast_tree,
  cache_chunking,
)
from arena_jax.sampling.methods import RandomSampling, SamplingMethod, TokenChoice
from arena_jax.sampling.prefill import pad_prompts, pad_to_shards, prefill
from arena_jax.sampling.programs import SamplerPrograms

# ─────────────────────────────────────── the sampler ───────────────────────────────────────


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sampler(SamplerPrograms):
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
      rows into a smaller batch when they fit one (see compaction.py; one host round trip per
      check, one more decode program per row bucket); 0: never, one jitted call decodes every row to
      the end of the longest.
    logits_processor: `f(logits [R, V], step, rows [R]) → logits`, applied before choosing each token
      (step 0 = the prefill's token; rows = the rows' indices b·G + i in the call); the behaviour
      log-probs are those of the processed logits. For constraints (e.g. forcing a stop token) that
      must not depend on batch composition; must be jax-traceable and hashable.
    decode_cache: "dense": the prefill allocates the whole completion cache (rows × budget); "growing":
      one chunk at a time, finished rows compacted away at each chunk's end (compaction.py). The same
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

  @functools.cached_property
  def _decode_loop(self) -> DecodeLoop:
    """The decode steps of these settings (decode_loop.py), choosing tokens as `TokenChoice` does."""
    choose = TokenChoice(
      method=self.method,
      num_samples=self.num_samples,
      greedy_first=self.greedy_first,
      logits_processor=self.logits_processor,
    )
    return DecodeLoop(
      config=self.config,
      max_new_tokens=self.max_new_tokens,
      chunking=self._chunking,
      choose=choose,
      stop_tokens=self.stop_tokens,
      pad_id=self.pad_id,
    )

  def _prefill(self, params, tokens, lengths, active, rng, row_offset) -> DecodeState:
    """The traced prefill (prefill.py) of these settings: a growing cache allocates its first chunk only."""
    num_chunks = 1 if self._growing else self._chunking[1]
    return prefill(
      self._decode_loop,
      params,
      tokens,
      lengths,
      active,
      rng,
      row_offset,
      num_chunks=num_chunks,
      cache_dtype=self.cache_dtype,
    )

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
      rng: a `jax.random.key`; or an array of B·G keys, one per row (row r draws its numbers from key r alone,
        whatever the other rows: a server batching requests that each carry a seed, `arena_jax.serving`).
      row_offset: the index of this call's first row among several calls' (a multiple of G): row r
        samples as row row_offset + r of one call with all their prompts would (module docstring).
    """
    if self._growing or (self.compact_every and len(self._decode_loop.segments(self.compact_every)) > 1):
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
    partial: bool = False,
  ) -> Iterator[StreamChunk]:
    """`__call__`, yielding after each chunk of decoding the rows that finished in it (so that judging
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

    `partial` (a server streaming text as it is decoded, `arena_jax.serving`): every chunk also carries every
    row's tokens so far (`StreamChunk.decoded`, `.end`), read back at each chunk's round trip. Without compaction
    and with a dense cache only (a compacted state no longer holds every row). A consumer may stop iterating
    early (closing the generator): no later segment runs.
    """
    if partial and (self.compact_every or self._growing):
      raise ValueError("stream(partial=True) needs compact_every = 0 and decode_cache = 'dense'")
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
    dense_bytes = peak + (self._chunking[1] - state.cache.num_chunks) * compaction.chunk_bytes(state.cache)

    def chunk(index, view, finish, end, last=False):
      finish = finish[:real]
      new = ~reported & ((finish < n) | last)
      rows = np.flatnonzero(new)
      rows = rows[np.lexsort((rows, np.where(finish[rows] < n, finish[rows], n - 1)))]  # arrival order
      reported[rows] = True
      read = len(rows) or partial
      toks, lps = (np.asarray(a) for a in parallel.gather((view.tokens, view.logprobs))) if read else (None, None)
      lengths = np.where(finish[rows] < n, finish[rows] + 1, n).astype(np.int32)
      return StreamChunk(
        index,
        rows,
        toks[rows] if len(rows) else np.zeros((0, n), np.int32),
        lps[rows] if len(rows) else np.zeros((0, n), np.float32),
        lengths,
        lengths - 1,
        finish[rows] >= n,
        decoded=toks[:real] if partial else None,
        end=min(int(end), n),
      )

    def run(index, end, read_chunks):
      nonlocal state, results, peak, params, first
      if refresh is not None and (new := refresh(first)) is not None:
        params = pure_params(new)
      first = end
      if state.cache.num_chunks < read_chunks:  # growing: the chunk this segment writes into, empty
        state = compaction.grow(self, state)
        peak = max(peak, state.cache.nbytes)
      state = self._segment_fn(read_chunks)(params, state, np.int32(end))
      if compacting:
        results = self._merge_fn(results, state)
      view = results if compacting else state
      return view, np.asarray(parallel.gather(view.finish))  # the segment's one host round trip

    segments = self._decode_loop.segments(every, self.compact_every)
    first = 1  # the completion position the next segment decodes first
    # Compactions happen at the ends of `__call__`'s segments only, whatever `every`: the same rows are
    # gathered at the same steps, so the output is `__call__`'s to the bit. Growing: at least at each
    # chunk's end (`DecodeLoop.segments` ends one there), before the next chunk is allocated.
    checks = {end for end, _ in self._decode_loop.segments(self.compact_every)} if compacting else set()
    for index, (end, read_chunks) in enumerate(segments[:-1]):
      view, finish = run(index, end, read_chunks)
      yield chunk(index, view, finish, end)
      if (finish != n).all():
        break  # the remaining loops would not run a step (every row is done)
      if end in checks:
        if self._growing:
          next_chunks = max(state.cache.num_chunks, segments[index + 1][1])
          state, held, gathering = compaction.regroup(self, state, held, finish, next_chunks, dense_bytes)
        else:
          state, held, gathering = compaction.compact(self, state, held, finish)
        peak = max(peak, gathering)
    end, read_chunks = segments[-1]
    view, finish = run(len(segments) - 1, end, read_chunks)
    last = chunk(len(segments) - 1, view, finish, end, last=True)
    out = self._trim(self._finish_fn(view, tokens, lengths), num_prompts)
    last.output = out.replace(peak_cache_bytes=int(peak))
    yield last

  def _row_bucket(self, live: int) -> int:
    """The smallest row count shards × 2^i or shards × 3·2^i holding `live` ≥ 1 rows."""
    return compaction.row_bucket(live, num_batch_shards(self.mesh, self.rules))

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
    tokens, lengths, active = pad_to_shards(tokens, lengths, num_batch_shards(self.mesh, self.rules), self.pad_id)
    if jnp.ndim(rng) == 1:  # a key per row: the filler prompts' rows reuse the first key (their rows are dropped)
      rows = num_prompts * self.num_samples
      if rng.shape[0] != rows:
        raise ValueError(f"rng: {rng.shape[0]} row keys for {num_prompts} prompts × G = {self.num_samples} rows")
      filler = tokens.shape[0] * self.num_samples - rows
      rng = jnp.concatenate([rng, jnp.repeat(rng[:1], filler)]) if filler else rng
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

  def pad_prompts(self, prompts) -> tuple[np.ndarray, np.ndarray]:
    """(tokens int32 [B, P] right-padded with `pad_id` to the bucket P, lengths int32 [B])."""
    return pad_prompts(prompts, self.prompt_buckets, self.pad_id)

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
    prefill_lowered = self._prefill_fn.lower(params, tokens, lengths, active, rng, row_offset)
    state = jax.eval_shape(self._prefill, params, tokens, lengths, active, rng, row_offset)
    return prefill_lowered, self._decode_fn.lower(params, state, tokens)
