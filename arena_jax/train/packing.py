"""Packed training rows for the RL update: each completion with its own unpadded prompt, several to a row.

SPEC §2's CISPO loss needs log π_θ(o_{i,t} | x_i, o_{i,<t}) at every completion token. The padded layout
(`models.token_logprobs`) gives each of the R rows P + N slots whatever its lengths, and RL completion lengths
are skewed (most stop early), so most slots are padding. With `rollout.pack_tokens` = L > 0 the update lays
the same sequences [x_i | o_i] end to end in rows of L tokens instead:

    a packed row     x_a o_a | x_b o_b | x_c o_c | padding
    segment ids      1 … 1   | 2 … 2   | 3 … 3   | 0 … 0
    positions        0 1 …   | 0 1 …   | 0 1 …   | 0 … 0

Each sequence is its own segment (a query sees only its own segment's keys, `models.attention`) at RoPE
positions that restart at 0 and advance by one, so its hidden states, hence its log-probs, are the padded
row's up to float rounding. The update gathers the log-probs back to the rollout's [R, N] layout
(`models.packed_token_logprobs`) and runs the CISPO loss on them unchanged: the same masks, old log-probs,
advantages, reference log-probs and (sum, denominator) aggregation. A hole in a completion's mask (a token
that neither attends nor is attended to in the padded layout) keeps its slot and gets segment 0.

Blocks. The update scans M = `optim.micro_batches` micro-batches of R / M consecutive rows, each spread over
the mesh's S batch shards, so K = M·S blocks of R / K consecutive rows (block k = m·S + s, rows k·R/K …)
each run on one shard. Every block is packed on its own into the same number Rb of rows, so a sequence
never leaves the shard of its original row and the gather back stays local:

    PackedRows.tokens, positions, segment_ids   int32 [K, Rb, L]
    PackedRows.row                              int32 [K, R/K]  the packed row (in its block) of each row
    PackedRows.start                            int32 [K, R/K]  the slot in that row of the state that predicts
                                                                completion token 0 (the last prompt token);
                                                                token t is predicted at start + t

Rb is the most rows a block needs, rounded up to a bucket (`row_bucket`: at most three significant bits,
1 … 8, 10, 12, 14, 16, 20, …) and capped at R / K, so that a run compiles few programs. Packing is
first-fit decreasing with ties in row order: deterministic, so every host of a multi-host run, which holds
the whole step, packs it identically. A completion with no token that carries loss is not packed (its
log-probs are masked to 0 either way).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from arena_jax.errors import ConfigError


class PackedRows(NamedTuple):
  """The packed layout of an update's rows (module docstring): [K, Rb, L] and [K, R / K]."""

  tokens: jax.Array
  positions: jax.Array
  segment_ids: jax.Array
  row: jax.Array
  start: jax.Array


def row_bucket(n: int, cap: int | None = None) -> int:
  """`n` rounded up to at most three significant bits (1 … 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, …:
  four buckets per octave, ≤ 25 % more rows than needed), then at most `cap`."""
  n = max(int(n), 1)
  step = 1 << max(n.bit_length() - 3, 0)
  out = -(-n // step) * step
  return min(out, cap) if cap is not None else out


def sequence_lengths(prompt_lengths, mask) -> tuple[np.ndarray, np.ndarray]:
  """(prompt length, completion slots) of each row: the completion runs to its last token that carries loss
  (0 slots: nothing to predict)."""
  mask = np.asarray(mask, bool)
  n = mask.shape[1]
  last = np.where(mask.any(1), n - np.argmax(mask[:, ::-1], axis=1), 0)
  return np.asarray(prompt_lengths, np.int64), last.astype(np.int64)


def first_fit_decreasing(lengths: np.ndarray, capacity: int) -> np.ndarray:
  """Bin of each item (−1 for an item of length 0) for items of `lengths` ≤ `capacity`: longest first (ties in
  order of index), each into the first bin it fits in. Deterministic."""
  bins = np.full(len(lengths), -1, np.int64)
  free = np.zeros(0, np.int64)
  for i in np.lexsort((np.arange(len(lengths)), -np.asarray(lengths))):
    n = int(lengths[i])
    if n == 0:
      continue
    fits = np.flatnonzero(free >= n)
    if fits.size:
      bins[i] = fits[0]
      free[fits[0]] -= n
    else:
      bins[i] = free.size
      free = np.append(free, capacity - n)
  return bins


def pack_rollout(rollout, *, pack_tokens: int, micro_batches: int = 1, shards: int = 1, pad_id: int = 0):
  """`rollout` (a `step.Rollout` of host or device arrays, rows [R]) with `packed` set to its `PackedRows` in
  rows of `pack_tokens` tokens, K = `micro_batches` × `shards` blocks (module docstring).

  Raises ConfigError naming `rollout.pack_tokens` when a sequence (prompt + completion) is longer.
  """
  prompts, tokens = np.asarray(rollout.prompt_tokens), np.asarray(rollout.tokens)
  plen, clen = sequence_lengths(rollout.prompt_lengths, rollout.mask)
  mask = np.asarray(rollout.mask, bool)
  rows, blocks = prompts.shape[0], micro_batches * shards
  if pack_tokens < 1:
    raise ValueError(f"pack_tokens must be ≥ 1, got {pack_tokens}")
  if rows % blocks:
    raise ValueError(f"{rows} rows do not split into micro_batches × shards = {micro_batches} × {shards} blocks")
  total = np.where(clen > 0, plen + clen, 0)
  if total.max(initial=0) > pack_tokens:
    r = int(np.argmax(total))
    raise ConfigError(
      f"config.rollout.pack_tokens: {pack_tokens} is shorter than a sequence of this update: row {r} holds "
      f"{plen[r]} prompt + {clen[r]} completion = {total[r]} tokens. Raise rollout.pack_tokens to at least the "
      "longest prompt + rollout.max_new_tokens, or set it to 0 (no packing)"
    )
  per_block = rows // blocks
  bins = [first_fit_decreasing(total[k * per_block : (k + 1) * per_block], pack_tokens) for k in range(blocks)]
  rb = row_bucket(max(int(b.max(initial=-1)) + 1 for b in bins), cap=per_block)

  out_tokens = np.full((blocks, rb, pack_tokens), pad_id, np.int32)
  positions = np.zeros((blocks, rb, pack_tokens), np.int32)
  segments = np.zeros((blocks, rb, pack_tokens), np.int32)
  row = np.zeros((blocks, per_block), np.int32)
  start = np.zeros((blocks, per_block), np.int32)
  for k, block_bins in enumerate(bins):
    used = np.zeros(rb, np.int64)  # filled slots of each packed row
    count = np.zeros(rb, np.int32)  # segments in each packed row
    for j in range(per_block):  # in row order: a packed row holds its sequences in the order of their rows
      b = int(block_bins[j])
      if b < 0:
        continue
      r, p, c, at = k * per_block + j, int(plen[k * per_block + j]), int(clen[k * per_block + j]), int(used[b])
      n = p + c
      count[b] += 1
      out_tokens[k, b, at : at + p] = prompts[r, :p]
      out_tokens[k, b, at + p : at + n] = tokens[r, :c]
      positions[k, b, at : at + n] = np.arange(n)
      # A masked token inside the completion is padding in the padded layout too: attended by nobody.
      segments[k, b, at : at + n] = np.where(np.concatenate([np.ones(p, bool), mask[r, :c]]), count[b], 0)
      row[k, j], start[k, j] = b, at + p - 1
      used[b] += n
  return rollout._replace(packed=PackedRows(out_tokens, positions, segments, row, start))


def packed_fill(packed: PackedRows) -> float:
  """Share of the packed rows' slots that hold a sequence's token (the rest is padding)."""
  segments = np.asarray(packed.segment_ids)
  return float((segments > 0).sum() / max(segments.size, 1))
