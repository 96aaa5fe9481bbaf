"""Code task verification: a completion's last Python code block run against a problem's tests in the sandbox.

    extract_code(completion)                  the last ```python / ```py / bare fenced block outside thinking, or None
    verify_code(completion, tests, fn_name)   CodeResult(passed, tests_passed, tests_total, reason, limit_hit)
    CodePool(num_workers=2).verify_batch(items)   the same for many completions, in parallel

Tests come in two formats (LiveCodeBench's):

  stdin/stdout  tests=[{"input": str, "output": str}, ...]: the program runs once per test, its stdin the input;
                the parent compares its stdout with the output (`code_verdicts.outputs_match`). By default one sandboxed
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
                (`code_verdicts.values_match`). Each test has its own `cpu_s` and `wall_s` (timers in the harness); the
                run's limits are theirs times the number of tests.

The expected outputs never enter the sandbox, in either format: only the inputs do. A program that searches
its filesystem, its /proc, its environment or the parent's memory for them cannot find them (it cannot win by
forging a harness line either: that line is only ever its own answer, compared in the parent).

Verification stops at the first failing test. Every result says why (`CodeResult.reason`):

  "passed 3/3"  "wrong answer on test 2"  "time limit on test 1"  "runtime error on test 1: <last stderr line>"
  "memory limit on test 1"  "output limit on test 1"  "no code block"

The modules, split where one extends them (a new test format is a new harness module beside the two):

  code_exec      `extract_code`, `verify_code` (which format, which harness) and `CodePool`
  code_verdicts  what a run of the tests means: `CodeResult`, `outputs_match`, `values_match`
  code_stdio     stdin/stdout tests: the forking harness, and one sandboxed run per test
  code_call      call-based tests: the harness that calls the function, and LeetCode's prelude

Imports neither JAX nor TFDS.
"""

from __future__ import annotations

import concurrent.futures
import re
import sys
from typing import Mapping, Sequence

from arena_jax.tasks import sandbox
from arena_jax.tasks import thinking
from arena_jax.tasks.code_call import verify_call
from arena_jax.tasks.code_stdio import verify_stdio, verify_stdio_forked
from arena_jax.tasks.code_verdicts import CodeResult

PYTHON_LANGS = ("python", "py", "python3", "")  # fence info strings read as Python ("" is a bare fence)
_FENCE = re.compile(r"^[ \t]*```[ \t]*([^\s`]*)[^\n`]*$")
_CLOSE = re.compile(r"^[ \t]*```[ \t]*$")


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
    return verify_call(code, tests, fn_name, limits, backend, python)
  if reuse_interpreter:
    return verify_stdio_forked(code, tests, limits, backend, python)
  return verify_stdio(code, tests, limits, backend, python)


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
