"""Async OpenAI-compatible chat-completions client for LLM judges (DESIGN: "judge client (async RPC)").

Judges in practice are LLMs behind vLLM or SGLang speaking `POST /v1/chat/completions`. The trainer
fires many judge calls at once (every match of every non-diverse group, SPEC §3–§5), so the client is
asynchronous and must be fast, robust and countable:

  * several endpoint URLs share the load: each request goes to the endpoint with the most free
    capacity (round-robin among equals), each endpoint has its own concurrency limit, and an endpoint
    that keeps failing is taken out of rotation for a cool-down while another one is healthy; a
    retry avoids the endpoint that just failed;
  * one judgment (a `chat` call) has three separate retry budgets: transport failures — connection
    errors, timeouts, HTTP 408 / 409 / 429 and 5xx, a 200 whose body is not a completion — get
    `max_retries`, with exponential backoff and jitter (initial · 2^k capped, minus up to `jitter` of
    it), honouring `Retry-After` / `retry-after-ms` (and `x-should-retry`) as openai-python does
    (other 4xx are final at once); an answer with no parseable verdict (the caller's `parse` returns
    None) gets `max_parse_retries` fresh requests, and one cut at `max_tokens`
    (`finish_reason == "length"`) `max_truncation_retries` (0 by default: a judge that thinks past its
    budget tends to do it again, at the same cost), each with the next seed (at temperature 0 the same
    seed would return the same answer);
  * one deadline, `deadline_s` from the judgment's first request, bounds all of it: each attempt's
    timeout is clipped to the time left, and no backoff or Retry-After sleep runs past it (the
    judgment fails at once instead), so one judgment takes at most the deadline once it has started (a
    judgment waiting for a free slot behind others has not started yet: a step of N judgments on S
    slots can take up to ⌈N / S⌉ deadlines when every endpoint hangs);
  * a final failure is an explicit failed `Completion` with a reason — never an exception, never a
    default verdict (SPEC §4: a failed judgment is dropped and counted) — and every request, retry,
    failure, token and second is counted in `stats`;
  * model, messages, temperature, max_tokens and seed are sent explicitly with every request, plus
    `extra_body` verbatim (server options such as vLLM's `chat_template_kwargs`; it may not override the
    client's own keys); `message.content` is the answer, `message.reasoning_content` /
    `message.reasoning` (vLLM / SGLang reasoning parsers) is kept apart;
  * an optional on-disk cache keyed by the request (model, messages, sampling parameters) returns
    parsed answers without a call;
  * whatever a judge sends is read defensively: answers are capped at `max_response_bytes` on the wire
    and after decompression (the client inflates gzip / deflate itself), every field it reads is
    checked for its type (`completion_fields`; a surprise is a failed judgment, `bad_response`), a
    parser that raises on an answer makes it `unparseable`, and a Retry-After that is not a usable
    number is ignored (too long a one is a final failure): no answer can raise out of `chat` or hold it
    past its deadline;
  * `check_endpoints` (before training starts) fails fast, naming each URL, when a judge does not
    answer `GET /v1/models` with a model list (a 404 there is a wrong URL), does not list `judge.model`
    or rejects the key: a judge that is down at start is a configuration error, while one that fails
    mid-run costs only the judgments it drops, which are counted;
  * URLs with credentials (`user:password@`) are refused (`split_urls`): keys travel in the
    Authorization header, from `judge.api_key_env`, and never reach a log or a checkpoint.

Transport: aiohttp. Measured on this project's 2-core machine against an aiohttp server with 100 ms
latency at 64 concurrent requests, aiohttp reached 0.90 of the latency bound, the `openai` package's
AsyncOpenAI 0.67 (httpx2 or aiohttp transport) and httpx 0.15 (connection-pool contention), so the
client uses aiohttp directly; the protocol handling follows openai-python.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import email.utils
import hashlib
import http.client
import json
import math
import os
import random
import re
import time
import urllib.error
import urllib.request
import zlib
from typing import Any, Callable, Sequence

import aiohttp

from arena_jax import config_schema
from arena_jax import fileio
from arena_jax.errors import ConfigError, UserError
from arena_jax.judges.usage import Usage

RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Encodings the client decodes itself, within `max_response_bytes` (aiohttp's own decoder inflates a whole
# network chunk at once, so a small compressed answer could still take hundreds of MB).
ACCEPT_ENCODING = "gzip, deflate"
# What every request body carries from the client itself; `extra_body` may not override these (an `n` > 1
# or `stream` would also return what the client cannot read, `max_completion_tokens` outranks max_tokens).
BODY_KEYS_SET_BY_CLIENT = ("model", "messages", "temperature", "max_tokens", "max_completion_tokens", "seed", "n",
                           "stream")
_DETAIL_CHARS = 300


@dataclasses.dataclass
class Completion:
  """The result of one `JudgeClient.chat` call (after all its retries).

  failure_reason: None on success, else one of "timeout", "connection", "http_<status>",
    "bad_response" (HTTP 200 without a completion), "unparseable", "truncated" (cut at max_tokens),
    "deadline" (`deadline_s` ran out); `failure_detail` says more (for "deadline", the last failure
    before it, if any).
  parsed: what `parse(content)` returned (the content itself without a parser).
  usage: one call; `http_requests` made (0 when served from the cache); tokens summed over every
    answer received (all of them cost tokens); `latency_s` the wall time of the call, waiting for a
    slot, retries and backoff included.
  parse_attempts: answers received (parsed or not, truncated ones included).
  """

  content: str | None = None
  reasoning: str | None = None
  finish_reason: str | None = None
  parsed: Any = None
  failure_reason: str | None = None
  failure_detail: str = ""
  status: int | None = None
  usage: Usage = Usage(calls=1)
  parse_attempts: int = 0
  endpoint: str | None = None
  seed: int | None = None
  cached: bool = False

  @property
  def ok(self) -> bool:
    return self.failure_reason is None


@dataclasses.dataclass
class ClientStats:
  """Counters of a `JudgeClient` (cumulative; `as_dict()` for logging).

  usage: calls started, HTTP requests sent, tokens of answers received from a server (cache hits
    cost none), and the calls' latencies summed (`as_dict` adds their mean).
  """

  usage: Usage = Usage()
  succeeded: int = 0
  failed: int = 0
  failures: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  transport_retries: int = 0
  parse_retries: int = 0
  truncation_retries: int = 0
  cache_hits: int = 0
  max_latency_s: float = 0.0
  per_endpoint: dict = dataclasses.field(default_factory=dict)

  def as_dict(self) -> dict:
    """Flat counters: the usage fields beside the others."""
    d = dataclasses.asdict(self)
    d.update(d.pop("usage"), failures=dict(self.failures))
    d["mean_latency_s"] = self.usage.latency_s / self.usage.calls if self.usage.calls else 0.0
    return d


class _Endpoint:
  """One judge URL: its concurrency limit, load and health."""

  __slots__ = ("index", "base", "url", "limit", "in_flight", "failures", "cooldown_until", "requests", "errors")

  def __init__(self, index: int, base: str, limit: int):
    self.index, self.base, self.url, self.limit = index, base, chat_completions_url(base), limit
    self.in_flight = self.failures = self.requests = self.errors = 0
    self.cooldown_until = 0.0


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


def chat_completions_url(base: str) -> str:
  """The chat-completions URL of a base URL: `http://h:8000`, `…/v1` and `…/v1/chat/completions` all work."""
  base = base.strip().rstrip("/")
  if base.endswith("/chat/completions"):
    return base
  if base.endswith("/v1"):
    return base + "/chat/completions"
  return base + "/v1/chat/completions"


def models_url(base: str) -> str:
  """The model-list URL (`GET /v1/models`) of a base URL given in any form `chat_completions_url` takes."""
  return chat_completions_url(base)[:-len("/chat/completions")] + "/models"


class JudgeUnreachableError(UserError, ConnectionError):
  """A configured judge endpoint did not answer before training started (see `check_endpoints`)."""


def _probe(base: str, headers: dict, deadline: float, interval_s: float, model: str | None) -> str | None:
  """None once `base` answers `GET /v1/models` with a model list (listing `model`, when it lists any);
  else why not.

  A 5xx, 408 or 429 proves an OpenAI-compatible server is listening there, busy or failing: that is the
  client's business once training runs. Any other 4xx, or a 200 that is not a model list, means this is
  not the API the client will call (a wrong path or port: every judgment would get the same 404), and a
  rejected key or a model list without `model` would fail every judgment too: these are final at once.
  """
  # No proxies, as for the aiohttp session (trust_env=False): the check must see what training will see.
  opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
  request = urllib.request.Request(models_url(base), headers=headers, method="GET")
  reason = "no attempt"
  while True:
    remaining = deadline - time.monotonic()
    try:
      with opener.open(request, timeout=max(min(remaining, 10.0), 0.05)) as resp:
        body = resp.read(1 << 20)
      return _model_missing(body, model)
    except urllib.error.HTTPError as e:
      if e.code in (401, 403):
        return (f"HTTP {e.code}: the judge rejected the API key (set the env var named by judge.api_key_env "
                "to the key the server expects)")
      if 400 <= e.code < 500 and e.code not in RETRYABLE_STATUSES:
        return (f"HTTP {e.code} at {models_url(base)}: no OpenAI-compatible API answers at this path (judge.urls "
                "takes a base URL such as http://host:8000 or http://host:8000/v1)")
      return None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:  # refused, DNS, timeout
      reason = f"{type(getattr(e, 'reason', e)).__name__}: {getattr(e, 'reason', e)}"
    if time.monotonic() + interval_s >= deadline:
      return reason
    time.sleep(interval_s)


def _model_missing(body: bytes, model: str | None) -> str | None:
  """Why an OpenAI `/v1/models` answer rules the endpoint out (it is not a model list, or lists models but
  not `model`), or None."""
  try:
    listed = json.loads(body).get("data")
    ids = [m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
  except (ValueError, AttributeError, TypeError, RecursionError):
    text = " ".join(body[:80].decode("utf-8", "replace").split())
    return f"HTTP 200 but not an OpenAI model list ({text!r}...): is this the judge's API?"
  if not model:
    return None
  # Servers name one model several ways (Ollama's "llama3:latest" for "llama3", "models/…" prefixes).
  names = {i.removeprefix("models/").removesuffix(":latest") for i in ids}
  if not ids or model in ids or model.removeprefix("models/").removesuffix(":latest") in names:
    return None
  return f"it does not serve judge.model={model!r}; it serves {', '.join(repr(i) for i in ids[:10])}"


def check_endpoints(urls: str | Sequence[str], *, api_key: str | None = None, timeout_s: float = 10.0,
                    interval_s: float = 0.5, model: str | None = None) -> None:
  """Waits up to `timeout_s` for every judge URL to answer `GET /v1/models` and, when it lists its
  models, to list `model`.

  A judge that is down *before* training starts, or serves another model, is a configuration error (a
  typo, a server not launched, a firewall, a wrong `judge.model`): the run fails at once, naming each URL
  and why, instead of dropping every judgment of every step. Refused connections are retried every
  `interval_s` until the deadline, so a server that is still binding its port gets the whole window. A
  judge that dies *mid-run* is handled by the trainer (failed matches dropped and counted; zero
  advantage for all-failed groups).

  Raises:
    JudgeUnreachableError: listing the URLs that failed the check, and why.
  """
  urls = split_urls(urls)
  if not urls or timeout_s <= 0:
    return
  headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
  deadline = time.monotonic() + timeout_s
  with concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
    reasons = list(pool.map(lambda u: _probe(u, headers, deadline, interval_s, model), urls))
  bad = [f"  {u} ({models_url(u)}): {r}" for u, r in zip(urls, reasons) if r is not None]
  if bad:
    raise JudgeUnreachableError(
        f"{len(bad)} of {len(urls)} judge URL(s) failed the start-up check (within {timeout_s:g} s):\n"
        + "\n".join(bad) + "\nStart the judge server(s), fix judge.urls or judge.model, or leave judge.urls "
        "empty for the embedded judge (judge.client.startup_check_s sets this wait; 0 skips the check).")


def split_urls(urls: str | Sequence[str]) -> tuple[str, ...]:
  """URLs from a comma-separated string or a sequence, stripped, empties dropped.

  Raises:
    ConfigError: a URL carries credentials (`user:password@`; named redacted): keys go in `judge.api_key_env`.
  """
  if isinstance(urls, str):
    urls = urls.split(",")
  out = tuple(u.strip() for u in urls if u and u.strip())
  for u in out:
    if config_schema.redact_url(u) != u:
      raise ConfigError(f"judge URL {config_schema.redact_url(u)}: {config_schema.CREDENTIALS_IN_URL}")
  return out


def retry_after_seconds(headers) -> float | None:
  """Seconds a server asks to wait: `retry-after-ms`, then `retry-after` (seconds or an HTTP date).

  Only a number the client can sleep on counts: NaN, a negative value or text that is neither a number
  nor a date is None (the client's own backoff applies); infinity, or a date far ahead, stays a large
  number, which `client.max_retry_after_s` turns into a final failure.
  """
  if not headers:
    return None
  for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
    value = headers.get(name)
    if value is None:
      continue
    try:
      return _sane_delay(float(value) / divisor)
    except (ValueError, OverflowError):
      pass
  value = headers.get("retry-after")
  if value is None:
    return None
  try:
    date = email.utils.parsedate_tz(value)
    return None if date is None else _sane_delay(float(email.utils.mktime_tz(date) - time.time()))
  except (TypeError, ValueError, OverflowError, IndexError):
    return None


def _sane_delay(seconds: float) -> float | None:
  """A delay a server asked for, or None when it is not one (NaN or negative); +inf is kept (too long)."""
  return seconds if seconds >= 0 else None  # NaN compares False


def backoff_delay(retry: int, *, initial: float, maximum: float, jitter: float, rng: random.Random) -> float:
  """Exponential backoff with jitter: min(initial · 2^retry, maximum) · (1 − jitter · U[0, 1))."""
  return min(initial * 2.0 ** min(retry, 60), maximum) * (1.0 - jitter * rng.random())


def request_key(payload: dict) -> str:
  """The cache key of a request: SHA-256 of its canonical JSON (endpoint-independent)."""
  return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


# What `extra_body` (judge.extra_body) accepts: the config declares its field with this very check.
EXTRA_BODY_CHECK = config_schema.json_object(
    reserved=BODY_KEYS_SET_BY_CLIENT,
    why="the client sets these itself from judge.model, temperature, max_tokens and seed, and reads one whole answer")


class ResponseCache:
  """Answers on disk, one JSON file per request key (atomic writes; safe across processes)."""

  def __init__(self, directory: str):
    self.directory = os.path.expanduser(directory)
    os.makedirs(self.directory, exist_ok=True)

  def _path(self, key: str) -> str:
    return os.path.join(self.directory, key[:2], key + ".json")

  def get(self, key: str) -> dict | None:
    """The record stored under `key`, or None (none, unreadable, or not a record: asked again)."""
    try:
      with open(self._path(key), encoding="utf-8") as f:
        record = json.load(f)
    except (OSError, ValueError, RecursionError):
      return None
    ok = (isinstance(record, dict) and all(isinstance(record.get(k), (str, type(None))) for k in
                                           ("content", "reasoning", "finish_reason"))
          and all(isinstance(record.get(k, 0), int) and record.get(k, 0) >= 0 for k in
                  ("prompt_tokens", "completion_tokens")))
    return record if ok else None

  def put(self, key: str, record: dict) -> None:
    path = self._path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fileio.atomic_write(path, json.dumps(record, ensure_ascii=False))


class JudgeClient:
  """Async client of one judge model behind one or more OpenAI-compatible endpoints (module docstring).

      async with JudgeClient(["http://127.0.0.1:8000/v1"], model="judge") as client:
        c = await client.chat([{"role": "user", "content": prompt}], parse=prompts.parse_pairwise)
        if c.ok: ... c.parsed ...

  One client serves one event loop at a time; `close()` (or `async with`) before that loop ends.
  """

  def __init__(self, urls: str | Sequence[str], *, model: str, api_key: str | None = None,
               temperature: float = 0.0, max_tokens: int = 16384, seed: int = 0, concurrency: int = 64,
               deadline_s: float = 600.0, timeout_s: float = 600.0, connect_timeout_s: float = 10.0,
               max_retries: int = 4, max_parse_retries: int = 2, max_truncation_retries: int = 0,
               backoff_initial_s: float = 0.5, backoff_max_s: float = 8.0, jitter: float = 0.25,
               max_retry_after_s: float = 60.0, failures_before_cooldown: int = 3, cooldown_s: float = 5.0,
               cache_dir: str = "", extra_body=None, rng_seed: int | None = None,
               max_response_bytes: int = 8 << 20):
    urls = split_urls(urls)
    if not urls:
      raise ValueError("JudgeClient needs at least one judge URL (judge.urls)")
    if concurrency < 1:
      raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if not deadline_s > 0:
      raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
    self.model = model
    self.temperature, self.max_tokens, self.seed = float(temperature), int(max_tokens), int(seed)
    self.max_retries, self.max_parse_retries = int(max_retries), int(max_parse_retries)
    self.max_truncation_retries = int(max_truncation_retries)
    self.deadline_s, self.timeout_s, self.connect_timeout_s = float(deadline_s), float(timeout_s), connect_timeout_s
    self.backoff_initial_s, self.backoff_max_s, self.jitter = backoff_initial_s, backoff_max_s, jitter
    self.max_retry_after_s = max_retry_after_s
    self.max_response_bytes = int(max_response_bytes)
    self.failures_before_cooldown, self.cooldown_s = failures_before_cooldown, cooldown_s
    self.extra_body = {}
    if extra_body is not None:
      problem = EXTRA_BODY_CHECK.test(extra_body)
      if problem:
        raise ValueError(f"extra_body (judge.extra_body): {problem}")
      self.extra_body = config_schema.json_object_value(extra_body)
    self.cache = ResponseCache(cache_dir) if cache_dir else None
    self._endpoints = [_Endpoint(i, u, concurrency) for i, u in enumerate(urls)]
    self._headers = {"Content-Type": "application/json", "Accept-Encoding": ACCEPT_ENCODING}
    if api_key:
      self._headers["Authorization"] = f"Bearer {api_key}"
    self._secret = api_key or None  # scrubbed from what a judge sends back (`_finish`)
    self._rng = random.Random(rng_seed)
    self._rr = 0
    self._loop = None
    self._session: aiohttp.ClientSession | None = None
    self._waiters: collections.deque = collections.deque()
    self.stats = ClientStats(per_endpoint={e.base: {"requests": 0, "errors": 0} for e in self._endpoints})

  @classmethod
  def from_config(cls, config, urls: Sequence[str] | None = None, model: str | None = None,
                  **overrides) -> "JudgeClient":
    """A client from the judges config (`judges.default_config()`); `urls` / `model` override the config's."""
    c = config.client
    api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
    kwargs = dict(
        model=model or config.model, api_key=api_key, temperature=config.temperature,
        max_tokens=config.max_tokens, seed=config.seed, extra_body=config.extra_body, concurrency=c.concurrency,
        deadline_s=c.deadline_s, timeout_s=c.timeout_s, connect_timeout_s=c.connect_timeout_s,
        max_retries=c.max_retries, max_parse_retries=c.max_parse_retries,
        max_truncation_retries=c.max_truncation_retries, backoff_initial_s=c.backoff_initial_s,
        backoff_max_s=c.backoff_max_s, jitter=c.jitter, max_retry_after_s=c.max_retry_after_s,
        failures_before_cooldown=c.failures_before_cooldown, cooldown_s=c.cooldown_s, cache_dir=c.cache_dir,
        max_response_bytes=c.max_response_bytes)
    kwargs.update(overrides)
    return cls(urls if urls is not None else config.urls, **kwargs)

  @property
  def urls(self) -> tuple[str, ...]:
    return tuple(e.base for e in self._endpoints)

  # ── lifecycle ──

  def _ensure_loop_state(self) -> None:
    loop = asyncio.get_running_loop()
    if self._loop is not loop:
      # A new event loop (e.g. a second asyncio.run): primitives and sessions are per loop.
      self._loop, self._session, self._waiters = loop, None, collections.deque()
      for e in self._endpoints:
        e.in_flight = 0
    if self._session is None or self._session.closed:
      # No connector-level cap: the per-endpoint limits are the concurrency control.
      # auto_decompress off: `_read_answer` inflates within max_response_bytes (ACCEPT_ENCODING).
      self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                                            auto_decompress=False)

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

  def _pick(self, avoid: _Endpoint | None) -> _Endpoint | None:
    now = time.monotonic()
    healthy = [e for e in self._endpoints if e.cooldown_until <= now]
    free = [e for e in (healthy or self._endpoints) if e.in_flight < e.limit]
    if not free:
      return None
    n = len(self._endpoints)
    best = min(free, key=lambda e: (e is avoid and len(free) > 1, e.in_flight / e.limit, (e.index - self._rr) % n))
    self._rr = (best.index + 1) % n
    return best

  async def _acquire(self, avoid: _Endpoint | None, budget: _Budget) -> _Endpoint | None:
    """A free endpoint (its slot taken), or None when the judgment's deadline passes first."""
    while True:
      endpoint = self._pick(avoid)
      if endpoint is not None:
        endpoint.in_flight += 1
        return endpoint
      left = budget.left()
      if left <= 0:
        return None
      waiter = self._loop.create_future()
      self._waiters.append(waiter)
      try:
        if budget.deadline is None:
          await waiter
        else:
          await asyncio.wait({waiter}, timeout=left)
      except asyncio.CancelledError:
        if waiter.done() and not waiter.cancelled():
          self._wake()  # pass on a wake-up this task can no longer use
        waiter.cancel()
        raise
      if not waiter.done():  # the deadline came first; a cancelled waiter is skipped by `_wake`
        waiter.cancel()
        return None

  def _wake(self) -> None:
    while self._waiters:
      waiter = self._waiters.popleft()
      if not waiter.done():
        waiter.set_result(None)
        return

  def _release(self, endpoint: _Endpoint, failed: bool) -> None:
    endpoint.in_flight -= 1
    if failed:
      endpoint.failures += 1
      endpoint.errors += 1
      self.stats.per_endpoint[endpoint.base]["errors"] += 1
      if endpoint.failures >= self.failures_before_cooldown:
        endpoint.cooldown_until = time.monotonic() + self.cooldown_s
    else:
      endpoint.failures = 0
    self._wake()

  # ── one HTTP request ──

  async def _post(self, endpoint: _Endpoint, data: bytes, limit_s: float) -> _Attempt:
    endpoint.requests += 1
    self.stats.usage += Usage(http_requests=1)
    self.stats.per_endpoint[endpoint.base]["requests"] += 1
    timeout = aiohttp.ClientTimeout(total=limit_s, connect=min(self.connect_timeout_s, limit_s))
    try:
      async with self._session.post(endpoint.url, data=data, headers=self._headers, timeout=timeout) as resp:
        status, headers = resp.status, resp.headers
        raw = await _read_answer(resp, self.max_response_bytes)
    except asyncio.TimeoutError:
      return _Attempt("timeout", True, f"no answer within {limit_s:.3g} s")
    except aiohttp.ClientError as e:
      return _Attempt("connection", True, f"{type(e).__name__}: {e}"[:_DETAIL_CHARS])
    except _BadAnswer as e:
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
    except _BadAnswer as e:
      return _Attempt("bad_response", True, f"HTTP 200 without a chat completion ({e}): "
                      + raw[:200].decode("utf-8", "replace"), status)
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
        budget.deadline = time.monotonic() + self.deadline_s
      left = budget.left()
      if left <= 0:
        self._release(endpoint, failed=False)
        return self._expire(result)
      limit_s = min(self.timeout_s, left)
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
      if attempt.error == "timeout" and limit_s < self.timeout_s and budget.left() <= 0.05:
        # The deadline clipped this attempt and has now passed; any other timeout is retried as usual
        # (the retry below stops when its backoff would overrun the deadline).
        return self._expire(result, f"an attempt was still waiting for its answer after {limit_s:.3g} s")
      result.failure_reason, result.failure_detail = attempt.error, attempt.detail
      if not attempt.retryable or budget.transport <= 0:
        return None
      wait = attempt.retry_after
      if wait is not None and wait > self.max_retry_after_s:
        result.failure_detail += f" (Retry-After {wait:g} s exceeds client.max_retry_after_s)"
        return None
      if wait is None or wait <= 0:
        wait = backoff_delay(self.max_retries - budget.transport, initial=self.backoff_initial_s,
                             maximum=self.backoff_max_s, jitter=self.jitter, rng=self._rng)
      if wait >= budget.left():  # sleeping would only end at (or past) the deadline
        return self._expire(result, f"the next retry was due in {wait:.3g} s")
      budget.transport -= 1
      self.stats.transport_retries += 1
      avoid = endpoint
      await asyncio.sleep(wait)

  def _expire(self, result: Completion, why: str = "no time was left for another attempt") -> None:
    """Marks `result` failed by the judgment's deadline, keeping the failure that came before it."""
    before = f"; before it: {result.failure_reason}: {result.failure_detail}" if result.failure_reason else ""
    result.failure_reason = "deadline"
    result.failure_detail = (f"the judgment's deadline ({self.deadline_s:g} s, client.deadline_s) ended it: {why}"
                             + before)[:2 * _DETAIL_CHARS]

  # ── the call ──

  def payload(self, messages: Sequence[dict], *, temperature: float | None = None, max_tokens: int | None = None,
              seed: int | None = None) -> dict:
    """The request body: model, messages and explicit sampling parameters (plus `extra_body`)."""
    body = {
        "model": self.model,
        "messages": [dict(m) for m in messages],
        "temperature": self.temperature if temperature is None else float(temperature),
        "max_tokens": self.max_tokens if max_tokens is None else int(max_tokens),
        "seed": self.seed if seed is None else int(seed),
    }
    body.update(self.extra_body)
    return body

  async def chat(self, messages: Sequence[dict], *, parse: Callable[[str], Any] | None = None,
                 temperature: float | None = None, max_tokens: int | None = None,
                 seed: int | None = None) -> Completion:
    """One judged answer: requests within the judgment's retry budgets and deadline (module docstring).
    Never raises on judge failures: a final failure is a `Completion` with `failure_reason` set."""
    self._ensure_loop_state()
    start = time.perf_counter()
    payload = self.payload(messages, temperature=temperature, max_tokens=max_tokens, seed=seed)
    result = Completion()
    self.stats.usage += Usage(calls=1)
    key = request_key(payload) if self.cache is not None else None
    if key is not None and self._from_cache(key, parse, result):
      return self._finish(result, start)
    budget = _Budget(self.max_retries, self.max_parse_retries, self.max_truncation_retries)
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
      if result.finish_reason == "length":
        result.failure_reason = "truncated"
        result.failure_detail = f"the answer was cut at max_tokens={payload['max_tokens']}"
        if budget.truncation <= 0:
          return self._finish(result, start)
        budget.truncation -= 1
        self.stats.truncation_retries += 1
        continue
      parsed, error = _safe_parse(parse, result.content)
      if parsed is None:
        result.failure_reason = "unparseable"
        if result.content is None or not result.content.strip():
          result.failure_detail = ("the answer had no content" + (", only reasoning" if result.reasoning else "")
                                   + f" (finish_reason {result.finish_reason!r})")
        else:
          result.failure_detail = (f"the parser failed ({error}) on: " if error else
                                   "no verdict could be parsed from: ") + result.content[-200:]
        if budget.parse <= 0:
          return self._finish(result, start)
        budget.parse -= 1
        self.stats.parse_retries += 1
        continue
      result.parsed, result.failure_reason, result.failure_detail = parsed, None, ""
      if key is not None:
        self.cache.put(key, {"content": result.content, "reasoning": result.reasoning,
                             "finish_reason": result.finish_reason, "prompt_tokens": result.usage.prompt_tokens,
                             "completion_tokens": result.usage.completion_tokens, "seed": result.seed})
      return self._finish(result, start)

  def _from_cache(self, key: str, parse, result: Completion) -> bool:
    record = self.cache.get(key)
    if record is None:
      return False
    parsed, _ = _safe_parse(parse, record.get("content"))
    if parsed is None:  # e.g. the parser changed since: ask again
      return False
    result.content, result.reasoning = record.get("content"), record.get("reasoning")
    result.finish_reason, result.seed = record.get("finish_reason"), record.get("seed")
    result.parsed, result.cached = parsed, True
    result.usage += Usage(prompt_tokens=record.get("prompt_tokens", 0),
                          completion_tokens=record.get("completion_tokens", 0))
    self.stats.cache_hits += 1
    return True

  @staticmethod
  def _read_body(body: dict, result: Completion) -> None:
    """Copies the fields `completion_fields` checked into `result`."""
    result.content, result.reasoning, result.finish_reason = body["content"], body["reasoning"], body["finish_reason"]
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


def _safe_parse(parse, content) -> tuple[Any, str]:
  """(parse(content) or None, what the parser raised): an answer the parser chokes on is one without a verdict."""
  if not isinstance(content, str):
    return None, ""
  if parse is None:
    return content, ""
  try:
    return parse(content), ""
  except Exception as e:  # pylint: disable=broad-except  (a judge's text must not stop training, whatever it holds)
    return None, f"{type(e).__name__}: {e}"[:100]


class _BadAnswer(ValueError):
  """An HTTP answer the client will not read (too large, badly encoded, not a chat completion)."""


async def _read_answer(resp: aiohttp.ClientResponse, limit: int) -> bytes:
  """The body of `resp`, decoded, at most `limit` bytes on the wire and after decompression.

  Raises:
    _BadAnswer: a larger body (by its Content-Length or as it arrives), a larger inflated body (a
      decompression bomb stops at `limit` + 1 bytes), an encoding other than ACCEPT_ENCODING's.
  """
  declared = resp.content_length
  if declared is not None and declared > limit:
    raise _BadAnswer(f"an answer of {declared} bytes exceeds client.max_response_bytes={limit}")
  raw = bytearray()
  async for chunk in resp.content.iter_chunked(1 << 16):
    raw += chunk
    if len(raw) > limit:
      raise _BadAnswer(f"the answer exceeds client.max_response_bytes={limit} bytes")
  encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
  if encoding in ("", "identity"):
    return bytes(raw)
  if encoding not in ("gzip", "x-gzip", "deflate"):
    raise _BadAnswer(f"Content-Encoding {encoding[:40]!r} was not asked for (Accept-Encoding: {ACCEPT_ENCODING})")
  # gzip, or zlib-wrapped deflate (auto-detected by 32 + MAX_WBITS); raw deflate as some servers send it.
  wbits = 32 + zlib.MAX_WBITS if encoding != "deflate" or raw[:1] == b"\x78" else -zlib.MAX_WBITS
  inflater = zlib.decompressobj(wbits)
  try:
    out = inflater.decompress(bytes(raw), limit + 1)
  except zlib.error as e:
    raise _BadAnswer(f"a {encoding} body that does not inflate: {e}") from None
  if len(out) > limit or inflater.unconsumed_tail:
    raise _BadAnswer(f"the answer inflates past client.max_response_bytes={limit} bytes ({len(raw)} on the wire)")
  return out


def _count(usage: dict, name: str) -> int:
  value = usage.get(name)
  if value is None:
    return 0
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2 ** 53:
    raise _BadAnswer(f"usage.{name} is {str(value)[:40]!r}, not a token count")
  return int(value)


def completion_fields(raw: bytes) -> dict:
  """The fields the client reads from a chat-completions answer, each checked for its type.

  Returns {content, reasoning, finish_reason: str | None, prompt_tokens, completion_tokens: int}.
  `reasoning` is `message.reasoning_content` or `message.reasoning` (vLLM / SGLang reasoning parsers).

  Raises:
    _BadAnswer: naming the first field that is missing or of the wrong type (a failed judgment, reason
      `bad_response`; whatever a judge sends, the trainer only ever sees a failed judgment).
  """
  try:
    body = json.loads(raw)
  except (ValueError, RecursionError) as e:  # RecursionError: JSON nested thousands deep
    raise _BadAnswer(f"not JSON: {type(e).__name__}") from None
  if not isinstance(body, dict):
    raise _BadAnswer(f"the body is a JSON {type(body).__name__}, not an object")
  choices = body.get("choices")
  if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
    raise _BadAnswer("choices is not a non-empty list of objects")
  choice = choices[0]
  message = choice.get("message")
  if not isinstance(message, dict):
    raise _BadAnswer("choices[0].message is not an object")
  fields = {"content": message.get("content"), "reasoning_content": message.get("reasoning_content"),
            "reasoning": message.get("reasoning"), "finish_reason": choice.get("finish_reason")}
  for key, value in fields.items():
    if value is not None and not isinstance(value, str):
      where = "choices[0]." if key == "finish_reason" else "choices[0].message."
      raise _BadAnswer(f"{where}{key} is a {type(value).__name__}, not a string")
  out = {"content": fields["content"], "reasoning": fields["reasoning_content"] or fields["reasoning"],
         "finish_reason": fields["finish_reason"]}
  usage = body.get("usage")
  if usage is None:
    usage = {}
  if not isinstance(usage, dict):
    raise _BadAnswer(f"usage is a {type(usage).__name__}, not an object")
  out["prompt_tokens"], out["completion_tokens"] = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
  return out
