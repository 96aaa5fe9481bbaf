"""Where the suite's time and memory go, printed at the end of every run (a pytest plugin, tests/conftest.py).

- **The slowest files**, in worker-seconds: the sum of each file's tests' setup, call and teardown, as the controller
  receives their reports. With two workers a run's wall time is about half their total.
- **The compiles**: each process of the run (the controller or the xdist workers, not the children that tests
  start) counts XLA's backend compiles and their seconds, and its persistent-cache hits (jax.monitoring events).
- **The run's peak memory**: a thread of the controller sums the resident memory of the controller and every process
  below it (workers, servers, launch commands) once a second, and keeps the largest sum. Shared pages count once per
  process, so the figure is an upper bound; it is the figure the budget (CONTRIBUTING.md) is held to.
"""

import json
import os
import pathlib
import sys
import threading

_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT = "/jax/compilation_cache/cache_hits"
_PAGE = os.sysconf("SC_PAGE_SIZE")

compiles = {"programs": 0, "seconds": 0.0, "cache_hits": 0}


def _on_duration(event: str, duration: float, **kwargs) -> None:
  del kwargs
  if event == _BACKEND_COMPILE:
    compiles["programs"] += 1
    compiles["seconds"] += duration


def _on_event(event: str, **kwargs) -> None:
  del kwargs
  if event == _CACHE_HIT:
    compiles["cache_hits"] += 1


def count_compiles() -> None:
  """Registers the compile counters with jax.monitoring (once per process, before the tests run)."""
  from jax import monitoring  # noqa: PLC0415  (`python -m tests.suite_report` reads records without JAX)

  monitoring.register_event_duration_secs_listener(_on_duration)
  monitoring.register_event_listener(_on_event)


def _children() -> dict[int, list[int]]:
  tree: dict[int, list[int]] = {}
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
      except OSError:
        continue
      ppid = int(stat.rsplit(")", 1)[1].split()[1])
      tree.setdefault(ppid, []).append(int(entry))
  return tree


def tree_rss(pid: int) -> int:
  """The resident bytes of `pid` and every process below it."""
  tree, total, todo = _children(), 0, [pid]
  while todo:
    p = todo.pop()
    try:
      total += int(pathlib.Path(f"/proc/{p}/statm").read_text().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
      pass
    todo.extend(tree.get(p, ()))
  return total


class PeakMemory:
  """The largest `tree_rss(os.getpid())` seen, sampled every `every` seconds on a daemon thread."""

  def __init__(self, every: float = 1.0):
    self.peak = 0
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, args=(every,), daemon=True, name="suite-peak-memory")

  def _run(self, every: float) -> None:
    while not self._stop.is_set():
      self.peak = max(self.peak, tree_rss(os.getpid()))
      self._stop.wait(every)

  def start(self) -> "PeakMemory":
    if os.path.isdir("/proc"):
      self._thread.start()
    return self

  def stop(self) -> int:
    self._stop.set()
    if self._thread.is_alive():
      self._thread.join(timeout=10)
    return self.peak


def summary_lines(file_seconds: dict[str, float], worker_compiles: list[dict], peak: int, wall: float) -> list[str]:
  """The report's lines: the 10 slowest files, the compiles, the peak memory, the wall time."""
  total = sum(file_seconds.values())
  lines = [f"the 10 slowest files, of {total:.0f} worker-seconds over {len(file_seconds)} files:"]
  for name, seconds in sorted(file_seconds.items(), key=lambda kv: -kv[1])[:10]:
    lines.append(f"  {seconds:8.1f} s  {100 * seconds / max(total, 1e-9):4.1f}%  {name}")
  programs = sum(c.get("programs", 0) for c in worker_compiles)
  seconds = sum(c.get("seconds", 0.0) for c in worker_compiles)
  hits = sum(c.get("cache_hits", 0) for c in worker_compiles)
  lines.append(
    f"XLA backend compiles in the suite's {len(worker_compiles)} test process(es): {programs} programs, "
    f"{seconds:.0f} s; persistent-cache hits: {hits}"
  )
  if peak:
    lines.append(f"peak memory of the run (the resident sum of the suite's processes): {peak / 2**30:.1f} GiB")
  lines.append(f"wall: {wall:.0f} s")
  return lines


# ── the whole `make test` / `make test-all`: its passes' records, merged ──
# Each pass's controller writes its record (`write_record`) to the test cache; the Makefile's last step merges the
# passes of the run that just ended (`python -m tests.suite_report PASS...`).


def record_path(root: pathlib.Path, name: str) -> pathlib.Path:
  return root / "last_run" / f"{name}.json"


RUN_ENV = "ARENA_JAX_SUITE_RUN"  # set by the Makefile: the passes of one `make test` share it


def write_record(path: pathlib.Path, file_seconds: dict, worker_compiles: list[dict], peak: int, wall: float) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  record = dict(run=os.environ.get(RUN_ENV), file_seconds=file_seconds, compiles=worker_compiles, peak=peak, wall=wall)
  path.write_text(json.dumps(record), encoding="utf-8")


def merged_lines(records: list[dict]) -> list[str]:
  """`summary_lines` of several passes run one after the other: file seconds add up, the peak is the largest."""
  seconds: dict[str, float] = {}
  for r in records:
    for name, s in r["file_seconds"].items():
      seconds[name] = seconds.get(name, 0.0) + s
  compiles = [c for r in records for c in r["compiles"]]
  return summary_lines(seconds, compiles, max(r["peak"] for r in records), sum(r["wall"] for r in records))


def main(argv: list[str]) -> int:
  from tests import cache  # noqa: PLC0415  (no JAX set-up needed to read the records)

  records = []
  for name in argv:
    path = record_path(cache.root(), name)
    try:
      record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
      record = None
    if record is None or record.get("run") != os.environ.get(RUN_ENV):
      print(f"(the {name} pass of this run left no record at {path})")
    else:
      records.append(record)
  if records:
    print(f"== where the time went: {' + '.join(argv)} ==")
    print("\n".join(merged_lines(records)))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
