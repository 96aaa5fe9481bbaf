"""Where a judgment's requests go: judge URLs, and the load spread over several endpoints.

Each request goes to the endpoint with the most free capacity (round-robin among equals); each endpoint
has its own concurrency limit, and one that keeps failing is taken out of rotation for a cool-down while
another one is healthy; a retry avoids the endpoint that just failed. A request that finds no free slot
waits, first come first served, until one is released or its judgment's deadline passes.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Sequence

from arena_jax import config_schema
from arena_jax.errors import ConfigError


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
  return chat_completions_url(base)[: -len("/chat/completions")] + "/models"


def tokenize_url(base: str) -> str:
  """The URL of vLLM's `POST /tokenize` (served at the server's root, beside `/v1`) of a base URL given in any
  form `chat_completions_url` takes."""
  root = chat_completions_url(base).removesuffix("/chat/completions")
  return root.removesuffix("/v1") + "/tokenize"


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


class Endpoint:
  """One judge URL: its concurrency limit, load and health."""

  __slots__ = ("index", "base", "url", "limit", "in_flight", "failures", "cooldown_until", "requests", "errors")

  def __init__(self, index: int, base: str, limit: int):
    self.index, self.base, self.url, self.limit = index, base, chat_completions_url(base), limit
    self.in_flight = self.failures = self.requests = self.errors = 0
    self.cooldown_until = 0.0


class EndpointPool:
  """The endpoints of one `JudgeClient`: which one takes the next request, the requests waiting for a
  slot, and each endpoint's health (module docstring).

  Its waiters are futures of one event loop: `new_loop` starts over on another one.
  """

  def __init__(self, urls: Sequence[str], limit: int, *, failures_before_cooldown: int, cooldown_s: float):
    self.endpoints = [Endpoint(i, u, limit) for i, u in enumerate(urls)]
    self.failures_before_cooldown, self.cooldown_s = failures_before_cooldown, cooldown_s
    self._rr = 0
    self._loop = None
    self._waiters: collections.deque = collections.deque()

  @property
  def urls(self) -> tuple[str, ...]:
    return tuple(e.base for e in self.endpoints)

  def new_loop(self, loop: asyncio.AbstractEventLoop) -> None:
    """Serves `loop` from now on: the slots taken and the waiters of the previous loop are forgotten."""
    self._loop, self._waiters = loop, collections.deque()
    for e in self.endpoints:
      e.in_flight = 0

  def pick(self, avoid: Endpoint | None) -> Endpoint | None:
    """The endpoint with the most free capacity (healthy ones first, `avoid` last), or None when all are full."""
    now = time.monotonic()
    healthy = [e for e in self.endpoints if e.cooldown_until <= now]
    free = [e for e in (healthy or self.endpoints) if e.in_flight < e.limit]
    if not free:
      return None
    n = len(self.endpoints)
    best = min(free, key=lambda e: (e is avoid and len(free) > 1, e.in_flight / e.limit, (e.index - self._rr) % n))
    self._rr = (best.index + 1) % n
    return best

  async def acquire(self, avoid: Endpoint | None, budget) -> Endpoint | None:
    """A free endpoint (its slot taken), or None when the deadline of `budget` (the judgment's retry
    budget: `deadline`, None while it has not started, and `left()`) passes first."""
    while True:
      endpoint = self.pick(avoid)
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
          self.wake()  # pass on a wake-up this task can no longer use
        waiter.cancel()
        raise
      if not waiter.done():  # the deadline came first; a cancelled waiter is skipped by `wake`
        waiter.cancel()
        return None

  def wake(self) -> None:
    """Wakes the first request still waiting for a slot."""
    while self._waiters:
      waiter = self._waiters.popleft()
      if not waiter.done():
        waiter.set_result(None)
        return

  def release(self, endpoint: Endpoint, failed: bool) -> None:
    """Gives back the slot of `endpoint`; `failed` (a transport failure) counts against its health, and
    `failures_before_cooldown` of them in a row cool it down for `cooldown_s`."""
    endpoint.in_flight -= 1
    if failed:
      endpoint.failures += 1
      endpoint.errors += 1
      if endpoint.failures >= self.failures_before_cooldown:
        endpoint.cooldown_until = time.monotonic() + self.cooldown_s
    else:
      endpoint.failures = 0
    self.wake()
