"""What judging costs: one accounting type for a call, a judgment, an audit, a tournament, a client.

`a + b` is sequential cost: every count and the latency add up. `Usage.parallel(a, b, …)` is the cost
of work done concurrently: counts add up, the latency is the slowest one's (the two orders of a
`both`-debiased pair). `sum(usages, Usage())` totals many.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Usage:
  """Judge calls (answers asked for, retries inside one call included), the HTTP requests they made
  (0 for a cached answer), the tokens every received answer cost, and seconds of latency."""

  calls: int = 0
  http_requests: int = 0
  prompt_tokens: int = 0
  completion_tokens: int = 0
  latency_s: float = 0.0

  def __add__(self, other: "Usage") -> "Usage":
    if not isinstance(other, Usage):
      return NotImplemented
    return Usage(
      self.calls + other.calls,
      self.http_requests + other.http_requests,
      self.prompt_tokens + other.prompt_tokens,
      self.completion_tokens + other.completion_tokens,
      self.latency_s + other.latency_s,
    )

  @classmethod
  def parallel(cls, *usages: "Usage") -> "Usage":
    """The cost of `usages` spent concurrently: counts summed, latency the maximum."""
    total = sum(usages, cls())
    return dataclasses.replace(total, latency_s=max((u.latency_s for u in usages), default=0.0))

  @property
  def total_tokens(self) -> int:
    return self.prompt_tokens + self.completion_tokens
