"""Shared helpers for the benchmarks: timing, the table printer and the final JSON line."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def parse_flags(doc: str, argv, defaults: dict) -> argparse.Namespace:
  """A benchmark's flags, one per `defaults` entry ("--name": default), typed by its default; the description
  is the first paragraph of `doc`."""
  parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
  for name, default in defaults.items():
    parser.add_argument(name, type=type(default), default=default)
  return parser.parse_args(argv)


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


def matmul_peak_gflops(n: int = 2048, repeats: int = 10) -> float:
  """Best-of-`repeats` float32 GFLOP/s of an n×n by n×n `jnp.dot` on the default device: the machine's
  matmul peak that the model benchmarks (sampler, train step) state their FLOP/s as a fraction of."""
  import jax  # pylint: disable=g-import-not-at-top  (after JAX_PLATFORMS is set above)
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
  dot = jax.jit(jnp.dot)
  dot(a, b).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    dot(a, b).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2 * n**3 / best / 1e9


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


DAMAGE_KINDS = ("truncate", "delete", "flip")


def damage_checkpoint(step_dir: str, kind: str) -> str:
  """Damages the largest file (the manifest aside) of a checkpoint directory as a failing disk or an interrupted
  copy would: `truncate` (half its bytes), `delete` (the file gone) or `flip` (bytes inverted mid-file, same size).
  Returns the damaged file's path (soak benchmark, reliability tests)."""
  files = [
    os.path.join(r, f) for r, _, names in os.walk(step_dir) for f in names if f != "arena_manifest.json"
  ]  # `train.checkpoint.MANIFEST`: damage the data, not its record
  path = max(files, key=os.path.getsize)
  size = os.path.getsize(path)
  if kind == "truncate":
    os.truncate(path, size // 2)
  elif kind == "delete":
    os.remove(path)
  elif kind == "flip":
    with open(path, "r+b") as f:
      f.seek(size // 2)
      chunk = f.read(64)
      f.seek(size // 2)
      f.write(bytes(b ^ 0xFF for b in chunk))
  else:
    raise ValueError(f"unknown damage {kind!r}; one of {DAMAGE_KINDS}")
  return path
