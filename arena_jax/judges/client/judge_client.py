"""`JudgeClient`: one judgment's requests, its retry budgets and deadline, and what it cost.

The protocol and the guarantees are those of the package (`arena_jax.judges.client`); here is how one
`chat` call runs: it takes a slot of an endpoint (`endpoints.EndpointPool`), sends the request, retries
transport failures after a backoff (`backoff`), reads the answer defensively (`responses`), asks again
for an answer without a verdict or one cut at max_tokens, each with the next seed, and stores a parsed
answer in the cache (`cache`) — all within the judgment's one deadline, and all of it counted in `stats`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
import time
from typing import Any, Callable, Sequence

import aiohttp

from arena_jax.judges.client.backoff import RETRYABLE_STATUSES, backoff_delay, retry_after_seconds
from arena_jax.judges.client.cache import ResponseCache, request_key
from arena_jax.judges.client.endpoints import Endpoint, EndpointPool, split_urls, tokenize_url
from arena_jax.judges.client.responses import (
  ACCEPT_ENCODING,
  BadAnswer,
  completion_fields,
  count_fields,
  read_answer,
  safe_parse,
)
from arena_jax.judges.client.results import ClientStats, Completion, TokenizeError
from arena_jax.judges.client.settings import JudgeClientSettings
from arena_jax.judges.usage import Usage

_DETAIL_CHARS = 300
# What a server without vLLM's `/tokenize` answers there: no such route, or a route for another method.
_NO_TOKENIZE = (404, 405, 501)


@dataclasses.dataclass
class _Budget:
  """What is left to one judgment: its deadline and its retries of each kind."""

  transport: int
  parse: int
  truncation: int
  deadline: float | None = None  # time.monotonic() at which it ends; set when the first request is sent

  def left(self) -> float:
    return float("inf") if self.deadline is None else self.deadline - time.monotonic()


@dataclasses.dataclass
class _Attempt:
  """What one HTTP request produced."""

  error: str | None = None
  retryable: bool = False
  detail: str = ""
  status: int | None = None
  retry_after: float | None = None
  body: dict | None = None


class JudgeClient:
  """Async client of one judge model behind one or more OpenAI-compatible endpoints (`arena_jax.judges.client`).

      async with JudgeClient(["http://127.0.0.1:8000/v1"], model="judge") as client:
        c = await client.chat([{"role": "user", "content": prompt}], parse=prompts.parse_pairwise)
        if c.ok: ... c.parsed ...

  `settings` (`JudgeClientSettings`) is what it was made with. One client serves one event loop at a time;
  `close()` (or `async with`) before that loop ends.
  """

  def __init__(self, urls: str | Sequence[str], settings: JudgeClientSettings | None = None, **overrides):
    """`settings` (default: the judge config's declared defaults, `JudgeClientSettings.defaults`, which then
    needs `model=`) with `overrides` replacing its fields by name, e.g. `JudgeClient(urls, model="m",
    max_retries=0)`. The one way a client is made: `from_config` builds its settings from a config."""
    urls = split_urls(urls)
    if not urls:
      raise ValueError("JudgeClient needs at least one judge URL (judge.urls)")
    if settings is None:
      settings = JudgeClientSettings.defaults(**overrides)
    elif overrides:
      settings = dataclasses.replace(settings, **overrides)
    self.settings = s = settings
    self.cache = ResponseCache(s.cache_dir) if s.cache_dir else None
    self._pool = EndpointPool(
      urls, s.concurrency, failures_before_cooldown=s.failures_before_cooldown, cooldown_s=s.cooldown_s
    )
    self._headers = {"Content-Type": "application/json", "Accept-Encoding": ACCEPT_ENCODING}
    if s.api_key:
      self._headers["Authorization"] = f"Bearer {s.api_key}"
    self._secret = s.api_key or None  # scrubbed from what a judge sends back (`_finish`)
    self._rng = random.Random(s.rng_seed)
    self._loop = None
    self._session: aiohttp.ClientSession | None = None
    self.stats = ClientStats(per_endpoint={e.base: {"requests": 0, "errors": 0} for e in self._pool.endpoints})

  @classmethod
  def from_config(
    cls, config, urls: Sequence[str] | None = None, model: str | None = None, **overrides
  ) -> "JudgeClient":
    """A client from the judges config (`judges.default_config()`, `JudgeClientSettings.from_config`); `urls`
    / `model` override the config's, `overrides` the settings' fields."""
    settings = JudgeClientSettings.from_config(config, model=model, **overrides)
    return cls(urls if urls is not None else config.urls, settings)

  @property
  def urls(self) -> tuple[str, ...]:
    return self._pool.urls

  @property
  def failures_before_cooldown(self) -> int:
    """Transport failures in a row after which an endpoint is out of rotation for `cooldown_s`."""
    return self._pool.failures_before_cooldown

  @failures_before_cooldown.setter
  def failures_before_cooldown(self, value: int) -> None:
    self._pool.failures_before_cooldown = value

  @property
  def cooldown_s(self) -> float:
    return self._pool.cooldown_s

  @cooldown_s.setter
  def cooldown_s(self, value: float) -> None:
    self._pool.cooldown_s = value

  # ── lifecycle ──

  def _ensure_loop_state(self) -> None:
    loop = asyncio.get_running_loop()
    if self._loop is not loop:
      # A new event loop (e.g. a second asyncio.run): primitives and sessions are per loop.
      self._loop, self._session = loop, None
      self._pool.new_loop(loop)
    if self._session is None or self._session.closed:
      # No connector-level cap: the per-endpoint limits are the concurrency control.
      # auto_decompress off: `read_answer` inflates within max_response_bytes (ACCEPT_ENCODING).
      self._session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300), auto_decompress=False
      )

  async def close(self) -> None:
    if self._session is not None and not self._session.closed and self._loop is asyncio.get_running_loop():
      await self._session.close()
    self._session = None

  async def __aenter__(self) -> "JudgeClient":
    self._ensure_loop_state()
    return self

  async def __aexit__(self, *exc) -> None:
    await self.close()

  # ── endpoint selection ──

  async def _acquire(self, avoid: Endpoint | None, budget: _Budget) -> Endpoint | None:
    """A free endpoint (its slot taken), or None when the judgment's deadline passes first."""
    return await self._pool.acquire(avoid, budget)

  def _release(self, endpoint: Endpoint, failed: bool) -> None:
    """Gives back the slot of `endpoint`; `failed` (a transport failure) counts against its health."""
    if failed:
      self.stats.per_endpoint[endpoint.base]["errors"] += 1
    self._pool.release(endpoint, failed)

  # ── one HTTP request ──

  async def _post(self, endpoint: Endpoint, data: bytes, limit_s: float) -> _Attempt:
    endpoint.requests += 1
    self.stats.usage += Usage(http_requests=1)
    self.stats.per_endpoint[endpoint.base]["requests"] += 1
    timeout = aiohttp.ClientTimeout(total=limit_s, connect=min(self.settings.connect_timeout_s, limit_s))
    try:
      async with self._session.post(endpoint.url, data=data, headers=self._headers, timeout=timeout) as resp:
        status, headers = resp.status, resp.headers
        raw = await read_answer(resp, self.settings.max_response_bytes)
    except asyncio.TimeoutError:
      return _Attempt("timeout", True, f"no answer within {limit_s:.3g} s")
    except aiohttp.ClientError as e:
      return _Attempt("connection", True, f"{type(e).__name__}: {e}"[:_DETAIL_CHARS])
    except BadAnswer as e:
      return _Attempt("bad_response", True, f"HTTP {status}: {e}"[:_DETAIL_CHARS], status)
    except Exception as e:  # pylint: disable=broad-except  (whatever a server sends, a judgment fails, never training)
      return _Attempt("bad_response", True, f"{type(e).__name__} reading the answer: {e}"[:_DETAIL_CHARS])
    if status != 200:
      retryable = status in RETRYABLE_STATUSES or status >= 500
      should = headers.get("x-should-retry")
      if should in ("true", "false"):
        retryable = should == "true"
      text = raw[:_DETAIL_CHARS].decode("utf-8", "replace")
      if status == 400 and re.search(r"context length|max_model_len|maximum context|too many tokens", text, re.I):
        text += " (judge.max_tokens plus the prompt exceed the judge's context: lower judge.max_tokens)"
      return _Attempt(f"http_{status}", retryable, text, status, retry_after_seconds(headers))
    try:
      body = completion_fields(raw)
    except BadAnswer as e:
      return _Attempt(
        "bad_response",
        True,
        f"HTTP 200 without a chat completion ({e}): " + raw[:200].decode("utf-8", "replace"),
        status,
      )
    return _Attempt(status=status, body=body)

  async def _request(self, data: bytes, result: Completion, budget: _Budget) -> dict | None:
    """Sends one request, retried on transport failures while the judgment's budget lasts; the completion
    body, or None with `result` marked failed."""
    avoid = None
    while True:
      endpoint = await self._acquire(avoid, budget)
      if endpoint is None:
        return self._expire(result)
      if budget.deadline is None:  # the judgment's clock starts with its first request
        budget.deadline = time.monotonic() + self.settings.deadline_s
      left = budget.left()
      if left <= 0:
        self._release(endpoint, failed=False)
        return self._expire(result)
      limit_s = min(self.settings.timeout_s, left)
      attempt = None
      try:
        attempt = await self._post(endpoint, data, limit_s)
      finally:
        # Only transport-level failures count against an endpoint's health (a 400 is the request's fault). A
        # timeout does even when the deadline clipped it: with timeout_s = deadline_s that is the only way a
        # hung endpoint shows, and one answer from a healthy endpoint resets its count.
        self._release(endpoint, failed=attempt is not None and attempt.error is not None and attempt.retryable)
      result.usage += Usage(http_requests=1)
      result.endpoint, result.status = endpoint.base, attempt.status
      if attempt.error is None:
        return attempt.body
      if attempt.error == "timeout" and limit_s < self.settings.timeout_s and budget.left() <= 0.05:
        # The deadline clipped this attempt and has now passed; any other timeout is retried as usual
        # (the retry below stops when its backoff would overrun the deadline).
        return self._expire(result, f"an attempt was still waiting for its answer after {limit_s:.3g} s")
      result.failure_reason, result.failure_detail = attempt.error, attempt.detail
      if not attempt.retryable or budget.transport <= 0:
        return None
      wait = attempt.retry_after
      if wait is not None and wait > self.settings.max_retry_after_s:
        result.failure_detail += f" (Retry-After {wait:g} s exceeds client.max_retry_after_s)"
        return None
      if wait is None or wait <= 0:
        wait = self._backoff(budget)
      if wait >= budget.left():  # sleeping would only end at (or past) the deadline
        return self._expire(result, f"the next retry was due in {wait:.3g} s")
      budget.transport -= 1
      self.stats.transport_retries += 1
      avoid = endpoint
      await asyncio.sleep(wait)

  def _backoff(self, budget) -> float:
    """The jittered exponential delay before the next transport attempt (`backoff_delay`)."""
    return backoff_delay(
      self.settings.max_retries - budget.transport,
      initial=self.settings.backoff_initial_s,
      maximum=self.settings.backoff_max_s,
      jitter=self.settings.jitter,
      rng=self._rng,
    )

  def _expire(self, result: Completion, why: str = "no time was left for another attempt") -> None:
    """Marks `result` failed by the judgment's deadline, keeping the failure that came before it."""
    before = f"; before it: {result.failure_reason}: {result.failure_detail}" if result.failure_reason else ""
    result.failure_reason = "deadline"
    result.failure_detail = (
      f"the judgment's deadline ({self.settings.deadline_s:g} s, client.deadline_s) ended it: {why}" + before
    )[: 2 * _DETAIL_CHARS]

  # ── counting (vLLM's /tokenize) ──

  async def tokenize(self, body: dict) -> dict:
    """vLLM's `POST /tokenize` (`endpoints.tokenize_url`) with `body` and the client's model: `{"prompt": …}`
    or `{"messages": …, "add_generation_prompt": True}`. Returns `{"count": int, "max_model_len": int |
    None}`.

    Takes an endpoint slot like a judgment and retries transport failures (`max_retries`, with backoff,
    another endpoint first), within `timeout_s` each and `deadline_s` in all.

    Raises:
      TokenizeError: `unsupported` when an endpoint answers 404 / 405 / 501 (no such endpoint there);
        otherwise when no endpoint counted (the last failure named).
    """
    self._ensure_loop_state()
    data = json.dumps({"model": self.settings.model, **body}).encode("utf-8")
    budget = _Budget(self.settings.max_retries, 0, 0, deadline=time.monotonic() + self.settings.deadline_s)
    avoid, why, url = None, "no endpoint was free before client.deadline_s", tokenize_url(self.urls[0])
    while True:
      endpoint = await self._acquire(avoid, budget)
      if endpoint is None:
        break
      url = tokenize_url(endpoint.base)
      limit_s = max(min(self.settings.timeout_s, budget.left()), 0.05)
      timeout = aiohttp.ClientTimeout(total=limit_s, connect=min(self.settings.connect_timeout_s, limit_s))
      status, raw = None, b""
      try:
        async with self._session.post(url, data=data, headers=self._headers, timeout=timeout) as resp:
          status, raw = resp.status, await read_answer(resp, self.settings.max_response_bytes)
      except asyncio.TimeoutError:
        why = f"no answer within {limit_s:.3g} s"
      except (aiohttp.ClientError, BadAnswer) as e:
        why = f"{type(e).__name__}: {e}"[:_DETAIL_CHARS]
      finally:
        self._release(endpoint, failed=status is None)  # a transport failure counts against its health
      if status is not None:
        text = self._redact(raw[:_DETAIL_CHARS].decode("utf-8", "replace"))
        if status in _NO_TOKENIZE:
          raise TokenizeError(f"POST {url}: HTTP {status} {text}".strip(), url=url, unsupported=True)
        if status == 200:
          answer = count_fields(raw)
          if answer is not None:
            return answer
          why = f"HTTP 200 without a token count: {text}"
        else:
          why = f"HTTP {status}: {text}"
          if status not in RETRYABLE_STATUSES and status < 500:
            break
      if budget.transport <= 0:
        break
      wait = self._backoff(budget)
      if wait >= budget.left():
        break
      budget.transport -= 1
      avoid = endpoint
      await asyncio.sleep(wait)
    raise TokenizeError(f"POST {url}: {why}", url=url)

  def _redact(self, text: str) -> str:
    return text.replace(self._secret, "***") if self._secret and self._secret in text else text

  # ── the call ──

  def payload(
    self,
    messages: Sequence[dict],
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    top_logprobs: int = 0,
  ) -> dict:
    """The request body: model, messages and explicit sampling parameters (plus `extra_body`); with
    `top_logprobs` > 0, the OpenAI `logprobs` / `top_logprobs` request."""
    body = {
      "model": self.settings.model,
      "messages": [dict(m) for m in messages],
      "temperature": self.settings.temperature if temperature is None else float(temperature),
      "max_tokens": self.settings.max_tokens if max_tokens is None else int(max_tokens),
      "seed": self.settings.seed if seed is None else int(seed),
    }
    if top_logprobs:
      body.update(logprobs=True, top_logprobs=int(top_logprobs))
    body.update(self.settings.extra_body)
    return body

  async def chat(
    self,
    messages: Sequence[dict],
    *,
    parse: Callable[[str], Any] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    top_logprobs: int = 0,
    read_cut: bool = False,
  ) -> Completion:
    """One judged answer: requests within the judgment's retry budgets and deadline (`arena_jax.judges.client`).
    Never raises on judge failures: a final failure is a `Completion` with `failure_reason` set.

    With `top_logprobs` = k > 0 the first answer token's k alternatives are asked for, and `parse` reads them
    (`Completion.top_logprobs`) instead of the text; an answer without them fails (reason `no_logprobs`: a
    server that ignores the request, which `probe.check_logprobs` finds at start-up). With `read_cut` (the letter
    formats, whose budget is a few tokens on purpose) an answer cut at max_tokens is parsed like any other, and a
    cut answer without a label is `unparseable`."""
    self._ensure_loop_state()
    start = time.perf_counter()
    payload = self.payload(
      messages, temperature=temperature, max_tokens=max_tokens, seed=seed, top_logprobs=top_logprobs
    )
    result = Completion()
    self.stats.usage += Usage(calls=1)
    key = request_key(payload) if self.cache is not None else None
    if key is not None and self._from_cache(key, parse, result, bool(top_logprobs)):
      return self._finish(result, start)
    budget = _Budget(self.settings.max_retries, self.settings.max_parse_retries, self.settings.max_truncation_retries)
    base_seed = payload["seed"]
    while True:
      payload["seed"] = base_seed + result.parse_attempts  # each fresh answer with the next seed
      result.seed = payload["seed"]
      body = await self._request(json.dumps(payload).encode("utf-8"), result, budget)
      if body is None:
        return self._finish(result, start)
      self._read_body(body, result)
      self._scrub(result)
      result.parse_attempts += 1
      if result.finish_reason == "length" and not (top_logprobs or read_cut):  # a letter's budget is tiny on purpose
        result.failure_reason = "truncated"
        result.failure_detail = f"the answer was cut at max_tokens={payload['max_tokens']}"
        if budget.truncation <= 0:
          return self._finish(result, start)
        budget.truncation -= 1
        self.stats.truncation_retries += 1
        continue
      if top_logprobs and result.top_logprobs is None:
        result.failure_reason = "no_logprobs"
        result.failure_detail = "the answer holds no logprobs (the server ignores `logprobs`)"
        return self._finish(result, start)
      parsed, error = safe_parse(parse, result.top_logprobs if top_logprobs else result.content)
      if parsed is None:
        result.failure_reason = "unparseable"
        if result.content is None or not result.content.strip():
          result.failure_detail = (
            "the answer had no content"
            + (", only reasoning" if result.reasoning else "")
            + f" (finish_reason {result.finish_reason!r})"
          )
        else:
          result.failure_detail = (
            f"the parser failed ({error}) on: " if error else "no verdict could be parsed from: "
          ) + result.content[-200:]
        if budget.parse <= 0:
          return self._finish(result, start)
        budget.parse -= 1
        self.stats.parse_retries += 1
        continue
      result.parsed, result.failure_reason, result.failure_detail = parsed, None, ""
      if key is not None:
        self.cache.put(
          key,
          {
            "content": result.content,
            "reasoning": result.reasoning,
            "finish_reason": result.finish_reason,
            "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens,
            "seed": result.seed,
            "top_logprobs": result.top_logprobs,
          },
        )
      return self._finish(result, start)

  def _from_cache(self, key: str, parse, result: Completion, asked_logprobs: bool = False) -> bool:
    record = self.cache.get(key)
    if record is None:
      return False
    logprobs = record.get("top_logprobs")
    logprobs = tuple((str(t), float(lp)) for t, lp in logprobs) if logprobs else None  # JSON made them lists
    parsed, _ = safe_parse(parse, logprobs if asked_logprobs else record.get("content"))
    if parsed is None:  # e.g. the parser changed since: ask again
      return False
    result.top_logprobs = logprobs
    result.content, result.reasoning = record.get("content"), record.get("reasoning")
    result.finish_reason, result.seed = record.get("finish_reason"), record.get("seed")
    result.parsed, result.cached = parsed, True
    result.usage += Usage(
      prompt_tokens=record.get("prompt_tokens", 0), completion_tokens=record.get("completion_tokens", 0)
    )
    self.stats.cache_hits += 1
    return True

  @staticmethod
  def _read_body(body: dict, result: Completion) -> None:
    """Copies the fields `completion_fields` checked into `result`."""
    result.content, result.reasoning, result.finish_reason = body["content"], body["reasoning"], body["finish_reason"]
    result.top_logprobs = body.get("top_logprobs")
    result.usage += Usage(prompt_tokens=body["prompt_tokens"], completion_tokens=body["completion_tokens"])

  def _scrub(self, result: Completion) -> None:
    """Replaces the API key in what the judge sent back: a judge (or a proxy) that echoes the request's
    Authorization header, in an error or an answer, must not put the key into warnings, metrics,
    transcripts or the cache."""
    if self._secret:
      for name in ("failure_detail", "content", "reasoning"):
        text = getattr(result, name)
        if text and self._secret in text:
          setattr(result, name, text.replace(self._secret, "***"))

  def _finish(self, result: Completion, start: float) -> Completion:
    self._scrub(result)
    latency_s = time.perf_counter() - start
    result.usage = dataclasses.replace(result.usage, latency_s=latency_s)
    s = self.stats
    if result.ok:
      s.succeeded += 1
    else:
      s.failed += 1
      s.failures[result.failure_reason] += 1
    # Calls and HTTP requests were counted as they started; a cache hit's tokens were paid for earlier.
    tokens = (0, 0) if result.cached else (result.usage.prompt_tokens, result.usage.completion_tokens)
    s.usage += Usage(prompt_tokens=tokens[0], completion_tokens=tokens[1], latency_s=latency_s)
    s.max_latency_s = max(s.max_latency_s, latency_s)
    return result
