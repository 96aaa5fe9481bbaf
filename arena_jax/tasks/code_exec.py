"""Code task verification: a completion's last Python code block run against a problem's tests in the sandbox.

    extract_code(completion)                  the last ```python / ```py / bare fenced block outside thinking, or None
    verify_code(completion, tests, fn_name)   CodeResult(passed, tests_passed, tests_total, reason, limit_hit)
    CodePool(num_workers=2).verify_batch(items)   the same for many completions, in parallel

Tests come in two formats (LiveCodeBench's):

  stdin/stdout  tests=[{"input": str, "output": str}, ...]: the program runs once per test, its stdin the input;
                the parent compares its stdout with the output (`outputs_match`). By default one sandboxed
                interpreter serves all the tests of a completion: a harness that compiles the code once and
                forks a fresh process per test (its own stdin and stdout, its own RLIMIT_CPU of cpu_s, a
                wall_s timeout, its own process group, killed with its children after the test), so a further
                test costs a fork (~2 ms on a 2-core machine) instead of a sandboxed interpreter start-up
                (25-40 ms: `benchmarks/code_sandbox.py`). What a test can tell apart from a fresh interpreter:
                the modules the harness imported (os, resource, select, sys, time) are loaded already, files
                written for an earlier test are still in the work dir, and atexit handlers do not run
                (non-daemon threads are joined, as an interpreter does).
                `reuse_interpreter=False`: one sandboxed run per test.
  call-based    fn_name="f", tests=[{"args": [...], "expected": ...}, ...]: ONE sandboxed run for all tests, a
                harness that executes the code as a module (after LeetCode's prelude, `from typing import *`
                and the usual stdlib modules: the statements whose names the code mentions), calls `f(*args)`
                per test, or `Solution().f(*args)` when the code defines `class Solution` (LeetCode style),
                and prints each return value as JSON on a line that starts with a random nonce (the
                candidate's own prints are told apart); the parent compares them with `expected`
                (`values_match`). Each test has its own `cpu_s` and `wall_s` (timers in the harness); the
                run's limits are theirs times the number of tests.

The expected outputs never enter the sandbox, in either format: only the inputs do. A program that searches
its filesystem, its /proc, its environment or the parent's memory for them cannot find them (it cannot win by
forging a harness line either: that line is only ever its own answer, compared in the parent).

Verification stops at the first failing test. Every result says why (`CodeResult.reason`):

  "passed 3/3"  "wrong answer on test 2"  "time limit on test 1"  "runtime error on test 1: <last stderr line>"
  "memory limit on test 1"  "output limit on test 1"  "no code block"

Imports neither JAX nor TFDS.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import re
import secrets
import signal
import sys
import typing
from typing import Any, Mapping, Sequence

from arena_jax.tasks import sandbox
from arena_jax.tasks import thinking

PYTHON_LANGS = ("python", "py", "python3", "")  # fence info strings read as Python ("" is a bare fence)
REL_TOL, ABS_TOL = 1e-6, 1e-9  # numbers compared with math.isclose (ABS_TOL: an expected 0)
_FENCE = re.compile(r"^[ \t]*```[ \t]*([^\s`]*)[^\n`]*$")
_CLOSE = re.compile(r"^[ \t]*```[ \t]*$")
_SOLUTION = "solution.py"
_REASON_CHARS = 200


@dataclasses.dataclass(frozen=True)
class CodeResult:
  """The verdict on one completion: passed = every test passed; tests_passed counts the tests passed before
  the first failure; reason says what happened (module docstring); limit_hit is the sandbox limit that
  ended the failing run ("wall", "cpu", "memory", "output") or ""."""

  passed: bool
  tests_passed: int
  tests_total: int
  reason: str
  limit_hit: str = ""


# ── extraction and comparison ──


def extract_code(completion: str | None) -> str | None:
  """The last fenced Python code block of the completion's visible part, or None.

  Fences: ```python, ```py, ```python3 (any case) or a bare ```; blocks in another language are skipped, a
  block that is never closed does not count. Only the text outside thinking blocks is read
  (`thinking.split_thinking`); a completion that ended inside its thinking has no code.
  """
  split = thinking.split_thinking(completion)
  if split.unclosed:
    return None
  last, lang, body = None, None, []
  for line in split.visible.splitlines():
    if lang is None:
      m = _FENCE.match(line)
      if m:
        lang, body = m.group(1).lower(), []
    elif _CLOSE.match(line):
      if lang in PYTHON_LANGS:
        last = "\n".join(body) + "\n"
      lang = None
    else:
      body.append(line)
  return last


def _normalise_lines(text: str) -> list[str]:
  lines = [line.rstrip() for line in text.splitlines()]
  while lines and not lines[-1]:
    lines.pop()
  return lines


def _number(token: str) -> float | None:
  try:
    value = float(token)
  except ValueError:
    return None
  return value if math.isfinite(value) else None


def outputs_match(actual: str, expected: str) -> bool:
  """Whether a program's stdout answers a test, as LiveCodeBench compares them: line by line after stripping
  trailing whitespace from each line and dropping trailing blank lines; lines that differ still match when
  they have the same whitespace-separated tokens, or tokens that are numbers equal within REL_TOL relative
  (ABS_TOL absolute), e.g. "3.1415927" for "3.14159265"."""
  got, want = _normalise_lines(actual), _normalise_lines(expected)
  if got == want:
    return True
  if len(got) != len(want):
    return False
  for g, w in zip(got, want):
    if g == w:
      continue
    gt, wt = g.split(), w.split()
    if len(gt) != len(wt):
      return False
    for a, b in zip(gt, wt):
      if a != b:
        x, y = _number(a), _number(b)
        if x is None or y is None or not math.isclose(x, y, rel_tol=REL_TOL, abs_tol=ABS_TOL):
          return False
  return True


def values_match(actual: Any, expected: Any) -> bool:
  """Whether a returned value (decoded from JSON) answers a call-based test: JSON equality where tuples equal
  lists, floats are equal within REL_TOL / ABS_TOL, and booleans are not numbers (True != 1)."""
  if isinstance(actual, bool) or isinstance(expected, bool):
    return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
  if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
    if isinstance(actual, int) and isinstance(expected, int):
      return actual == expected
    return math.isclose(actual, expected, rel_tol=REL_TOL, abs_tol=ABS_TOL) or actual == expected
  if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
    return len(actual) == len(expected) and all(values_match(a, e) for a, e in zip(actual, expected))
  if isinstance(actual, dict) and isinstance(expected, dict):
    return actual.keys() == expected.keys() and all(values_match(actual[k], expected[k]) for k in actual)
  return actual == expected


# ── verification ──


def _last_line(text: str) -> str:
  lines = [line.strip() for line in text.splitlines() if line.strip()]
  return lines[-1][:_REASON_CHARS] if lines else ""


def _failed_run(run: sandbox.RunResult, k: int, passed: int, total: int) -> CodeResult | None:
  """The verdict when run k (1-based) did not finish normally, else None."""
  what = {"wall": "time limit", "cpu": "time limit", "memory": "memory limit", "output": "output limit"}
  if run.limit_hit:
    return CodeResult(False, passed, total, f"{what[run.limit_hit]} on test {k}", run.limit_hit)
  if run.returncode != 0:
    detail = _last_line(run.stderr) or f"exit status {run.returncode}"
    return CodeResult(False, passed, total, f"runtime error on test {k}: {detail}")
  return None


def _stdio_verdict(run: sandbox.RunResult, test: Mapping, k: int, total: int) -> CodeResult | None:
  """The failure of stdin/stdout test k (1-based) of `total` in `run`, or None when it passed."""
  failed = _failed_run(run, k, k - 1, total)
  if failed:
    return failed
  if not outputs_match(run.stdout, str(test["output"])):
    return CodeResult(False, k - 1, total, f"wrong answer on test {k}")
  return None


def _verify_stdio(code: str, tests: Sequence[Mapping], limits: sandbox.Limits, backend, python) -> CodeResult:
  """One sandboxed run per test (`reuse_interpreter=False`)."""
  total = len(tests)
  for k, test in enumerate(tests, 1):
    run = sandbox.run_program(code, str(test["input"]), limits=limits, python=python, backend=backend)
    failed = _stdio_verdict(run, test, k, total)
    if failed:
      return failed
  return CodeResult(True, total, total, f"passed {total}/{total}")


# Runs in the sandbox: compiles the candidate once, then for each test input forks a child (a fresh process
# with the same limits, its own RLIMIT_CPU of cpu_s, its own process group) whose stdin is the input and whose
# stdout a memfd, runs the program there as __main__, and prints a record: a header line "<nonce> <index>
# <exit status> <timed out> <wall s> <truncated> <characters>" after a newline, then that many characters of
# the child's output (its first max_output_bytes). It stops at the first test whose child did not exit 0;
# the parent compares the outputs. It imports no json, re or signal (they cost 8 ms of start-up in enum).
_STDIO_HARNESS = r'''
import os, resource, select, sys, time


def _run_child(code, in_fd, out_fd, proto, cpu_s):
  status = 1
  try:
    os.setpgid(0, 0)
    os.dup2(in_fd, 0)
    os.dup2(out_fd, 1)
    for fd in (in_fd, out_fd, proto):
      os.close(fd)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", errors="surrogateescape", closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", errors="surrogateescape", closefd=False)
    sys.argv = ["solution.py"]
    try:
      exec(code, {"__name__": "__main__", "__file__": "solution.py", "__builtins__": __builtins__})
      status = 0
    except SystemExit as e:
      if e.code is None or isinstance(e.code, int):
        status = (e.code or 0) & 0xFF
      else:
        print(e.code, file=sys.stderr)
    except BaseException:
      sys.__excepthook__(*sys.exc_info())  # the interpreter's own printer: no traceback module, no re
    if "threading" in sys.modules:  # an interpreter waits for the program's threads before it exits
      import threading

      for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
          t.join()
    try:
      sys.stdout.flush()
    except BaseException:
      status = status or 1
  finally:
    try:
      sys.stderr.flush()
    finally:
      os._exit(status)


def _main():
  # stdin: "<nonce> <cpu_s> <wall_s> <max_output_bytes> <tests>\n", then per test "<bytes>\n" and the input.
  data = sys.stdin.buffer.read()
  head, _, data = data.partition(b"\n")
  nonce, cpu_s, wall_s, cap, tests = head.decode().split()
  cpu_s, wall_s, cap = int(cpu_s), float(wall_s), int(cap)
  inputs = []
  for _ in range(int(tests)):
    size, _, data = data.partition(b"\n")
    inputs.append(data[: int(size)])
    data = data[int(size) :]
  proto = os.dup(1)
  try:
    with open("solution.py", "rb") as f:
      code = compile(f.read(), "solution.py", "exec")
  except BaseException:
    sys.__excepthook__(*sys.exc_info())
    sys.exit(1)
  for i, text in enumerate(inputs):
    in_fd, out_fd = os.memfd_create("stdin"), os.memfd_create("stdout")
    while text:
      text = text[os.write(in_fd, text) :]
    os.lseek(in_fd, 0, os.SEEK_SET)
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
      _run_child(code, in_fd, out_fd, proto, cpu_s)
    os.close(in_fd)
    pidfd = os.pidfd_open(pid)
    timed_out = not select.select([pidfd], [], [], wall_s)[0]
    os.close(pidfd)
    for kill in (os.killpg, os.kill):  # the child's own children too, then the child if it had no group yet
      try:
        kill(pid, 9)
      except OSError:
        pass
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    wall = time.monotonic() - start
    os.lseek(out_fd, 0, os.SEEK_SET)
    out = os.read(out_fd, cap + 1)
    os.close(out_fd)
    truncated = len(out) > cap
    text = out[:cap].decode("utf-8", "replace")
    header = f"\n{nonce} {i} {status} {int(timed_out)} {wall:.4f} {int(truncated)} {len(text)}\n"
    record = (header + text).encode("utf-8", "replace")
    while record:
      record = record[os.write(proto, record) :]
    if timed_out or status != 0 or truncated:
      break


_main()
'''


def _verify_stdio_forked(code: str, tests: Sequence[Mapping], limits: sandbox.Limits, backend, python):
  """One sandboxed run for all the tests: a harness that forks a fresh process per test (`_STDIO_HARNESS`)."""
  total = len(tests)
  nonce = secrets.token_hex(16)
  inputs = [str(t["input"]) for t in tests]  # the inputs only: the expected outputs stay here
  head = f"{nonce} {max(1, math.ceil(limits.cpu_s))} {limits.wall_s} {limits.max_output_bytes} {total}\n"
  request = head + "".join(f"{len(x.encode('utf-8'))}\n{x}" for x in inputs)
  run_limits = dataclasses.replace(
    limits,
    cpu_s=limits.cpu_s + 1,  # the harness's own CPU: each test's child has its own cpu_s
    wall_s=limits.wall_s * total + 1,
    max_output_bytes=total * (4 * limits.max_output_bytes + 256),  # every test's output (UTF-8) on one pipe
  )
  run = sandbox.run_program(
    _STDIO_HARNESS,
    request,
    limits=run_limits,
    files={_SOLUTION: code},
    python=python,
    backend=backend,
  )
  records = _harness_records(run.stdout, nonce)
  for k, test in enumerate(tests, 1):
    record = records.get(k - 1)
    if record is None:
      failed = _failed_run(run, k, k - 1, total)
      return failed or CodeResult(
        False, k - 1, total, f"runtime error on test {k}: the program exited before answering"
      )
    child = _child_result(record, run, limits)
    failed = _stdio_verdict(child, test, k, total)
    if failed:
      return failed
  return CodeResult(True, total, total, f"passed {total}/{total}")


def _harness_records(stdout: str, nonce: str) -> dict[int, tuple[int, bool, float, bool, str]]:
  """The stdin harness's records by test index (the first for each): (status, timed out, wall s, truncated,
  output)."""
  out: dict[int, tuple[int, bool, float, bool, str]] = {}
  marker = f"\n{nonce} "
  at = stdout.find(marker)
  while at >= 0:
    end = stdout.find("\n", at + 1)
    fields = stdout[at + len(marker) : end].split() if end > 0 else []
    try:
      i, status, timed_out, wall, truncated, size = (float(x) if "." in x else int(x) for x in fields)
      out.setdefault(i, (status, bool(timed_out), wall, bool(truncated), stdout[end + 1 : end + 1 + size]))
      at = stdout.find(marker, end + 1 + size)
    except ValueError:
      at = stdout.find(marker, at + 1)
  return out


def _child_result(record: tuple, run: sandbox.RunResult, limits: sandbox.Limits) -> sandbox.RunResult:
  """A test's forked child as a RunResult: its status and output from the harness's record, its stderr the
  run's (the failing child is the last to write there), its limits classified as the sandbox does."""
  status, timed_out, wall, truncated, stdout = record
  sig = -status if status < 0 else 0
  cpu = not timed_out and (sig == signal.SIGXCPU or (sig == signal.SIGKILL and wall >= math.ceil(limits.cpu_s) + 0.9))
  truncated = truncated or sig == signal.SIGXFSZ
  tail = run.stderr[-2000:]
  memory = (
    not (timed_out or truncated or cpu)
    and status != 0
    and ("MemoryError" in tail or "Cannot allocate memory" in tail or sig == signal.SIGKILL)
  )
  hits = {"output": truncated, "wall": timed_out, "cpu": cpu, "memory": memory}
  limit_hit = next((name for name, hit in hits.items() if hit), "")
  return sandbox.RunResult(status, stdout, run.stderr, timed_out, cpu, memory, truncated, wall, run.backend, limit_hit)


# LeetCode's prelude: what its Python environment defines before a solution runs, as (statement, the names it
# defines). The harness runs only the statements whose names the solution's code mentions: `from typing import
# *` costs 25 ms of start-up here (it imports re and enum), and most function-style solutions name no typing name.
_PRELUDE_MODULES = ("bisect", "collections", "functools", "heapq", "itertools", "math", "operator", "random", "re")
_PRELUDE_FROM = (
  "from collections import Counter, OrderedDict, defaultdict, deque",
  "from functools import cache, cmp_to_key, lru_cache, reduce",
  "from heapq import heapify, heappop, heappush, heappushpop, nlargest, nsmallest",
  "from itertools import accumulate, chain, combinations, groupby, permutations, product, zip_longest",
  "from math import ceil, comb, floor, gcd, inf, isqrt, log, sqrt",
  "from bisect import bisect_left, bisect_right, insort",
)
_FROM_NAMES = tuple(tuple(n.strip() for n in line.split(" import ")[1].split(",")) for line in _PRELUDE_FROM)
_PRELUDE = (
  # typing's names that a later statement redefines (Counter, OrderedDict) do not call for typing.
  ("from typing import *", tuple(sorted(set(typing.__all__) - {n for names in _FROM_NAMES for n in names}))),
  *((f"import {m}", (m,)) for m in _PRELUDE_MODULES + ("string",)),
  *zip(_PRELUDE_FROM, _FROM_NAMES),
)

# Runs in the sandbox: executes the candidate as module `solution` (after the prelude lines it needs), calls
# fn_name on each test's arguments, and prints "<nonce> <index> ok <JSON value>" / "<nonce> <index> error
# <message>" / "<nonce> <index> timeout cpu|wall" lines, each after a newline (a candidate's print without one
# cannot swallow it). It stops at the first error. Its own imports stay light: `_signal`, not `signal` (which
# imports enum), and json only for what the plain readers and writers below do not cover (json imports re).
_CALL_HARNESS = r'''
import _signal, sys

_PRELUDE = __PRELUDE__
_LITERALS = {"__builtins__": {}, "true": True, "false": False, "null": None}
_LITERALS.update(Infinity=float("inf"), NaN=float("nan"))


class _TimeLimit(BaseException):
  pass


class _NotPlain(Exception):
  pass


def _on_timer(signum, frame):
  raise _TimeLimit("cpu" if signum == _signal.SIGPROF else "wall")


def _read(text):
  # JSON text (ensure_ascii=False) is a Python expression once true, false and null are names; json if not.
  if len(text) < 100_000:
    try:
      return eval(text, dict(_LITERALS))
    except Exception:
      pass
  import json

  return json.loads(text)


def _plain(value, out):
  # JSON of the plain values a solution returns; anything else goes to json.
  if value is None or value is True or value is False:
    out.append("null" if value is None else "true" if value else "false")
  elif type(value) is int:
    out.append(repr(value))
  elif type(value) is float:
    finite = value - value == 0
    out.append(repr(value) if finite else "NaN" if value != value else "Infinity" if value > 0 else "-Infinity")
  elif type(value) is str:
    if not (value.isascii() and value.isprintable()) or '"' in value or "\\" in value:
      raise _NotPlain()
    out.append('"' + value + '"')
  elif type(value) in (list, tuple, set, frozenset):
    items = value if type(value) in (list, tuple) else _sorted(value)
    out.append("[")
    for k, item in enumerate(items):
      if k:
        out.append(",")
      _plain(item, out)
    out.append("]")
  else:
    raise _NotPlain()


def _sorted(values):
  try:
    return sorted(values)
  except TypeError:
    return list(values)


def _jsonable(value):
  if isinstance(value, (set, frozenset)):
    return _sorted(value)
  raise TypeError(f"the return value holds a {type(value).__name__}, which is not JSON")


def _write(value):
  out = []
  try:
    _plain(value, out)
    return "".join(out)
  except (_NotPlain, ValueError):
    import json

    return json.dumps(value, default=_jsonable)


def _names(code):
  names = set(code.co_names)
  for const in code.co_consts:
    if hasattr(const, "co_names"):
      names |= _names(const)
  return names


def _main():
  # stdin: "<nonce> <fn_name> <cpu_s> <wall_s>", then one line of JSON arguments per test.
  head, *lines = sys.stdin.read().split("\n")
  nonce, name, cpu_s, wall_s = head.split()
  cpu_s, wall_s = float(cpu_s), float(wall_s)
  out = sys.stdout

  def emit(i, kind, payload=""):
    out.write(f"\n{nonce} {i} {kind} {payload}\n")
    out.flush()

  def arm(on):
    _signal.setitimer(_signal.ITIMER_REAL, wall_s if on else 0)
    _signal.setitimer(_signal.ITIMER_PROF, cpu_s if on else 0)

  def fail(i, error):
    arm(False)
    if isinstance(error, _TimeLimit):
      emit(i, "timeout", error.args[0])
    else:
      sys.__excepthook__(type(error), error, error.__traceback__)
      emit(i, "error", f"{type(error).__name__}: {error}".replace("\n", " ")[:300])

  _signal.signal(_signal.SIGALRM, _on_timer)
  _signal.signal(_signal.SIGPROF, _on_timer)
  module = type(sys)("solution")
  module.__file__ = "solution.py"
  sys.modules["solution"] = module
  try:
    arm(True)
    with open("solution.py", encoding="utf-8") as f:
      code = compile(f.read(), "solution.py", "exec")
    used = _names(code)
    exec("\n".join(line for line, names in _PRELUDE if used.intersection(names)), module.__dict__)
    exec(code, module.__dict__)
    arm(False)
    target = module.__dict__.get(name)
    solution = module.__dict__.get("Solution")
    if not callable(target) and not (isinstance(solution, type) and hasattr(solution, name)):
      raise NameError(f"the code defines no function {name!r} (nor a class Solution with that method)")
  except BaseException as error:
    return fail(0, error)
  for i, line in enumerate(lines):
    try:
      args = _read(line)
      arm(True)
      fn = target if callable(target) else getattr(solution(), name)
      value = fn(*args)
      arm(False)
      payload = _write(value)
    except BaseException as error:
      return fail(i, error)
    emit(i, "ok", payload)


_main()
'''.replace("__PRELUDE__", repr(_PRELUDE))


def _verify_call(code: str, tests: Sequence[Mapping], fn_name: str, limits: sandbox.Limits, backend, python):
  total = len(tests)
  nonce = secrets.token_hex(16)
  # The inputs only, a line of JSON each (no raw newline: JSON escapes it): `expected` stays here.
  args = [json.dumps(list(t["args"]), ensure_ascii=False) for t in tests]
  request = "\n".join([f"{nonce} {fn_name} {limits.cpu_s} {limits.wall_s}"] + args)
  # The harness times each test; the run as a whole may take every test's share, plus start-up.
  run_limits = dataclasses.replace(limits, cpu_s=limits.cpu_s * total + 1, wall_s=limits.wall_s * total + 1)
  run = sandbox.run_program(
    _CALL_HARNESS, request, limits=run_limits, files={_SOLUTION: code}, python=python, backend=backend
  )
  lines: dict[int, tuple[str, str]] = {}
  for line in run.stdout.split("\n"):
    parts = line.split(" ", 3) if line.startswith(nonce + " ") else ()
    if len(parts) >= 3 and parts[1].isdigit():
      lines.setdefault(int(parts[1]), (parts[2], parts[3] if len(parts) == 4 else ""))
  for k, test in enumerate(tests, 1):
    kind, payload = lines.get(k - 1, ("", ""))
    if kind == "timeout":
      return CodeResult(False, k - 1, total, f"time limit on test {k}", "cpu" if payload == "cpu" else "wall")
    if kind == "error":
      return CodeResult(False, k - 1, total, f"runtime error on test {k}: {payload[:_REASON_CHARS]}")
    if kind != "ok":
      failed = _failed_run(run, k, k - 1, total)
      detail = "the program exited before answering"
      return failed or CodeResult(False, k - 1, total, f"runtime error on test {k}: {detail}")
    try:
      value = json.loads(payload)
    except ValueError:
      return CodeResult(False, k - 1, total, f"wrong answer on test {k}")
    if not values_match(value, test["expected"]):
      return CodeResult(False, k - 1, total, f"wrong answer on test {k}")
  return CodeResult(True, total, total, f"passed {total}/{total}")


def verify_code(
  completion: str | None,
  tests: Sequence[Mapping],
  fn_name: str | None = None,
  *,
  limits: sandbox.Limits = sandbox.Limits(),
  backend: str | None = None,
  python: str = sys.executable,
  reuse_interpreter: bool = True,
) -> CodeResult:
  """Runs the completion's code (`extract_code`) against `tests` in the sandbox.

  tests: stdin/stdout tests ({"input", "output"}), or call-based ones ({"args", "expected"}) with `fn_name`.
  limits: per test. backend: `sandbox.BACKENDS`; default `sandbox.detect_backend()`.
  reuse_interpreter: stdin/stdout tests run in one sandboxed interpreter that forks a fresh process per test
  (~1 ms a test instead of a ~20 ms start-up; module docstring); False: one sandboxed run per test.
  """
  if not tests:
    raise ValueError("a code problem needs at least one test")
  code = extract_code(completion)
  if code is None:
    return CodeResult(False, 0, len(tests), "no code block")
  if fn_name:
    return _verify_call(code, tests, fn_name, limits, backend, python)
  if reuse_interpreter:
    return _verify_stdio_forked(code, tests, limits, backend, python)
  return _verify_stdio(code, tests, limits, backend, python)


def _item(item) -> tuple[str | None, Sequence[Mapping], str | None]:
  if isinstance(item, Mapping):
    return item["completion"], item["tests"], item.get("fn_name")
  completion, tests, *rest = item
  return completion, tests, (rest[0] if rest else None)


class CodePool:
  """Verifies many completions in parallel: `num_workers` threads, each running one sandboxed program at a time
  (the work is in the subprocesses, so threads are enough).

  verify_batch(items): items are mappings {"completion", "tests", "fn_name" (optional)} or tuples
  (completion, tests[, fn_name]); returns their CodeResults in order. limits, backend, python and
  reuse_interpreter are `verify_code`'s; the backend is chosen once, here.
  """

  def __init__(
    self,
    num_workers: int = 2,
    limits: sandbox.Limits = sandbox.Limits(),
    *,
    backend: str | None = None,
    python: str = sys.executable,
    reuse_interpreter: bool = True,
  ):
    self.limits = limits
    self.backend = backend or sandbox.detect_backend(python)
    self.python = python
    self.reuse_interpreter = reuse_interpreter
    self._executor = concurrent.futures.ThreadPoolExecutor(num_workers, thread_name_prefix="code_pool")

  def verify(self, completion: str | None, tests: Sequence[Mapping], fn_name: str | None = None) -> CodeResult:
    return verify_code(
      completion,
      tests,
      fn_name,
      limits=self.limits,
      backend=self.backend,
      python=self.python,
      reuse_interpreter=self.reuse_interpreter,
    )

  def verify_batch(self, items: Sequence) -> list[CodeResult]:
    return list(self._executor.map(lambda item: self.verify(*_item(item)), items))

  def close(self) -> None:
    self._executor.shutdown(wait=True)

  def __enter__(self) -> CodePool:
    return self

  def __exit__(self, *exc) -> None:
    self.close()
