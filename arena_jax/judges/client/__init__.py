"""Async OpenAI-compatible chat-completions client for LLM judges (docs/architecture.md, "The loop").

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

The modules, one concern each:

  endpoints     URLs (`split_urls`, `chat_completions_url`, `models_url`) and `EndpointPool`: load spreading,
                per-endpoint limits, cool-downs, requests waiting for a slot
  backoff       which failures are retried and how long to wait: `backoff_delay`, `retry_after_seconds`
  responses     defensive reading of answers: `read_answer` (size caps, decompression), `completion_fields`
  cache         `ResponseCache` and its key, `request_key`
  probe         `check_endpoints`, the start-up check, and its `JudgeUnreachableError`; `check_logprobs` (the
                logprobs verdict format); `served_context` / `note_context` (what a judge said its context
                is); `check_tokenize`
  settings      `JudgeClientSettings`: what a client is made with, from the judge config (`from_config`) or its
                declared defaults (`defaults`); `EXTRA_BODY_CHECK`, what `extra_body` may hold
  results       what calls return and count: `Completion`, `ClientStats`, `TokenizeError`
  judge_client  `JudgeClient` (the one class to make, `JudgeClient.from_config`): one judgment's requests, retries
                and deadline; `JudgeClient.tokenize`, vLLM's `POST /tokenize` (`judge.tokenizer = "server"`,
                `judges.tokens`)

Nothing here imports the embedded judge server (`arena_jax.judges.embedded`): a client needs none.
"""

from arena_jax.judges.client.backoff import RETRYABLE_STATUSES, backoff_delay, retry_after_seconds
from arena_jax.judges.client.cache import ResponseCache, request_key
from arena_jax.judges.client.endpoints import chat_completions_url, models_url, split_urls, tokenize_url
from arena_jax.judges.client.judge_client import JudgeClient
from arena_jax.judges.client.probe import (
  JudgeUnreachableError,
  check_endpoints,
  check_logprobs,
  check_tokenize,
  note_context,
  served_context,
)
from arena_jax.judges.client.responses import ACCEPT_ENCODING, completion_fields, count_fields
from arena_jax.judges.client.results import ClientStats, Completion, TokenizeError
from arena_jax.judges.client.settings import BODY_KEYS_SET_BY_CLIENT, EXTRA_BODY_CHECK, JudgeClientSettings
