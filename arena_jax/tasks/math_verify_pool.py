"""`math-verify` answer checking in a pool of worker processes with a per-item timeout.

Sympy can take unbounded time on a pathological answer (`9^9^9^9`, a 10k-character expression), and
math-verify's own timeouts rely on SIGALRM, which only works in a main thread. So every comparison
runs in a persistent worker process (slow or untrusted work runs out of process with timeouts, after
maxtext's `math_verify_pool.py`): the parent sends one item to each idle worker, waits on the pipes,
and kills and replaces a worker whose item runs past `timeout_s` — that item scores 0 and training goes
on. Workers are recycled every `max_items_per_worker` items because sympy's caches only grow.

Workers are fresh interpreters (`python -m arena_jax.tasks.verify_worker`, talking JSON lines over
pipes): nothing is forked from a process that may hold JAX's threads, and unlike multiprocessing's
"spawn" they do not re-import the caller's main script, so a launch file without a `__main__` guard
works. A worker imports math-verify before it takes work, so start-up is not charged to an item.
The comparison a worker runs is named by import path ("module:function"), so tests can swap it.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from typing import Sequence

_STARTUP_TIMEOUT_S = 120.0
_READY = "ready"  # the worker's first line (must match verify_worker.READY)
DEFAULT_FN = "arena_jax.tasks.math_verify_pool:math_verify_equal"


def _as_latex(answer: str) -> str:
  """Wraps an answer in \\boxed{} (math-verify then parses "1/2", "x^2+1" and "\\frac{1}{2}" alike)."""
  a = answer.strip()
  if len(a) >= 2 and a[0] == a[-1] == "$":
    a = a.strip("$").strip()
  return a if "\\boxed" in a else "\\boxed{" + a + "}"


def _normalise_text(answer: str) -> str:
  return re.sub(r"\s+", " ", answer.strip().strip("$").strip().rstrip(".")).lower()


def math_verify_equal(gold: str, pred: str) -> bool:
  """math-verify equivalence of a reference and a predicted answer (runs inside a worker).

  A reference that math-verify cannot parse (a word, a name) is compared as normalised text.
  """
  from math_verify import parse, verify  # pylint: disable=g-import-not-at-top  (worker-side only)

  g = parse(_as_latex(gold), parsing_timeout=None)
  if not g:
    return _normalise_text(gold) == _normalise_text(pred)
  p = parse(_as_latex(pred), parsing_timeout=None)
  return bool(p) and bool(verify(g, p, timeout_seconds=None))


@dataclasses.dataclass(eq=False)
class _Worker:
  process: subprocess.Popen
  log: object  # the worker's stderr, kept to explain a failed start
  started: float
  ready: bool = False
  items: int = 0
  item: int | None = None  # the item in progress
  deadline: float = 0.0


class MathVerifyPool:
  """Persistent worker processes that compare (reference, predicted) answers with a per-item timeout.

  Usage:
    with MathVerifyPool(num_workers=2, timeout_s=10) as pool:
      rewards = pool.verify(references, predictions)   # list of 0.0 / 1.0
  `stats` counts items, timeouts, errors (exceptions inside math-verify) and crashed workers.
  """

  def __init__(
    self, num_workers: int = 2, timeout_s: float = 10.0, max_items_per_worker: int = 2000, fn: str = DEFAULT_FN
  ):
    if num_workers < 1:
      raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    if not timeout_s > 0:
      raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    self.num_workers = num_workers
    self.timeout_s = float(timeout_s)
    self.max_items_per_worker = max_items_per_worker
    self._fn = fn
    self._workers: list[_Worker] = []
    self._selector = selectors.DefaultSelector()
    self.stats = collections.Counter(items=0, timeouts=0, errors=0, crashes=0)

  # ── worker lifecycle ──
  def _spawn(self) -> _Worker:
    env = dict(os.environ)
    # The child must import what the parent imports (the package, and a test's comparison).
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
      [sys.executable, "-m", "arena_jax.tasks.verify_worker", self._fn],
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      stderr=log,
      env=env,
      bufsize=0,
    )
    w = _Worker(process, log, started=time.monotonic())
    self._selector.register(process.stdout, selectors.EVENT_READ, w)
    return w

  def _retire(self, w: _Worker, kill: bool):
    try:
      self._selector.unregister(w.process.stdout)
    except (KeyError, ValueError):
      pass
    try:
      w.process.stdin.close()  # a clean worker exits at the end of its input
    except OSError:
      pass
    if kill:
      w.process.kill()
    try:
      w.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
      w.process.kill()
      w.process.wait()
    w.process.stdout.close()
    w.log.close()

  def _replace(self, w: _Worker, kill: bool):
    self._retire(w, kill)
    self._workers[self._workers.index(w)] = self._spawn()

  def _start_failure(self, w: _Worker, why: str) -> RuntimeError:
    w.log.seek(0)
    tail = w.log.read()[-2000:].decode("utf-8", "replace")
    return RuntimeError(f"a math-verify worker {why}; its stderr ends with:\n{tail}")

  def close(self):
    """Stops every worker (idempotent)."""
    for w in self._workers:
      self._retire(w, kill=w.item is not None or not w.ready)
    self._workers = []

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  def __del__(self):
    try:
      self.close()
    except Exception:  # pylint: disable=broad-except  (interpreter shutdown)
      pass

  # ── work ──
  def verify(self, golds: Sequence[str], preds: Sequence[str]) -> list[float]:
    """1.0 where math-verify finds pred equivalent to gold, 0.0 otherwise (and on timeout or error)."""
    if len(golds) != len(preds):
      raise ValueError(f"{len(golds)} references but {len(preds)} predictions")
    results = [0.0] * len(golds)
    while len(self._workers) < self.num_workers:
      self._workers.append(self._spawn())
    pending = collections.deque(range(len(golds)))
    while True:
      for w in self._workers:
        if w.ready and w.item is None and pending:
          i = pending.popleft()
          w.process.stdin.write((json.dumps([i, str(golds[i]), str(preds[i])]) + "\n").encode())
          w.item, w.deadline = i, time.monotonic() + self.timeout_s
      busy = [w for w in self._workers if w.item is not None]
      if not pending and not busy:
        return results
      deadlines = [w.deadline for w in busy] + [w.started + _STARTUP_TIMEOUT_S for w in self._workers if not w.ready]
      for key, _ in self._selector.select(timeout=max(0.0, min(deadlines) - time.monotonic())):
        w = key.data
        line = w.process.stdout.readline()
        if not line:  # the worker died (out of memory, a crash in native code)
          if not w.ready:
            raise self._start_failure(w, "exited while starting")
          self.stats["crashes"] += 1
          self.stats["items"] += 1
          w.item = None
          self._replace(w, kill=True)
          continue
        msg = json.loads(line)
        if msg == _READY:
          w.ready = True
          continue
        i, ok, err = msg
        results[i] = float(ok)
        self.stats["items"] += 1
        self.stats["errors"] += err is not None
        w.item = None
        w.items += 1
        if w.items >= self.max_items_per_worker:
          self._replace(w, kill=False)
      now = time.monotonic()
      for w in list(self._workers):
        if w.item is not None and now >= w.deadline:
          self.stats["timeouts"] += 1
          self.stats["items"] += 1
          w.item = None
          self._replace(w, kill=True)
        elif not w.ready and now >= w.started + _STARTUP_TIMEOUT_S:
          raise self._start_failure(w, f"did not start within {_STARTUP_TIMEOUT_S:.0f} s")
