"""What a judge request costs in the judge's own tokens, and traces cut so that the request fits its context.

Over-long traces are cut to `judge.token_budget` (SPEC §9: a pair can exceed 160k tokens; `hygiene.truncate`),
and the whole request must fit the judge's context: prompt tokens + `judge.max_tokens` ≤ context, or vLLM
refuses it with HTTP 400. Both are counted by `judge.tokenizer`:

  ""        the estimate of `hygiene.count_tokens` (a word of up to 8 letters, up to 3 digits, one other
            character: one token). It can undercount a real tokenizer several-fold (a digit per token, or
            byte-level pieces of unusual text), so a request it lets through can still exceed the context.
  a path    the judge's own tokenizer, loaded with `arena_jax.tokenizer.load_tokenizer` (a HF `tokenizer.json`
            or a directory holding one, a SentencePiece `.model` or a directory with `tokenizer.model`; no
            torch or transformers). A request is counted as rendered by the tokenizer's chat template when it
            has one (`chat_template.jinja` or `tokenizer_config.json`, with `judge.extra_body`'s
            `chat_template_kwargs`), which is what vLLM tokenises; without a template, as its contents plus
            CHAT_MESSAGE_TOKENS per message and CHAT_REQUEST_TOKENS per request — more than the turn markers
            of ChatML, Llama 3 or Gemma (≈ 5 per message) and the BOS, generation prompt and default system
            text that Llama 3.1 and Qwen 2.5 templates add.
  "server"  the judge's server counts: vLLM's `POST /tokenize` (`{"model", "messages"}` for a request, so the
            server applies its own chat template; `{"model", "prompt"}` for a trace), at each judge URL's
            root (`client.endpoints.tokenize_url`). Counts are cached (`Memo`), concurrent asks for one
            count share one request, and the server's `max_model_len` is the context when
            `judge.context_tokens` is 0. A server without the endpoint (HTTP 404 / 405 / 501) is a
            configuration error naming the field and the URL; a server that fails to answer fails the
            judgment (reason `tokenize`, dropped and counted as every failed judgment is).

The context is `judge.context_tokens`, or (0) the server's `max_model_len` with "server", or (0) what the server
said at start-up (`client.served_context`: vLLM's `/v1/models` lists `max_model_len`; a `transformers serve` judge
that the run started has its model's context); with none, traces are only cut to `token_budget`. A request's
answer budget is the verdict format's (`judges.formats`; `judge.max_tokens` for `reasoned`) clipped to the
context minus the prompt, down to MIN_ANSWER_TOKENS; when a request does not fit even then, its traces are cut
further (the longest first, `water_fill`) and counted again, until it fits; a request that cannot fit even with
its traces cut to MIN_TRACE_TOKENS fails (reason `context`) without a call.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import hashlib
import json
import math
import os
from typing import Any, Awaitable, Callable, Hashable, NamedTuple, Sequence

from arena_jax.errors import ConfigError
from arena_jax.judges import formats
from arena_jax.judges import hygiene
from arena_jax.judges.client import TokenizeError

CHAT_MESSAGE_TOKENS = 8  # turn markers and role of one message, without a chat template to render
CHAT_REQUEST_TOKENS = 64  # BOS, generation prompt and a template's default system text, without a template
MIN_ANSWER_TOKENS = 512  # the least answer budget a request keeps before its traces are cut (or max_tokens, if less)
MIN_TRACE_TOKENS = 16  # a trace cut below this says nothing: the request fails instead (reason `context`)
FIT_COUNTS = 8  # counts one trace's cut may take (each cut is searched for, see `fit_text`)
FIT_ROUNDS = 6  # rounds of cutting the traces further until a request fits its context
TOKENIZER_CHOICES = '"", "server", or the path of a tokenizer.json / tokenizer directory / SentencePiece .model'


def _digest(text: str) -> bytes:
  return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class Memo:
  """An async LRU memo: concurrent asks for one key share one computation; a failed one is not kept.

  Its in-flight computations belong to one event loop; on another loop they are forgotten (values stay).
  """

  def __init__(self, size: int = 8192):
    self.size = size
    self.values: collections.OrderedDict = collections.OrderedDict()
    self._loop = None
    self._pending: dict = {}

  def peek(self, key: Hashable) -> Any:
    """The stored value of `key`, or None."""
    return self.values.get(key)

  def put(self, key: Hashable, value: Any) -> None:
    self.values[key] = value
    self.values.move_to_end(key)
    while len(self.values) > self.size:
      self.values.popitem(last=False)

  async def get(self, key: Hashable, compute: Callable[[], Awaitable[Any]]) -> Any:
    if key in self.values:
      self.values.move_to_end(key)
      return self.values[key]
    loop = asyncio.get_running_loop()
    if loop is not self._loop:
      self._loop, self._pending = loop, {}
    task = self._pending.get(key)
    if task is None:
      task = self._pending[key] = asyncio.ensure_future(compute())
      task.add_done_callback(functools.partial(self._done, key, self._pending))
    # Shielded: one caller cancelled (a judgment past the step's deadline) leaves the others their count.
    return await asyncio.shield(task)

  def _done(self, key: Hashable, pending: dict, task: asyncio.Future) -> None:
    pending.pop(key, None)
    if not task.cancelled() and task.exception() is None:
      self.put(key, task.result())


# ─────────────────────────────────────────── counters ───────────────────────────────────────────


class TokenCounter:
  """Counts a text or a chat request the way the judge will (module docstring). `exact`: False for the
  estimate, whose cuts are today's `hygiene.truncate` unchanged."""

  exact = True
  source = ""

  async def text(self, text: str) -> int:
    raise NotImplementedError

  async def messages(self, messages: Sequence[dict]) -> int:
    raise NotImplementedError

  def context(self) -> int | None:
    """The judge's context as the counter learnt it (the server's `max_model_len`), else None."""
    return None


def _overhead(counts: Sequence[int]) -> int:
  """A request of messages whose contents count `counts`, without a chat template (module docstring)."""
  return sum(counts) + CHAT_MESSAGE_TOKENS * len(counts) + CHAT_REQUEST_TOKENS


class EstimateCounter(TokenCounter):
  """`judge.tokenizer = ""`: `hygiene.count_tokens`, plus the fixed chat overhead for a request."""

  exact = False
  source = "the estimate (judge.tokenizer = '')"

  async def text(self, text: str) -> int:
    return hygiene.count_tokens(text)

  async def messages(self, messages: Sequence[dict]) -> int:
    return _overhead([hygiene.count_tokens(m.get("content") or "") for m in messages])


class LocalCounter(TokenCounter):
  """`judge.tokenizer = <path>`: the judge's tokenizer, loaded here (module docstring)."""

  def __init__(self, tokenizer, *, template_kwargs: dict | None = None, source: str = ""):
    self.tokenizer = tokenizer
    self.template_kwargs = dict(template_kwargs or {})
    self.source = source or getattr(tokenizer, "path", "") or type(tokenizer).__name__
    self._counts = Memo(16384)

  def count(self, text: str) -> int:
    if not text:
      return 0
    key = _digest(text)
    n = self._counts.peek(key)
    if n is None:
      n = len(self.tokenizer.encode(text))
      self._counts.put(key, n)
    return n

  def count_messages(self, messages: Sequence[dict]) -> int:
    if getattr(self.tokenizer, "chat_template", None):
      rendered = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, **self.template_kwargs)
      return self.count(rendered)  # the template writes its own BOS (vLLM adds none on top for chat)
    return _overhead([self.count(m.get("content") or "") for m in messages])

  async def text(self, text: str) -> int:
    return self.count(text)

  async def messages(self, messages: Sequence[dict]) -> int:
    return self.count_messages(messages)


class ServerCounter(TokenCounter):
  """`judge.tokenizer = "server"`: vLLM's `POST /tokenize` through the judge's client, cached."""

  def __init__(self, client, *, template_kwargs: dict | None = None):
    self.client = client
    self.template_kwargs = dict(template_kwargs or {})
    self.source = f"POST /tokenize at {', '.join(client.urls)}"
    self._counts = Memo(16384)
    self._context: int | None = None
    self.requests = 0  # /tokenize requests answered (cache hits are not requests)

  async def _ask(self, body: dict) -> int:
    key = hashlib.blake2b(json.dumps(body, sort_keys=True).encode("utf-8"), digest_size=16).digest()

    async def compute():
      try:
        answer = await self.client.tokenize(body)
      except TokenizeError as e:
        if e.unsupported:
          raise ConfigError(
            f"judge.tokenizer = 'server': the judge at {e.url} does not count tokens ({e}); it needs "
            "vLLM's POST /tokenize. Set judge.tokenizer to the judge's tokenizer (a tokenizer.json, its "
            "directory or a SentencePiece .model) or to '' (the estimate)"
          ) from None
        raise
      self.requests += 1
      if answer.get("max_model_len"):
        self._context = int(answer["max_model_len"])
      return int(answer["count"])

    return await self._counts.get(key, compute)

  async def text(self, text: str) -> int:
    if not text:
      return 0
    return await self._ask({"prompt": text, "add_special_tokens": False})

  async def messages(self, messages: Sequence[dict]) -> int:
    body = {"messages": [dict(m) for m in messages], "add_generation_prompt": True}
    if self.template_kwargs:
      body["chat_template_kwargs"] = self.template_kwargs
    return await self._ask(body)

  def context(self) -> int | None:
    return self._context


@functools.lru_cache(maxsize=8)
def _load(path: str):
  from arena_jax import tokenizer as tokenizer_lib  # pylint: disable=g-import-not-at-top  (sentencepiece, on use)

  try:
    return tokenizer_lib.load_tokenizer(path)
  except ImportError as e:  # a tokenizer.json needs the `tokenizers` package (the `hf` extra; no torch)
    raise ConfigError(f"judge.tokenizer: {path!r} needs {e.name or 'tokenizers'}: pip install tokenizers") from e
  except Exception as e:  # pylint: disable=broad-except  (any failure to load is the field's value at fault)
    raise ConfigError(
      f"judge.tokenizer: cannot load a tokenizer from {path!r} ({type(e).__name__}: {e}); it takes {TOKENIZER_CHOICES}"
    ) from e


def check_tokenizer(value) -> str | None:
  """What is wrong with a `judge.tokenizer` value (the config's check), or None."""
  if not isinstance(value, str):
    return f"must be {TOKENIZER_CHOICES}, got {value!r}"
  if value in ("", "server"):
    return None
  path = os.path.expanduser(value)
  if os.path.isdir(path):
    if not any(os.path.isfile(os.path.join(path, f)) for f in ("tokenizer.json", "tokenizer.model")):
      return f"the directory {value!r} holds neither tokenizer.json nor tokenizer.model"
    return None
  if not os.path.isfile(path):
    return f"must be {TOKENIZER_CHOICES}; no such file or directory: {value!r}"
  return None


def template_kwargs(config) -> dict:
  """`judge.extra_body`'s `chat_template_kwargs`: what the server's chat template is rendered with."""
  extra = config.get("extra_body") if hasattr(config, "get") else None
  kwargs = extra.get("chat_template_kwargs") if extra is not None and hasattr(extra, "get") else None
  return dict(kwargs) if kwargs is not None and hasattr(kwargs, "keys") else {}


def make_counter(config, client) -> TokenCounter:
  """The counter of `config.tokenizer` (module docstring); `client` is the judge's `JudgeClient` ("server")."""
  value = config.get("tokenizer", "") if hasattr(config, "get") else ""
  problem = check_tokenizer(value)
  if problem:
    raise ConfigError(f"judge.tokenizer: {problem}")
  if value == "":
    return EstimateCounter()
  if value == "server":
    return ServerCounter(client, template_kwargs=template_kwargs(config))
  path = os.path.expanduser(value)
  return LocalCounter(_load(path), template_kwargs=template_kwargs(config), source=value)


# ─────────────────────────────────────────── fitting ───────────────────────────────────────────


async def fit_text(text: str, budget: int, count: Callable[[str], Awaitable[int]], *, tail_fraction: float) -> str:
  """`text` cut by `hygiene.truncate` to at most `budget` tokens of `count` (unchanged when it fits).

  `truncate` cuts by the estimate, so the estimate's budget b is searched for: first b = budget × (the
  text's estimate / its count), then each cut's count corrects b (shrinking it when over, growing it when
  well under), within FIT_COUNTS counts; the largest cut that fits is kept. When none fits (markers alone
  over a tiny budget), the smallest cut is returned and the request's own fit decides.
  """
  n = await count(text)
  if n <= budget:
    return text
  pieces = hygiene.count_tokens(text)
  lo, hi = 0, pieces  # truncate(text, lo) fits (0: none found yet); truncate(text, hi) does not
  best, smallest = None, None
  b = max(1, min(pieces - 1, math.floor(budget * pieces / n)))
  for _ in range(FIT_COUNTS):
    out = hygiene.truncate(text, b, tail_fraction=tail_fraction)
    m = await count(out)
    if m <= budget:
      lo, best = b, out
      if m >= 0.97 * budget:
        break
    else:
      hi, smallest = b, out
    if hi - lo <= 1:
      break
    b = min(max(math.floor(b * budget / max(m, 1)), lo + 1), hi - 1)  # the count's correction, kept in (lo, hi)
  if best is not None:
    return best
  return smallest if smallest is not None else hygiene.truncate(text, 1, tail_fraction=tail_fraction)


def water_fill(counts: Sequence[int], allowed: int) -> list[int]:
  """Per-trace caps summing to at most `allowed`: the longest traces cut first, to one level, the shorter
  ones kept whole (`counts`: each trace's tokens)."""
  order = sorted(range(len(counts)), key=lambda i: counts[i])
  caps = list(counts)
  left, rest = allowed, len(counts)
  for i in order:
    share = left // rest if rest else 0
    caps[i] = min(counts[i], share)
    left -= caps[i]
    rest -= 1
  return caps


class Fit(NamedTuple):
  """What `TraceFitter.fit_request` made of a request's traces: as shown, its prompt's tokens and the answer
  budget that the context leaves it (both None when no context applies), or the failure (reason `context` /
  `tokenize`) and why."""

  traces: list[str]
  prompt_tokens: int | None = None
  failure_reason: str | None = None
  failure_detail: str = ""
  max_tokens: int | None = None


class TraceFitter:
  """Cuts the traces of a judge's requests by its `TokenCounter` (module docstring): each to the budget, then
  all of a request until it fits the context. Cuts are cached by (a digest of the trace, budget)."""

  def __init__(self, counter: TokenCounter, config, *, served_context: int | None = None):
    self.counter = counter
    self.config = config  # read on use: a judge's config may be changed after it was made
    self.served_context = served_context  # what the judge's server said its context is (`client.served_context`)
    self._cuts = Memo(8192)
    self._shown = Memo(8192)  # digest of a trace → what the judge was last shown of it (`cut_now`)

  @property
  def budget(self) -> int:
    return int(self.config.token_budget)

  @property
  def tail_fraction(self) -> float:
    return float(self.config.tail_fraction)

  @property
  def max_tokens(self) -> int:
    """The answer budget of the verdict format (`judges.formats`: a few tokens for a letter), at most
    `judge.max_tokens`."""
    return formats.get(self.config.get("verdict_format", "reasoned")).answer_tokens(self.config.max_tokens)

  @property
  def context_tokens(self) -> int:
    return int(self.config.get("context_tokens", 0) or 0)

  def cut_now(self, text: str) -> str:
    """The trace as the judge is shown it, without waiting (transcripts, benchmarks): the estimate's cut
    (today's); else what a request last showed of it, else its cut to the budget (a local tokenizer counts it
    now; the server's count only when cached, the estimate's cut otherwise)."""
    if not self.counter.exact:
      return hygiene.truncate(text, self.budget, tail_fraction=self.tail_fraction)
    key = _digest(text)
    for found in (self._shown.peek(key), self._cuts.peek((key, self.budget))):
      if found is not None:
        return found
    if isinstance(self.counter, LocalCounter):
      out = _run_sync(fit_text(text, self.budget, self.counter.text, tail_fraction=self.tail_fraction))
      self._cuts.put((key, self.budget), out)
      return out
    return hygiene.truncate(text, self.budget, tail_fraction=self.tail_fraction)

  async def cut(self, text: str, budget: int) -> str:
    """`text` cut to `budget` tokens of the counter (`fit_text`; the estimate: `hygiene.truncate`)."""
    if not self.counter.exact:
      return hygiene.truncate(text, budget, tail_fraction=self.tail_fraction)
    return await self._cuts.get(
      (_digest(text), budget), lambda: fit_text(text, budget, self.counter.text, tail_fraction=self.tail_fraction)
    )

  async def fit_request(
    self, traces: Sequence[str], build: Callable[[list[str]], Sequence[Sequence[dict]]], *, budget: int | None = None
  ) -> Fit:
    """`traces` (neutralised, uncut) cut to the budget (`budget`, default `token_budget`), then further until
    every request `build(cut traces)` returns (e.g. both presentation orders) fits the context."""
    budget = self.budget if budget is None else budget
    try:
      shown = [await self.cut(t, budget) for t in traces]
      if not self.context_tokens and not self.served_context and not isinstance(self.counter, ServerCounter):
        return self._done(traces, shown, None)
      n = max([await self.counter.messages(m) for m in build(shown)])
      context = self.context_tokens or self.counter.context() or self.served_context
      if not context:
        return self._done(traces, shown, n)
      # The answer budget shrinks to what the context leaves (a judge's max_tokens is a cap, not a need), down to
      # MIN_ANSWER_TOKENS; past that, the traces are cut.
      limit = context - min(self.max_tokens, MIN_ANSWER_TOKENS)
      where = "judge.context_tokens" if self.context_tokens else "the server's context"
      for _ in range(FIT_ROUNDS):
        if n <= limit:
          return self._done(traces, shown, n, context)
        counts = [await self.counter.text(t) for t in shown]
        allowed = sum(counts) - (n - limit) - 2 * len(shown)  # a token or two at each seam
        if allowed < MIN_TRACE_TOKENS * len(shown):
          return Fit(
            list(shown),
            n,
            "context",
            f"the request does not fit the judge's context: {context} tokens ({where}) − an answer of "
            f"{min(self.max_tokens, MIN_ANSWER_TOKENS)} leaves {limit} for the prompt, and the text around the "
            f"traces alone takes ≈{n - sum(counts)} (counted by {self.counter.source}): shorten the problem",
          )
        caps = water_fill(counts, allowed)
        shown = [await self.cut(t, cap) if cap < c else s for t, s, c, cap in zip(traces, shown, counts, caps)]
        n = max([await self.counter.messages(m) for m in build(shown)])
      if n <= limit:
        return self._done(traces, shown, n, context)
      return Fit(
        list(shown), n, "context", f"the prompt still had {n} tokens > {limit} after {FIT_ROUNDS} rounds of cuts"
      )
    except TokenizeError as e:
      return Fit(list(traces), None, "tokenize", f"counting the request's tokens failed: {e}")

  def _done(self, traces, shown, n, context: int | None = None) -> Fit:
    if self.counter.exact:
      for t, s in zip(traces, shown):
        self._shown.put(_digest(t), s)
    answer = None if context is None or n is None else min(self.max_tokens, context - n)
    return Fit(list(shown), n, max_tokens=answer)


def _run_sync(coro):
  """Runs a coroutine that never awaits anything pending (a local counter's fit) to its end, here."""
  try:
    coro.send(None)
  except StopIteration as stop:
    return stop.value
  coro.close()
  raise RuntimeError("a local token count awaited something")
