"""The prefill (gemma's `_prefill.py`, reshaped for RL groups): the prompts padded to a static shape, one
forward pass per prompt that fills its K/V cache, and the decode state of its G rows, completion token 0
chosen from the prompt's last logits (`methods.TokenChoice`, as every later step's).

Static shapes: P is the smallest bucket ≥ the longest prompt and the number of prompts is padded to a multiple
of the mesh's batch shards (filler prompts of one pad token, born done), so an RL run compiles one prefill per
prompt bucket, whatever the params.

Randomness: one uniform per row and step, drawn here for the whole decode (the loop body holds no RNG): row r's
N numbers come from fold_in(rng, row_offset + r), so they depend on the key and the row index only — not on the
batch padding a mesh needs, nor on the device count (jax's threefry is partitionable).
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from arena_jax.sampling.decode_loop import DecodeLoop
from arena_jax.sampling.decode_state import DecodeState, bucket_length, model_from_params
from arena_jax.sampling.methods import uniforms


def pad_prompts(prompts, buckets: Sequence[int], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
  """(tokens int32 [B, P] right-padded with `pad_id` to the bucket P of `buckets`, lengths int32 [B]) of
  token lists or of (tokens [B, L] right-padded, lengths [B])."""
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
  p = bucket_length(int(lengths.max()), buckets)
  out = np.full((len(rows), p), pad_id, np.int32)
  for i, r in enumerate(rows):
    out[i, : len(r)] = r
  return out, lengths


def pad_to_shards(
  tokens: np.ndarray, lengths: np.ndarray, shards: int, pad_id: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(tokens, lengths, active) with filler prompts of one pad token (active False: born done) up to a
  multiple of `shards` prompts."""
  num_prompts = tokens.shape[0]
  padded = -(-num_prompts // shards) * shards
  active = np.arange(padded) < num_prompts
  if padded != num_prompts:
    tokens = np.concatenate([tokens, np.full((padded - num_prompts, tokens.shape[1]), pad_id, np.int32)])
    lengths = np.concatenate([lengths, np.ones(padded - num_prompts, np.int32)])
  return tokens, lengths, active


def prefill(
  loop: DecodeLoop, params, tokens, lengths, active, rng, row_offset, *, num_chunks: int, cache_dtype: str | None
) -> DecodeState:
  """The traced prefill: the decode state that `loop` continues, its cache holding `num_chunks` completion
  chunks (all of them, or a growing cache's first) of dtype `cache_dtype` (None: the compute dtype)."""
  model = model_from_params(loop.config, params)
  g, n = loop.num_samples, loop.max_new_tokens
  chunk = loop.chunking[0]
  cache_dtype = jnp.dtype(cache_dtype) if cache_dtype else None
  logits, cache = model.prefill(tokens, lengths, group=g, num_chunks=num_chunks, chunk=chunk, cache_dtype=cache_dtype)
  # One prefill per prompt: its G samples share the cached prompt and start from the same logits.
  logits, active = jnp.repeat(logits, g, axis=0), jnp.repeat(active, g, axis=0)
  rows = logits.shape[0]
  row_ids = jnp.arange(rows, dtype=jnp.int32)
  row_offset = jnp.asarray(row_offset, jnp.int32)
  if rng.ndim == 1:  # a key per row (`Sampler.__call__`'s row keys): each row's own numbers, wherever it sits
    u = jax.vmap(lambda key: uniforms(key, (n,)), out_axes=1)(rng)
  else:
    u = jax.vmap(lambda r: uniforms(jax.random.fold_in(rng, r), (n,)), out_axes=1)(row_offset + row_ids)
  first, first_lp = loop.choose(logits, u[0], jnp.asarray(0, jnp.int32), row_offset + row_ids)
  done0 = ~active
  first = jnp.where(done0, loop.pad_id, first)
  first_lp = jnp.where(done0, 0.0, first_lp)
  stopped = loop.stopped(first) & active
  return DecodeState(
    step=jnp.asarray(1, jnp.int32),
    tokens=jnp.full((rows, n), loop.pad_id, jnp.int32).at[:, 0].set(first),
    logprobs=jnp.zeros((rows, n), jnp.float32).at[:, 0].set(first_lp),
    done=done0 | stopped,
    finish=jnp.where(stopped, 0, jnp.where(done0, -1, n)).astype(jnp.int32),
    last_token=first,
    cache=cache,
    uniforms=u,
    rows=row_ids,
    row_offset=row_offset,
  )
