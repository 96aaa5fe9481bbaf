"""Code completions scored per second through `CodePool`, in the best sandbox backend and in plain rlimits.

    python -m benchmarks.code_sandbox [--problems 100] [--samples 5] [--workers 2] [--seed 0]
        [--meter_cpu 1] [--per_test 1]

Workload: `--problems` easy problems, variants of the shipped samples' kinds with their own constants (two
thirds stdin/stdout, one third call-based, half of those LeetCode's `class Solution` with `List` annotations;
4 tests each), and `--samples` completions each, correct and wrong ones mixed (a correct one, another correct
one written differently, one off by a constant, one that crashes, then correct again, in that cycle). Each
completion is a program, verified in one sandboxed run (`tasks.code_exec`: a stdin/stdout harness forks a
process per test, a call-based one calls the function per test). The same completions go through
`CodePool(num_workers=--workers)` with the best backend that works here (`sandbox.detect_backend`), with
`rlimits` (resource limits only: the reference) and, with `--per_test 1`, with the best backend and one
sandboxed run per stdin/stdout test (`reuse_interpreter=False`: what the forking harness saves), each after an
untimed warm-up. Every verdict is checked against the one the completion was written for.

The target is ≥ 20 programs/s on 2 cores. A run costs an interpreter start-up (`python -S`, no site: 8 ms of
CPU here; with site's .pth files, 80 ms), the sandbox (bwrap: ~6 ms, 2 of them namespaces and 4 mounts) and
the harness (a fork per stdin/stdout test, ~2 ms). The cores are shared with whatever else runs, so besides
the wall-clock rate the benchmark measures the CPU time its runs took (a cgroup v1 `cpuacct` group of its own,
where one is writable: the sandboxed processes included, which no rusage reports) and states the rate
`--workers` idle cores would give: programs / CPU-seconds × min(workers, cores). The load average is printed
with the figures. The last line is JSON.
"""

from __future__ import annotations

import os
import random
import secrets
import time

from benchmarks import common

from arena_jax.tasks import code_exec
from arena_jax.tasks import sandbox


def _md(code: str) -> str:
  return f"Here is a solution.\n\n```python\n{code.strip()}\n```\n"


def _stdin_sum(rng: random.Random, k: int):
  """Print k times the sum of n integers."""
  tests = []
  for _ in range(4):
    nums = [rng.randint(1, 100) for _ in range(rng.randint(1, 8))]  # a sum that is never 0
    tests.append({"input": f"{len(nums)}\n{' '.join(map(str, nums))}\n", "output": f"{k * sum(nums)}\n"})
  read = "n = int(input())\nnums = list(map(int, input().split()))\n"
  codes = [
    (read + f"print({k} * sum(nums))", True),
    (f"import sys\ndata = sys.stdin.read().split()\nprint(sum(int(x) for x in data[1:]) * {k})", True),
    (read + f"print({k + 1} * sum(nums))", False),
    (read + f"print({k} * sum(nums[n]))", False),
  ]
  return {"question": f"Print {k} times the sum of the n integers given.", "tests": tests}, codes


def _stdin_count(rng: random.Random, k: int):
  """Count the words of a line longer than k letters."""
  tests = []
  for _ in range(4):
    words = ["".join(rng.choice("abcde") for _ in range(rng.randint(1, 9))) for _ in range(rng.randint(1, 10))]
    words.insert(rng.randint(0, len(words)), "x" * k)  # a word of exactly k letters: > and >= differ
    tests.append({"input": " ".join(words) + "\n", "output": f"{sum(len(w) > k for w in words)}\n"})
  codes = [
    (f"print(sum(len(w) > {k} for w in input().split()))", True),
    (f"n = 0\nfor w in input().split():\n  if len(w) > {k}:\n    n += 1\nprint(n)", True),
    (f"print(sum(len(w) >= {k} for w in input().split()))", False),
    (f"words = input().split()\nprint(words[{k} * 100])", False),
  ]
  return {"question": f"Print how many words of the line are longer than {k} letters.", "tests": tests}, codes


def _call_poly(rng: random.Random, k: int):
  """poly(x) = x * x + k * x."""
  tests = [
    {"args": [x], "expected": x * x + k * x} for x in (rng.choice([-1, 1]) * rng.randint(1, 50) for _ in range(4))
  ]
  codes = [
    (f"def poly(x):\n  return x * x + {k} * x", True),
    (f"def poly(x: int) -> int:\n  return x * (x + {k})", True),
    (f"def poly(x):\n  return x * x + {k + 1} * x", False),
    ("def poly(x):\n  return undefined_name * x", False),
  ]
  return {"question": f"Write poly(x) returning x*x + {k}*x.", "fn_name": "poly", "tests": tests}, codes


def _call_solution(rng: random.Random, k: int):
  """LeetCode style: Solution().countMultiples(nums) counts the multiples of k."""
  tests = []
  for _ in range(4):
    nums = [rng.randint(0, 60) for _ in range(rng.randint(1, 12))]
    tests.append({"args": [nums], "expected": sum(x % k == 0 for x in nums)})
  head = "class Solution:\n  def countMultiples(self, nums: List[int]) -> int:\n"
  codes = [
    (head + f"    return sum(1 for x in nums if x % {k} == 0)", True),
    (head + f"    return len([x for x in nums if not x % {k}])", True),
    (head + f"    return sum(1 for x in nums if x % {k} == 0) + 1", False),
    (head + "    return nums[len(nums)]", False),
  ]
  question = f"Complete Solution.countMultiples(nums): how many entries are multiples of {k}."
  return {"question": question, "fn_name": "countMultiples", "tests": tests}, codes


_KINDS = (_stdin_sum, _stdin_count, _call_poly, _stdin_sum, _call_solution, _stdin_count)
_CYCLE = (0, 1, 2, 3, 0)  # correct, correct (written differently), off by a constant, crashes, correct


def make_workload(problems: int, samples: int, seed: int):
  """(items for CodePool.verify_batch, the verdict each completion was written for)."""
  rng = random.Random(seed)
  items, expected = [], []
  for p in range(problems):
    row, codes = _KINDS[p % len(_KINDS)](rng, 2 + p % 5)
    for s in range(samples):
      code, passes = codes[_CYCLE[s % len(_CYCLE)]]
      items.append({"completion": _md(code), "tests": row["tests"], "fn_name": row.get("fn_name")})
      expected.append(passes)
  return items, expected


def _runs(item, result: code_exec.CodeResult, reuse: bool) -> int:
  """Sandboxed runs that verdict took: one, or with reuse_interpreter=False one per stdin/stdout test up to
  the first failure."""
  if reuse or item.get("fn_name"):
    return 1
  return result.tests_passed + (not result.passed)


class CpuMeter:
  """CPU-seconds used by this process and everything it starts while the meter is open: the process moves into
  a cgroup v1 `cpuacct` group of its own (children inherit it) and back on close. `seconds()` is None where no
  such group can be made (not root, cgroup v2 only)."""

  def __init__(self):
    self.path = self.home = None
    try:
      home = self._own_group()
      path = os.path.join(home, f"arena_bench_{os.getpid()}_{secrets.token_hex(4)}")
      os.mkdir(path)
    except (OSError, StopIteration, ValueError, IndexError):
      return
    try:
      self._join(path)
    except OSError:
      os.rmdir(path)
      return
    self.path, self.home = path, home

  @staticmethod
  def _own_group() -> str:
    with open("/proc/self/cgroup", encoding="utf-8") as f:
      rel = next(line.split(":", 2)[2].strip() for line in f if "cpuacct" in line.split(":")[1].split(","))
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
      # mountinfo: id parent dev root mountpoint opts ... - fstype source superopts
      mount = next(m for m in map(str.split, f) if m[m.index("-") + 1] == "cgroup" and "cpuacct" in m[-1].split(","))
    inner = os.path.relpath(rel, mount[3]) if rel.startswith(mount[3]) else rel.lstrip("/")
    return os.path.normpath(os.path.join(mount[4], inner))

  @staticmethod
  def _join(path: str) -> None:
    with open(os.path.join(path, "cgroup.procs"), "w", encoding="ascii") as f:
      f.write(str(os.getpid()))

  def seconds(self) -> float | None:
    if self.path is None:
      return None
    with open(os.path.join(self.path, "cpuacct.usage"), encoding="ascii") as f:
      return int(f.read()) / 1e9

  def close(self) -> None:
    if self.path is not None:
      self._join(self.home)
      for _ in range(100):  # the last sandboxed processes leave the group a moment after they exit
        try:
          os.rmdir(self.path)
          break
        except OSError:
          time.sleep(0.01)
      self.path = None


def measure(backend: str, items, expected, workers: int, meter_cpu: bool, reuse: bool = True) -> dict:
  with code_exec.CodePool(num_workers=workers, backend=backend, reuse_interpreter=reuse) as pool:
    pool.verify_batch(items[:workers])  # warm-up: the probe, the page cache
    meter = CpuMeter() if meter_cpu else None
    try:
      start = time.perf_counter()
      results = pool.verify_batch(items)
      seconds = time.perf_counter() - start
      cpu = meter.seconds() if meter else None
    finally:
      if meter:
        meter.close()
  runs = sum(_runs(i, r, reuse) for i, r in zip(items, results))
  right = sum(r.passed == e for r, e in zip(results, expected))
  return {
    "backend": backend,
    "seconds": seconds,
    "programs_per_s": len(items) / seconds,
    "runs": runs,
    "runs_per_s": runs / seconds,
    "verdicts_correct": right / len(items),
    "verdicts": [(r.passed, r.reason) for r in results],
    "cpu_s": cpu,
    "idle_programs_per_s": None if cpu is None else len(items) / cpu * min(workers, os.cpu_count() or 1),
  }


def main(argv=None):
  flags = {"--problems": 100, "--samples": 5, "--workers": 2, "--seed": 0, "--meter_cpu": 1, "--per_test": 1}
  args = common.parse_flags(__doc__, argv, flags)
  items, expected = make_workload(args.problems, args.samples, args.seed)
  best = sandbox.detect_backend()
  backends = [best] + (["rlimits"] if best != "rlimits" else [])
  print(
    f"Code sandbox: {args.problems} problems × {args.samples} completions = {len(items)} programs, "
    f"CodePool(num_workers={args.workers}), backends {', '.join(backends)}, pids cgroup "
    f"{'yes' if sandbox.pids_cgroup_available() else 'no'}, {os.cpu_count()} cores, "
    f"load average {os.getloadavg()[0]:.2f}"
  )
  figures = {b: measure(b, items, expected, args.workers, bool(args.meter_cpu)) for b in backends}
  if args.per_test:  # the same backend with one sandboxed run per stdin/stdout test: what reuse saves
    figures[f"{best}_run_per_test"] = measure(best, items, expected, args.workers, bool(args.meter_cpu), False)
  ref = figures["rlimits"]
  cores = min(args.workers, os.cpu_count() or 1)
  rows = []
  for b, f in figures.items():
    cpu_ms = lambda n: None if f["cpu_s"] is None else 1e3 * f["cpu_s"] / n
    rows.append(
      (
        b,
        f["seconds"],
        f["programs_per_s"],
        f["runs_per_s"],
        f["programs_per_s"] / ref["programs_per_s"],
        cpu_ms(len(items)),
        cpu_ms(f["runs"]),
        f["idle_programs_per_s"],
        f["verdicts_correct"],
      )
    )
  headers = ["backend", "s", "programs/s", "runs/s", "× rlimits", "CPU ms/program", "CPU ms/run"]
  common.print_table(headers + [f"programs/s on {cores} idle cores", "verdicts right"], rows)
  out = {"bench": "code_sandbox", "backend": best, "programs": len(items), "workers": args.workers}
  for b, f in figures.items():
    out[f"programs_per_s_{b}"] = round(f["programs_per_s"], 2)
  out["ratio"] = round(figures[best]["programs_per_s"] / ref["programs_per_s"], 3)
  for b, f in figures.items():
    out[f"runs_per_s_{b}"] = round(f["runs_per_s"], 2)
    out[f"cpu_ms_per_run_{b}"] = None if f["cpu_s"] is None else round(1e3 * f["cpu_s"] / f["runs"], 2)
    out[f"idle_programs_per_s_{b}"] = None if f["cpu_s"] is None else round(f["idle_programs_per_s"], 2)
  out["target_programs_per_s"] = 20
  out["meets_target"] = figures[best]["programs_per_s"] >= 20
  out["meets_target_on_idle_cores"] = (figures[best]["idle_programs_per_s"] or 0) >= 20
  out["verdicts_correct"] = min(f["verdicts_correct"] for f in figures.values())
  out["verdicts_agree"] = len({tuple(f["verdicts"]) for f in figures.values()}) == 1
  out["sandboxed_runs"] = figures[best]["runs"]
  out["pids_cgroup"] = sandbox.pids_cgroup_available()
  out["cores"] = os.cpu_count()
  out["load_average_1m"] = round(os.getloadavg()[0], 2)
  common.emit_json(out)


if __name__ == "__main__":
  main()
