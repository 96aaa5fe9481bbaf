"""The policy server's engine: concurrent requests batched into one sampler call (windowed batching).

Requests (`Job`: one or more prompts × n samples) wait in a queue. One engine thread takes the oldest, waits
`window_s` for companions, and runs every waiting job that samples alike (`Job.batch_key`: the same sampling
method and the same completion budget bucket) in one `Sampler.stream` call, up to `max_rows` rows. So throughput
grows with concurrency: on a CPU or an accelerator, a decode step of 8 rows costs far less than 8 steps of 1.

One call, rows and shapes: each sample is a row (G = 1; a prompt asked for n times is n rows). The row count is
padded to a power of two and the completion budget to a bucket (`token_bucket`), and prompts to the sampler's
prompt buckets, so a server compiles one prefill and one decode program per (rows, prompt bucket, budget bucket,
sampling method) that it meets, once (seconds on a CPU for a 135M model; each distinct temperature / top_p /
top_k is a method of its own).

While the call decodes, every `stream_every` steps the rows' tokens so far come back (`Sampler.stream(partial=
True)`): a row ends at its stop token, its own `max_tokens` or a `stop` string, and streamed requests get their
new text. The call stops as soon as every row of the batch has ended or its client has gone (`cancel`), so a
client that disconnects frees its rows at the next chunk.

Seeds: every row draws its random numbers from a key of its own (`Sampler`'s row keys): choice j of a request with
a `seed` from (seed, j), whatever else shares its call, so the same request with the same seed draws the same
numbers; others from the server's own sequence. (As on any batching server, a call of other shapes, more rows or a
longer prompt bucket, may round a float differently and so flip a near-tie token.)

Log-probs (`logprobs`): after sampling, one teacher-forced pass over prompt + completion gives each completion
token's log-probability under the model (temperature 1) and its `top_logprobs` alternatives (`score`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import threading
import time
import traceback
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from arena_jax.sampling import Greedy, RandomSampling, Sampler, bucket_length, model_from_params

TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
SCORE_TOP = 20  # the most top_logprobs a request may ask for (OpenAI's limit); computed once, sliced per request


def token_bucket(n: int) -> int:
  """The completion budget a call decodes for a request of `n` max tokens: the smallest bucket ≥ n."""
  return next((b for b in TOKEN_BUCKETS if b >= n), n)


def row_bucket(n: int) -> int:
  return 1 << max(0, int(n) - 1).bit_length()


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
  """A request's sampling: temperature 0 is greedy; top_p 1 and top_k 0 are off."""

  temperature: float = 1.0
  top_p: float = 1.0
  top_k: int = 0

  def method(self):
    if self.temperature == 0:
      return Greedy()
    return RandomSampling(self.temperature, self.top_k or None, self.top_p if self.top_p < 1 else None)


@dataclasses.dataclass
class ChoiceState:
  """One sample of a job, as far as it has decoded."""

  tokens: list = dataclasses.field(default_factory=list)
  text: str = ""
  finish_reason: str | None = None
  sent: int = 0  # characters streamed
  logprob_entries: list | None = None


@dataclasses.dataclass(eq=False)
class Job:
  """One request: `prompts` × `n` samples (choice i·n + j is prompt i's j-th), and how to sample them."""

  id: str
  kind: str  # "chat" | "completion"
  prompts: list
  n: int
  max_tokens: int
  settings: SamplingSettings
  seed: int | None
  stop: tuple
  stream: bool
  include_usage: bool
  logprobs: int | None  # None: none; k ≥ 0: each token's log-prob and its k alternatives
  created: int
  choices: list = dataclasses.field(init=False)
  cancelled: bool = False
  events: Any = None
  loop: Any = None

  def __post_init__(self):
    self.choices = [ChoiceState() for _ in range(len(self.prompts) * self.n)]

  @property
  def rows(self) -> int:
    return len(self.choices)

  @property
  def batch_key(self):
    """Jobs with equal keys share a sampler call."""
    return self.settings.method(), token_bucket(self.max_tokens)

  @property
  def ended(self) -> bool:
    return self.cancelled or all(c.finish_reason for c in self.choices)

  def emit(self, *event) -> None:
    """Hands an event to the request's handler, on its event loop (thread-safe)."""
    if self.loop is not None and not self.cancelled:
      self.loop.call_soon_threadsafe(self.events.put_nowait, event)


def _held_back(text: str, stops: tuple) -> int:
  """How many trailing characters a stream must hold back: an incomplete UTF-8 character, or the start of a
  `stop` string that the next tokens may complete."""
  hold = len(text) - len(text.rstrip("\ufffd"))
  for s in stops:
    for k in range(min(len(s) - 1, len(text)), 0, -1):
      if text.endswith(s[:k]):
        hold = max(hold, k)
        break
  return hold


class Engine:
  """Runs jobs in batched sampler calls on one thread (module docstring).

  Args:
    policy: a `ServedPolicy`.
    max_rows: the most rows (samples) in one call.
    window_s: how long the oldest waiting job waits for companions before its call starts.
    stream_every: decode steps between two reads of the rows' tokens (stop strings, streaming, cancellations).
    seed: the server's key for unseeded requests.
  """

  def __init__(self, policy, *, max_rows: int = 32, window_s: float = 0.05, stream_every: int = 16, seed: int = 0):
    if max_rows < 1 or stream_every < 1:
      raise ValueError(f"max_rows and stream_every must be ≥ 1 (got {max_rows}, {stream_every})")
    self.policy = policy
    self.max_rows, self.window_s, self.stream_every = int(max_rows), float(window_s), int(stream_every)
    self._seed = int(seed)
    self._calls = itertools.count()
    self._pending: list[Job] = []
    self._cond = threading.Condition()
    self._closed = False
    self._running: list[Job] = []
    self._samplers: dict = {}
    self.stats = {"batches": 0, "rows": 0, "padded_rows": 0, "largest_batch": 0, "cancelled": 0, "errors": 0}
    self.stats["batch_sizes"] = {}
    self._thread = threading.Thread(target=self._serve, name="arena_jax-engine", daemon=True)
    self._thread.start()

  # ── the handlers' side ──

  def submit(self, job: Job, loop: asyncio.AbstractEventLoop | None = None) -> None:
    if job.rows > self.max_rows:
      raise ValueError(f"a job of {job.rows} rows exceeds max_rows = {self.max_rows}")
    job.loop, job.events = loop, asyncio.Queue() if loop is not None else None
    with self._cond:
      if self._closed:
        raise RuntimeError("the engine is closed")
      self._pending.append(job)
      self._cond.notify()

  def cancel(self, job: Job) -> None:
    """The client has gone: drop the job from the queue, or end its rows at the running call's next chunk."""
    with self._cond:
      if job.cancelled or job.ended:
        return
      job.cancelled = True
      self.stats["cancelled"] += 1
      if job in self._pending:
        self._pending.remove(job)

  def active(self) -> dict:
    with self._cond:
      running = [j for j in self._running if not j.ended]
      return {"queued": len(self._pending), "running": len(running), "running_rows": sum(j.rows for j in running)}

  def close(self) -> None:
    with self._cond:
      self._closed = True
      self._cond.notify_all()
    self._thread.join(timeout=60)

  # ── the engine thread ──

  def _serve(self) -> None:
    while True:
      jobs = self._take()
      if jobs is None:
        return
      try:
        self._run(jobs)
      except Exception as e:  # the server stays up; these requests get a 500 naming the error
        self.stats["errors"] += 1
        message = f"sampling failed: {type(e).__name__}: {e}"
        traceback.print_exc()
        for job in jobs:
          job.emit("error", message)
      finally:
        with self._cond:
          self._running = []

  def _take(self) -> list[Job] | None:
    with self._cond:
      while not self._pending and not self._closed:
        self._cond.wait()
      if self._closed:
        return None
      rows = sum(j.rows for j in self._pending)
    if rows < self.max_rows and self.window_s > 0:
      time.sleep(self.window_s)  # companions that arrive now share the call
    with self._cond:
      key = self._pending[0].batch_key
      jobs, rows = [], 0
      for job in list(self._pending):
        if job.batch_key == key and rows + job.rows <= self.max_rows:
          jobs.append(job)
          rows += job.rows
          self._pending.remove(job)
      self._running = jobs
      return jobs

  def _sampler(self, method, max_new_tokens: int) -> Sampler:
    """One sampler per (method, budget), kept by this engine (an lru_cache on the method would keep every engine
    alive for the process's life)."""
    key = (method, max_new_tokens)
    if key not in self._samplers:
      self._samplers[key] = Sampler(
        config=self.policy.config,
        max_new_tokens=max_new_tokens,
        method=method,
        stop_tokens=self.policy.stop_tokens,
        pad_id=self.policy.pad_id,
      )
    return self._samplers[key]

  def _run(self, jobs: list[Job]) -> None:
    rows = [(job, i * job.n + j, p) for job in jobs for i, p in enumerate(job.prompts) for j in range(job.n)]
    padded = row_bucket(len(rows))
    prompts = [p for _, _, p in rows] + [rows[0][2]] * (padded - len(rows))  # filler rows, discarded
    method, budget = jobs[0].batch_key
    sampler = self._sampler(method, budget)
    # A key per row: (the request's seed, its choice index), or (a seed of the server's sequence, the row).
    call = (self._seed * 1_000_003 + next(self._calls)) & 0x7FFFFFFF
    seeds = [job.seed & 0xFFFFFFFF if job.seed is not None else call for job, _, _ in rows]
    index = [i if job.seed is not None else r for r, (job, i, _) in enumerate(rows)]
    filler = padded - len(rows)
    rng = _row_keys(np.asarray(seeds + seeds[:1] * filler, np.uint32), np.asarray(index + index[:1] * filler, np.int32))
    self.stats["batches"] += 1
    self.stats["rows"] += len(rows)
    self.stats["padded_rows"] += padded - len(rows)
    self.stats["largest_batch"] = max(self.stats["largest_batch"], len(rows))
    sizes = self.stats["batch_sizes"]
    sizes[len(rows)] = sizes.get(len(rows), 0) + 1
    stream = sampler.stream(self.policy.params, prompts, rng, every=self.stream_every, partial=True)
    try:
      for chunk in stream:
        last = chunk.output is not None
        for r, (job, index, _) in enumerate(rows):
          if not job.cancelled:
            self._advance(job, index, chunk.decoded[r, : chunk.end], last)
        for job in jobs:
          self._publish(job)
        if all(job.ended for job in jobs):
          break  # every row has ended or lost its client: no later segment runs
    finally:
      stream.close()
    for job in jobs:
      if job.cancelled:
        continue
      if job.logprobs is not None:
        for index, c in enumerate(job.choices):
          c.logprob_entries = self.score(job.prompts[index // job.n], c.tokens, job.logprobs)
          if job.stream:
            job.emit("delta", index, c.text[c.sent :], c.finish_reason, c.logprob_entries)
      job.emit("done")

  def _advance(self, job: Job, index: int, tokens: np.ndarray, last: bool) -> None:
    """Choice `index` of `job` with its tokens decoded so far: its text, and whether and why it has ended."""
    c = job.choices[index]
    if c.finish_reason:
      return
    tokens = [int(t) for t in tokens]
    finish = None
    stops = [i for i, t in enumerate(tokens) if t in self.policy.stop_tokens]
    if stops and stops[0] < job.max_tokens:
      tokens, finish = tokens[: stops[0]], "stop"
    elif len(tokens) >= job.max_tokens:
      tokens, finish = tokens[: job.max_tokens], "length"
    elif last:
      finish = "length"
    text = self.policy.tokenizer.decode(tokens, stop_at_eos=False)
    cut = [i for i in (text.find(s) for s in job.stop) if i >= 0]
    if cut:
      text, finish = text[: min(cut)], "stop"
    c.tokens, c.text, c.finish_reason = tokens, text, finish

  def _publish(self, job: Job) -> None:
    """A streamed job's new text, choice by choice (held back where a stop string or a character may go on)."""
    if not job.stream or job.cancelled:
      return
    for index, c in enumerate(job.choices):
      if c.sent < 0:  # its end has been streamed
        continue
      upto = len(c.text) if c.finish_reason else len(c.text) - _held_back(c.text, job.stop)
      new = c.text[c.sent : upto] if upto > c.sent else ""
      if c.finish_reason and job.logprobs is None:
        job.emit("delta", index, new, c.finish_reason, None)
        c.sent = -1
      elif new:  # with log-probs a choice's end comes after the scoring pass (`_run`)
        job.emit("delta", index, new, None, None)
        c.sent = upto

  # ── log-probs ──

  def score(self, prompt: list[int], completion: list[int], top: int) -> list[dict]:
    """The OpenAI log-prob entries of `completion` after `prompt`: each token's log-probability under the model
    (temperature 1) and its `top` most likely alternatives."""
    if not completion:
      return []
    tokens = list(prompt) + list(completion)
    length = bucket_length(len(tokens), (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768))
    padded = np.full((1, length), self.policy.pad_id, np.int32)
    padded[0, : len(tokens)] = tokens
    chosen, top_lp, top_ids = (np.asarray(a) for a in _score(self.policy.config, self.policy.params, padded))
    decode = self.policy.tokenizer.decode
    entries = []
    for k, token in enumerate(completion):
      at = len(prompt) - 1 + k  # the logits at position t predict token t + 1

      def entry(tok, lp):
        text = decode([int(tok)], stop_at_eos=False)
        return {"token": text, "logprob": float(lp), "bytes": list(text.encode("utf-8"))}

      item = entry(token, chosen[0, at])
      item["top_logprobs"] = [entry(t, lp) for t, lp in zip(top_ids[0, at, :top], top_lp[0, at, :top])]
      entries.append(item)
    return entries


@jax.jit
def _row_keys(seeds, index):
  """One key per row: fold_in(key(seed), index)."""
  return jax.vmap(lambda s, i: jax.random.fold_in(jax.random.key(s), i))(seeds, index)


@functools.partial(jax.jit, static_argnums=0)
def _score(config, params, tokens):
  """(log-prob of each next token [1, T], the SCORE_TOP best log-probs and their ids [1, T, K]) at each position."""
  logits = model_from_params(config, params)(tokens).astype(jnp.float32)
  logp = jax.nn.log_softmax(logits, axis=-1)
  nxt = jnp.concatenate([tokens[:, 1:], tokens[:, -1:]], axis=1)
  chosen = jnp.take_along_axis(logp, nxt[..., None], axis=-1)[..., 0]
  top_lp, top_ids = jax.lax.top_k(logp, SCORE_TOP)
  return chosen, top_lp, top_ids
