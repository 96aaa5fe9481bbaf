"""The decode loop (gemma's `_sampler_loop.py`, reshaped for RL groups): the step, the while_loop that repeats
it, and the `SampleOutput` it ends in. Its carry is `decode_state.DecodeState`; the prefill that starts it is
`prefill.py`; the sampler jits `decode` (one program, every loop) and `segment` (one loop up to a traced end
step, for the host-driven `Sampler.stream`). Changing the decode step is `DecodeLoop.step`.

Cache (`arena_jax.models.kv_cache`): the G samples of a prompt share its prefilled keys and values;
completion token t of every row goes to completion slot t (one in-place dynamic_update_slice per layer
and step), and the step only reads the completion chunks written so far. RoPE positions are per row
(prompt_length + t), exactly as if the prompt were unpadded; `token_logprobs` scores (prompt,
completion) with the same positions.

Loops: one `lax.while_loop` per cache chunk over steps t = 1 … N−1 (`segments`), each stopping as soon as
every row is done; a streamed or compacting call cuts them into shorter segments, the same steps.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from arena_jax.models.config import ModelConfig
from arena_jax.sampling.decode_state import _NO_ROW, DecodeState, Results, SampleOutput, model_from_params
from arena_jax.sampling.methods import TokenChoice


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeLoop:
  """The decode steps of a `Sampler` (its fields of the same names; `chunking` = its (slots per cache chunk,
  number of chunks), `choose` = its `TokenChoice`)."""

  config: ModelConfig
  max_new_tokens: int
  chunking: tuple[int, int]
  choose: TokenChoice
  stop_tokens: tuple[int, ...]
  pad_id: int

  @property
  def num_samples(self) -> int:
    return self.choose.num_samples

  def stopped(self, tokens: jax.Array) -> jax.Array:
    """The stop rule: bool, True where `tokens` is a stop token (the row is done after it)."""
    if not self.stop_tokens:
      return jnp.zeros(tokens.shape, bool)
    return jnp.isin(tokens, jnp.asarray(self.stop_tokens, jnp.int32))

  def segments(self, *everys: int) -> list[tuple[int, int]]:
    """(end step, cache chunks read) of each decode loop: one per cache chunk, split every `e` steps of
    it for each `e` > 0 of `everys`."""
    n = self.max_new_tokens
    chunk, num_chunks = self.chunking
    out = []
    for j in range(num_chunks):
      start, end = j * chunk + 1, min((j + 1) * chunk + 1, n)
      cuts = {c for e in everys if e > 0 for c in range(start + e, end, e)}
      out.extend((e, j + 1) for e in sorted(cuts) + [end])
    return out

  def decode(self, params, state: DecodeState, prompt_tokens) -> tuple[SampleOutput, DecodeState]:
    """Every loop to the end (or until every row is done): (the output, the final state)."""
    model = model_from_params(self.config, params)
    s = state
    for end, read_chunks in self.segments():
      s = self.run(model, s, end, read_chunks)
    return self.output(s, prompt_tokens, s.cache.prompt_lengths), s

  def segment(self, params, state: DecodeState, end, *, read_chunks: int) -> DecodeState:
    """One loop up to the (traced) step `end`."""
    return self.run(model_from_params(self.config, params), state, end, read_chunks)

  def run(self, model, state: DecodeState, end, read_chunks: int) -> DecodeState:
    """Decode steps t < `end` (whose fed token, slot t − 1, lies in the first `read_chunks` cache chunks,
    which are all they read), stopping early once every row is done."""
    body = lambda s: self.step(model, s, read_chunks)
    return lax.while_loop(lambda s: (s.step < end) & ~jnp.all(s.done), body, state)

  def step(self, model, s: DecodeState, read_chunks: int) -> DecodeState:
    """One decode step t = `s.step`: feeds each row's last token, chooses token t, applies the stop rule."""
    t = s.step
    logits, cache = model.decode(s.last_token, t - 1, s.cache, read_chunks)
    rows = jnp.where(s.rows == _NO_ROW, _NO_ROW, s.rows + s.row_offset)  # filler rows stay out of range
    tok, lp = self.choose(logits, lax.dynamic_index_in_dim(s.uniforms, t, keepdims=False), t, rows)
    tok = jnp.where(s.done, self.pad_id, tok)
    lp = jnp.where(s.done, 0.0, lp)
    stopped = self.stopped(tok) & ~s.done
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

  def output(self, s: DecodeState | Results, prompt_tokens, prompt_lengths) -> SampleOutput:
    """The `SampleOutput` of a final state (or of a compacted call's `Results`), filler prompts included."""
    n = self.max_new_tokens
    finished = s.finish < n  # includes filler rows (finish −1), dropped by the caller
    lengths = jnp.where(finished, s.finish + 1, n).astype(jnp.int32)
    rows = s.tokens.shape[0]
    is_greedy = jnp.full((rows,), self.choose.greedy_first) & ((jnp.arange(rows) % self.num_samples) == 0)
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
