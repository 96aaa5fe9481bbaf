"""What a code problem's test run means: outputs and values compared, and the `CodeResult` of a completion.

Shared by the harnesses of both test formats (`code_stdio`, `code_call`) and read by `code_exec.verify_code`;
the comparisons follow LiveCodeBench's (`outputs_match` for stdin/stdout tests, `values_match` for call-based
ones). Every verdict says why (`CodeResult.reason`; the `code_exec` module docstring lists the reasons).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from arena_jax.tasks import sandbox

REL_TOL, ABS_TOL = 1e-6, 1e-9  # numbers compared with math.isclose (ABS_TOL: an expected 0)
REASON_CHARS = 200  # of a runtime error's message quoted in a reason


@dataclasses.dataclass(frozen=True)
class CodeResult:
  """The verdict on one completion: passed = every test passed; tests_passed counts the tests passed before
  the first failure; reason says what happened (`code_exec`'s module docstring); limit_hit is the sandbox limit that
  ended the failing run ("wall", "cpu", "memory", "output") or ""."""

  passed: bool
  tests_passed: int
  tests_total: int
  reason: str
  limit_hit: str = ""


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


def last_line(text: str) -> str:
  lines = [line.strip() for line in text.splitlines() if line.strip()]
  return lines[-1][:REASON_CHARS] if lines else ""


def failed_run(run: sandbox.RunResult, k: int, passed: int, total: int) -> CodeResult | None:
  """The verdict when run k (1-based) did not finish normally, else None."""
  what = {"wall": "time limit", "cpu": "time limit", "memory": "memory limit", "output": "output limit"}
  if run.limit_hit:
    return CodeResult(False, passed, total, f"{what[run.limit_hit]} on test {k}", run.limit_hit)
  if run.returncode != 0:
    detail = last_line(run.stderr) or f"exit status {run.returncode}"
    return CodeResult(False, passed, total, f"runtime error on test {k}: {detail}")
  return None
