"""The `Sampler`'s jitted programs and the layouts they are jitted with (one concern: a program and its
shardings change together), as a base class of `Sampler`, whose fields they read.

Each program is built once per set of equal samplers (`program_cache.shared_property`): its traced body is
the prefill (`prefill.py`), the decode loop (`decode_loop.py`) or a compaction's gather (`compaction.py`).
Without a mesh a program is a plain `jax.jit`; with one, its inputs and outputs are laid out by the logical
axis rules: batch over the mesh axes of the `batch` rule, heads over `tensor` (`arena_jax.models.sharding`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from arena_jax import program_cache
from arena_jax.models.attention import traced_on_mesh
from arena_jax.models.kv_cache import KVCache
from arena_jax.models.sharding import logical_sharding, num_batch_shards, param_shardings
from arena_jax.models.transformer import abstract_model
from arena_jax.sampling import compaction
from arena_jax.sampling.decode_state import DecodeState, Results, SampleOutput


class SamplerPrograms:
  """The jitted programs of a `Sampler` (its base class: `config`, `mesh`, `rules`, `num_samples`, `_chunking`,
  `_growing`, `_prefill` and `_decode_loop` are the sampler's)."""

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
      return jax.jit(self._decode_loop.decode, donate_argnums=1)
    return jax.jit(
      self._decode_loop.decode,
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
      fn = functools.partial(self._decode_loop.segment, read_chunks=read_chunks)
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
      return jax.jit(self._decode_loop.output)
    return jax.jit(self._decode_loop.output, out_shardings=self._output_shardings)

  @program_cache.shared_property
  def _merge_fn(self):
    """(results or None, state) → the results with the state's rows written in (results donated)."""
    if self.mesh is None:
      return jax.jit(compaction.merge, donate_argnums=0)
    batch1, batch2 = self._batch_sharding(1), self._batch_sharding(2)
    return jax.jit(
      compaction.merge, donate_argnums=0, out_shardings=Results(tokens=batch2, logprobs=batch2, finish=batch1)
    )

  @program_cache.shared_property
  def _compact_fn(self):
    """(state, index int32 [R']) → the state's rows `index` (−1: a filler row, born done)."""
    # Not donated: no output has an input's shape; the old state is freed when the caller drops it.
    if self.mesh is None:
      return jax.jit(compaction.gather_rows)
    return jax.jit(compaction.gather_rows, out_shardings=self._state_shardings)

  @program_cache.shared_property
  def _regroup_rows_fn(self):
    """(state without its cache, index int32 [R']) → its rows `index` (−1: a filler row, born done)."""
    if self.mesh is None:
      return jax.jit(compaction.gather_row_data)
    return jax.jit(compaction.gather_row_data, out_shardings=self._state_shardings_for(1).replace(cache=None))

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
    empty = functools.partial(compaction.empty_chunk, self.config, self._chunking[0])
    if self.mesh is None:
      return jax.jit(empty, static_argnums=(0, 1))
    kt, v, _ = self._cache_shardings
    layers = self.config.num_layers
    return jax.jit(empty, static_argnums=(0, 1), out_shardings=((kt,) * layers, (v,) * layers))

  # ── their layouts ──

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
