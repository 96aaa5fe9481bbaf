"""`math-verify` answer checking in a pool of worker processes with a per-item timeout (issue #4).

Sympy can take unbounded time on a pathological answer (`9^9^9^9`, a 10k-character expression), and
math-verify's own timeouts rely on SIGALRM, which only works in a main thread. So every comparison
runs in a persistent worker process (STYLE.md §8, after maxtext's `math_verify_pool.py`): the parent
sends one item to each idle worker, waits on the pipes, and kills and replaces a worker whose item
runs past `timeout_s` — that item scores 0 and training goes on. Workers are recycled every
`max_items_per_worker` items because sympy's caches only grow.

Workers are started with "spawn" (never fork a process that may hold JAX's threads) and import
math-verify before they take work, so start-up time is not charged to the first item's timeout.
"""
from __future__ import annotations

import collections
import dataclasses
import multiprocessing
import multiprocessing.connection
import re
import time
from typing import Callable, Sequence

_STARTUP_TIMEOUT_S = 120.0
_READY = "ready"


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


def _warm_math_verify():
  math_verify_equal("1/2", "0.5")


def _worker_main(conn, fn, warmup):
  if warmup is not None:
    warmup()
  conn.send(_READY)
  while True:
    try:
      msg = conn.recv()
    except (EOFError, OSError):
      return
    if msg is None:
      return
    index, gold, pred = msg
    try:
      conn.send((index, bool(fn(gold, pred)), None))
    except Exception as e:  # pylint: disable=broad-except  (a bad answer must not kill the worker)
      conn.send((index, False, repr(e)[:200]))


@dataclasses.dataclass
class _Worker:
  process: multiprocessing.Process
  conn: multiprocessing.connection.Connection
  ready: bool = False
  items: int = 0
  started: float = 0.0


class MathVerifyPool:
  """Persistent worker processes that compare (reference, predicted) answers with a per-item timeout.

  Usage:
    with MathVerifyPool(num_workers=2, timeout_s=10) as pool:
      rewards = pool.verify(references, predictions)   # list of 0.0 / 1.0
  `stats` counts items, timeouts, errors (exceptions inside math-verify) and crashed workers.
  """

  def __init__(self, num_workers: int = 2, timeout_s: float = 10.0, max_items_per_worker: int = 2000,
               fn: Callable[[str, str], bool] = math_verify_equal,
               warmup: Callable[[], None] | None = _warm_math_verify):
    if num_workers < 1:
      raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    if not timeout_s > 0:
      raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    self.num_workers = num_workers
    self.timeout_s = float(timeout_s)
    self.max_items_per_worker = max_items_per_worker
    self._fn = fn
    self._warmup = warmup
    self._ctx = multiprocessing.get_context("spawn")
    self._workers: list[_Worker] = []
    self.stats = collections.Counter(items=0, timeouts=0, errors=0, crashes=0)

  # ── worker lifecycle ──
  def _spawn(self) -> _Worker:
    parent, child = self._ctx.Pipe()
    p = self._ctx.Process(target=_worker_main, args=(child, self._fn, self._warmup), daemon=True,
                          name="arena_jax-math-verify")
    p.start()
    child.close()
    return _Worker(p, parent, started=time.monotonic())

  def _retire(self, w: _Worker, kill: bool):
    try:
      if not kill:
        w.conn.send(None)
    except (OSError, BrokenPipeError):
      pass
    if kill:
      w.process.kill()
    w.process.join(timeout=5)
    if w.process.is_alive():
      w.process.kill()
      w.process.join(timeout=5)
    w.conn.close()

  def _replace(self, w: _Worker, kill: bool):
    self._retire(w, kill)
    self._workers[self._workers.index(w)] = self._spawn()

  def close(self):
    """Stops every worker (idempotent)."""
    for w in self._workers:
      self._retire(w, kill=not w.ready)
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
    if not golds:
      return results
    while len(self._workers) < self.num_workers:
      self._workers.append(self._spawn())
    pending = collections.deque(range(len(golds)))
    busy: dict[int, tuple[int, float]] = {}  # id(worker) → (item, deadline)
    while pending or busy:
      for w in self._workers:
        if w.ready and id(w) not in busy and pending:
          i = pending.popleft()
          w.conn.send((i, str(golds[i]), str(preds[i])))
          busy[id(w)] = (i, time.monotonic() + self.timeout_s)
      now = time.monotonic()
      deadlines = [d for _, d in busy.values()] + [
          w.started + _STARTUP_TIMEOUT_S for w in self._workers if not w.ready]
      ready = multiprocessing.connection.wait(
          [w.conn for w in self._workers if id(w) in busy or not w.ready],
          timeout=max(0.0, min(deadlines) - now))
      by_conn = {id(w.conn): w for w in self._workers}
      for conn in ready:
        w = by_conn[id(conn)]
        try:
          msg = conn.recv()
        except (EOFError, OSError):  # the worker died (out of memory, a crash in native code)
          if id(w) in busy:
            self.stats["crashes"] += 1
            self.stats["items"] += 1
            busy.pop(id(w))
          elif not w.ready:
            raise RuntimeError("a math-verify worker died while starting; is math-verify installed?")
          self._replace(w, kill=True)
          continue
        if msg == _READY:
          w.ready = True
          continue
        i, ok, err = msg
        busy.pop(id(w))
        results[i] = float(ok)
        self.stats["items"] += 1
        self.stats["errors"] += err is not None
        w.items += 1
        if w.items >= self.max_items_per_worker:
          self._replace(w, kill=False)
      now = time.monotonic()
      for w in list(self._workers):
        if id(w) in busy and now >= busy[id(w)][1]:
          busy.pop(id(w))
          self.stats["timeouts"] += 1
          self.stats["items"] += 1
          self._replace(w, kill=True)
        elif not w.ready and now >= w.started + _STARTUP_TIMEOUT_S:
          raise RuntimeError(f"a math-verify worker did not start within {_STARTUP_TIMEOUT_S:.0f} s")
    return results
