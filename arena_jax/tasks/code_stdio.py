"""Stdin/stdout code tests: the program runs once per test, its stdin the input, its stdout compared in the parent.

`verify_stdio_forked` (the default) runs one sandboxed interpreter for all the tests of a completion: a harness
that compiles the code once and forks a fresh process per test; `verify_stdio` runs one sandboxed program per
test (`code_exec.verify_code(reuse_interpreter=False)`). The `code_exec` module docstring says what a test can
tell apart from a fresh interpreter in the forked harness.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import signal
from typing import Mapping, Sequence

from arena_jax.tasks import sandbox
from arena_jax.tasks.code_verdicts import CodeResult, failed_run, outputs_match

_SOLUTION = "solution.py"  # the candidate's file in the work dir; the harness reads it by this name


def _stdio_verdict(run: sandbox.RunResult, test: Mapping, k: int, total: int) -> CodeResult | None:
  """The failure of stdin/stdout test k (1-based) of `total` in `run`, or None when it passed."""
  failed = failed_run(run, k, k - 1, total)
  if failed:
    return failed
  if not outputs_match(run.stdout, str(test["output"])):
    return CodeResult(False, k - 1, total, f"wrong answer on test {k}")
  return None


def verify_stdio(code: str, tests: Sequence[Mapping], limits: sandbox.Limits, backend, python) -> CodeResult:
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


def verify_stdio_forked(code: str, tests: Sequence[Mapping], limits: sandbox.Limits, backend, python):
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
      failed = failed_run(run, k, k - 1, total)
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
