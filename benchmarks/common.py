"""Shared helpers for the benchmarks: timing, the table printer and the final JSON line."""
from __future__ import annotations

import json
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def timed(fn, *, repeats: int = 5, warmup: int = 1) -> float:
  """Median wall-clock seconds of `fn()` over `repeats` runs after `warmup` runs (compile excluded)."""
  for _ in range(warmup):
    fn()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def print_table(headers, rows) -> None:
  cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
  widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
  for k, row in enumerate(cells):
    print("  ".join(c.rjust(w) if k else c.ljust(w) for c, w in zip(row, widths)))
    if k == 0:
      print("  ".join("-" * w for w in widths))


def _fmt(c):
  if isinstance(c, float):
    return f"{c:.4g}"
  return str(c)


def emit_json(figures: dict) -> None:
  """The last line of every benchmark: one JSON object with the figures."""
  print(json.dumps(figures, sort_keys=False))
