"""Call-based code tests (LeetCode style): ONE sandboxed run calls the solution's function on every test's arguments.

The harness executes the code as module `solution` after the parts of LeetCode's prelude it names, calls
`fn_name` (or `Solution().fn_name`) per test under its own `cpu_s` / `wall_s` timers, and prints each return
value as JSON after a random nonce; `verify_call` compares them with the expected values in the parent.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import typing
from typing import Mapping, Sequence

from arena_jax.tasks import sandbox
from arena_jax.tasks.code_verdicts import REASON_CHARS, CodeResult, failed_run, values_match

_SOLUTION = "solution.py"  # the candidate's file in the work dir; the harness imports it as module `solution`


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


_FIRED = []


def _on_timer(signum, frame):
  # Once per armed test: on a loaded machine both timers can fire before `fail` (in `_main`) disarms them, and a
  # second _TimeLimit raised inside that except clause would escape it as an uncaught error.
  if _FIRED:
    return
  _FIRED.append(signum)
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
    if on:
      _FIRED.clear()
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


def verify_call(code: str, tests: Sequence[Mapping], fn_name: str, limits: sandbox.Limits, backend, python):
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
      return CodeResult(False, k - 1, total, f"runtime error on test {k}: {payload[:REASON_CHARS]}")
    if kind != "ok":
      failed = failed_run(run, k, k - 1, total)
      detail = "the program exited before answering"
      return failed or CodeResult(False, k - 1, total, f"runtime error on test {k}: {detail}")
    try:
      value = json.loads(payload)
    except ValueError:
      return CodeResult(False, k - 1, total, f"wrong answer on test {k}")
    if not values_match(value, test["expected"]):
      return CodeResult(False, k - 1, total, f"wrong answer on test {k}")
  return CodeResult(True, total, total, f"passed {total}/{total}")
