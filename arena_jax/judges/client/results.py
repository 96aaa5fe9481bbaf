"""What a `JudgeClient`'s calls return and count: `Completion` (one judgment), `ClientStats` (all of them) and
`TokenizeError` (a count the judge's server did not give).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from arena_jax.judges.usage import Usage


class TokenizeError(RuntimeError):
  """The judge's server did not count (`JudgeClient.tokenize`). `unsupported`: it has no `/tokenize`
  (HTTP 404 / 405 / 501), a configuration error; otherwise only the judgment that needed the count fails."""

  def __init__(self, message: str, *, url: str, unsupported: bool = False):
    super().__init__(message)
    self.url, self.unsupported = url, unsupported


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
  top_logprobs: with `chat(top_logprobs=k)`, the first answer token's alternatives ((token, logprob), …).
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
  top_logprobs: tuple[tuple[str, float], ...] | None = None

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
