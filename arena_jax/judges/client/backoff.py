"""When a failed request is tried again, and how long the client waits before it does.

Transport failures — connection errors, timeouts, HTTP 408 / 409 / 429 and 5xx — are retried (other 4xx
are final at once) after an exponential backoff with jitter (initial · 2^k capped, minus up to `jitter`
of it), or after what the server asks for in `Retry-After` / `retry-after-ms`, as openai-python does. A
Retry-After that is not a usable number is ignored; too long a one is a final failure (`JudgeClient`).
"""

from __future__ import annotations

import email.utils
import random
import time

RETRYABLE_STATUSES = frozenset({408, 409, 429})


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
