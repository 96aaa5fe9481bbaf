"""The code task's sandbox (`tasks.sandbox`) against a corpus of hostile programs, in every backend that works
here, and code verification (`tasks.code_exec`): extraction, comparison, verdicts and their reasons, and the
shipped sample problems with known good and bad completions.

What a weaker backend does not isolate (rlimits: network and filesystem; unshare: filesystem) is marked xfail
with the reason, so that the suite states what each backend guarantees.
"""

import dataclasses
import json
import os
import pathlib
import secrets
import socket
import tempfile
import textwrap

import pytest

from arena_jax.tasks import code_exec
from arena_jax.tasks import code_verdicts
from arena_jax.tasks import sandbox

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = REPO / "arena_jax" / "tasks" / "samples" / "code_sample.jsonl"
COMPLETIONS = REPO / "tests" / "data" / "code_completions.jsonl"
FAST = sandbox.Limits(cpu_s=1, wall_s=2, memory_mb=256, max_output_bytes=64 << 10)
NO_NETWORK = ("bwrap", "unshare")
NO_FILESYSTEM = ("bwrap",)


@pytest.fixture(params=sandbox.BACKENDS)
def backend(request):
  why = sandbox.unavailable_reason(request.param)
  if why:
    pytest.skip(f"the {request.param} backend does not work here: {why}")
  return request.param


def expect_weak(request, backend: str, isolated: tuple[str, ...], what: str) -> None:
  if backend not in isolated:
    request.applymarker(pytest.mark.xfail(strict=True, reason=f"the {backend} backend has no {what} isolation"))


def run(source: str, backend: str, stdin: str = "", **limits) -> sandbox.RunResult:
  return sandbox.run_program(
    textwrap.dedent(source), stdin, limits=dataclasses.replace(FAST, **limits), backend=backend
  )


def md(code: str) -> str:
  return f"My solution:\n\n```python\n{textwrap.dedent(code).strip()}\n```\n"


def process_limit_holds(backend: str) -> bool:
  """Whether max_processes is enforced (module docstring of `tasks.sandbox`): else a fork bomb would fill the host."""
  return sandbox.pids_cgroup_available() or (backend != "rlimits" and os.geteuid() != 0)


def processes_with(marker: str) -> list[int]:
  found = []
  for name in os.listdir("/proc"):
    if name.isdigit():
      try:
        with open(f"/proc/{name}/cmdline", "rb") as f:
          if marker.encode() in f.read():
            found.append(int(name))
      except OSError:
        pass
  return found


# ── backends ──


def test_backend_choice_and_override(monkeypatch):
  available = sandbox.available_backends()
  assert available[-1] == "rlimits"  # always works
  monkeypatch.delenv(sandbox.ENV_VAR, raising=False)
  assert sandbox.detect_backend() == available[0]
  monkeypatch.setenv(sandbox.ENV_VAR, "rlimits")
  assert sandbox.detect_backend() == "rlimits"
  assert sandbox.run_program("print(6 * 7)").backend == "rlimits"
  monkeypatch.setenv(sandbox.ENV_VAR, "chroot")
  with pytest.raises(ValueError, match="auto"):
    sandbox.detect_backend()
  for name in sandbox.BACKENDS:
    if name not in available:
      monkeypatch.setenv(sandbox.ENV_VAR, name)
      with pytest.raises(sandbox.SandboxError, match=name):
        sandbox.detect_backend()


def test_without_bwrap_the_next_backend_is_chosen(monkeypatch):
  which = sandbox.shutil.which
  monkeypatch.setattr(sandbox.shutil, "which", lambda tool: None if tool == "bwrap" else which(tool))
  monkeypatch.delenv(sandbox.ENV_VAR, raising=False)
  sandbox._probe.cache_clear()
  try:
    assert sandbox.unavailable_reason("bwrap") == "bwrap is not installed"
    assert sandbox.detect_backend() in ("unshare", "rlimits")
    monkeypatch.setenv(sandbox.ENV_VAR, "bwrap")
    with pytest.raises(sandbox.SandboxError, match="bwrap is not installed"):
      sandbox.run_program("pass")
  finally:
    sandbox._probe.cache_clear()  # the next test probes the real machine again


def test_a_program_reads_stdin_and_its_files(backend):
  result = sandbox.run_program(
    "import sys\nprint(sys.stdin.read().upper(), open('data/note.txt').read())",
    "hello",
    files={"data/note.txt": "world"},
    backend=backend,
  )
  assert (result.returncode, result.stdout, result.limit_hit, result.backend) == (0, "HELLO world\n", "", backend)
  with pytest.raises(ValueError, match="relative"):
    sandbox.run_program("pass", files={"../escape.py": ""}, backend=backend)


def test_the_environment_is_minimal_and_deterministic(backend):
  source = """
    import json, os, sys
    try:
      import numpy
      numpy_found = True
    except ImportError:
      numpy_found = False
    print(json.dumps({"env": sorted(os.environ), "numpy": numpy_found, "order": list({"ab", "cd", "ef", "gh"})}))
  """
  first, second = (json.loads(run(source, backend).stdout) for _ in range(2))
  assert first == second  # PYTHONHASHSEED=0: the same set order in every run
  assert not first["numpy"]  # the stdlib only: no site-packages
  ours = {"PATH", "HOME", "LANG", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8"}
  assert set(first["env"]) - ours <= {"PWD", "LC_CTYPE"}  # bwrap's --chdir sets PWD; Python may set LC_CTYPE


# ── the hostile corpus ──


def test_an_infinite_loop_hits_the_cpu_limit(backend):
  # A wall limit far above the CPU limit: under load CPU time accrues slower than wall time.
  result = run("while True:\n  pass\n", backend, wall_s=30)
  assert result.cpu_limited and result.limit_hit == "cpu" and not result.timed_out


def test_a_sleeping_program_hits_the_wall_limit(backend):
  result = run("import time\nprint('started', flush=True)\ntime.sleep(60)\n", backend, wall_s=0.5)
  assert result.timed_out and result.limit_hit == "wall" and result.stdout == "started\n"  # killed, not slept out


def test_a_fork_bomb_leaves_nothing_running(backend):
  if not process_limit_holds(backend):
    pytest.skip(f"without a writable pids cgroup only the wall time bounds a fork bomb in {backend}: not run here")
  marker = f"arena-fork-bomb-{secrets.token_hex(8)}"
  source = f"""
    import os, sys, time
    # Some children leave the process group and the session, and hide under a new command line.
    for _ in range(8):
      if os.fork() == 0:
        try:
          os.setsid()
          os.execv(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(60)", {marker!r}])
        finally:
          os._exit(1)
    while True:
      try:
        os.fork()
      except OSError:
        time.sleep(0.001)
  """
  result = run(source, backend, wall_s=1)
  assert result.timed_out and result.limit_hit == "wall"
  assert processes_with(marker) == []


def test_without_a_cgroup_escaped_processes_are_found_by_their_pipes(monkeypatch):
  marker = f"arena-escaped-{secrets.token_hex(8)}"
  source = f"""
    import os, sys
    for _ in range(3):
      if os.fork() == 0:
        os.setsid()  # out of the process group, still holding stdout and stderr
        os.execv(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(60)", {marker!r}])
    print("left them")
  """
  monkeypatch.setenv(sandbox.CGROUP_ENV_VAR, "0")
  sandbox._cgroup_base.cache_clear()
  try:
    result = run(source, "rlimits")
  finally:
    sandbox._cgroup_base.cache_clear()
  assert result.stdout == "left them\n" and processes_with(marker) == []


def test_the_process_limit_holds(backend):
  if not process_limit_holds(backend):
    pytest.skip("max_processes is hard only with a pids cgroup, or in bwrap or unshare as a non-root user")
  source = """
    import os, time
    started = 0
    for _ in range(100):
      try:
        pid = os.fork()
      except OSError:
        break
      if pid == 0:
        time.sleep(30)
        os._exit(0)
      started += 1
    print(started)
  """
  result = run(source, backend, max_processes=12)
  assert result.returncode == 0 and 0 < int(result.stdout) < 12


@pytest.mark.parametrize(
  "source", ["x = bytearray(2 << 30)\n", "chunks = []\nwhile True:\n  chunks.append(bytearray(16 << 20))\n"]
)
def test_a_memory_hog_hits_the_memory_limit(backend, source):
  result = run(source, backend)
  assert result.memory_limited and result.limit_hit == "memory" and "MemoryError" in result.stderr


def test_huge_output_is_capped_and_the_run_ends(backend):
  result = run("import sys\nwhile True:\n  sys.stdout.write('x' * 65536)\n", backend, wall_s=10)
  assert result.output_truncated and result.limit_hit == "output"
  assert len(result.stdout) == FAST.max_output_bytes  # ended by the cap (limit_hit), not by the wall limit
  flood = run("import sys\nsys.stderr.write('e' * (8 << 20) + 'last line')\nsys.exit(3)\n", backend, wall_s=10)
  assert flood.returncode == 3 and flood.stderr.endswith("last line")  # stderr keeps its tail
  assert len(flood.stderr) == FAST.max_output_bytes and flood.limit_hit == ""


def test_no_network(backend, request):
  expect_weak(request, backend, NO_NETWORK, "network")
  with socket.socket() as listener:
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    source = f"""
      import socket
      def attempt(address):
        with socket.socket() as s:
          s.settimeout(0.5)
          try:
            s.connect(address)
            return "connected"
          except OSError as e:
            return type(e).__name__
      print(attempt(("127.0.0.1", {port})), attempt(("1.1.1.1", 80)))
    """
    result = run(source, backend)
    with pytest.raises(BlockingIOError):
      listener.accept()  # nothing came in
  local, external = result.stdout.split()
  assert local != "connected" and external != "connected"


def test_writes_stay_inside_the_sandbox(backend, request, tmp_path):
  expect_weak(request, backend, NO_FILESYSTEM, "filesystem")
  victim, doomed = tmp_path / "victim.txt", tmp_path / "doomed.txt"
  victim.write_text("original")
  doomed.write_text("keep me")
  tag = secrets.token_hex(8)
  targets = [tmp_path / "new.txt", REPO / f"sandbox_escape_{tag}.txt", pathlib.Path(f"/tmp/sandbox_escape_{tag}")]
  source = f"""
    import os
    for path in {[str(victim)] + [str(t) for t in targets]!r}:
      try:
        with open(path, "w") as f:
          f.write("pwned")
      except OSError:
        pass
    try:
      os.remove({str(doomed)!r})
    except OSError:
      pass
    with open("inside_{tag}.txt", "w") as f:  # the private work dir: allowed, and removed after the run
      f.write("fine")
  """
  try:
    result = run(source, backend)
    assert result.returncode == 0, result.stderr
    leftovers = [p for p in pathlib.Path(tempfile.gettempdir()).glob(f"arena_sandbox_*/inside_{tag}.txt")]
    assert leftovers == []  # the work dir is gone
    assert victim.read_text() == "original" and doomed.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doomed.txt", "victim.txt"]
    assert [t for t in targets if t.exists()] == []
  finally:
    for t in targets:
      t.unlink(missing_ok=True)  # a weak backend's write into the repo or /tmp must not outlive the test


# Searches what a program might reach for a "SECRET-<32 hex>" string, most promising first, for a second: its
# environment, every visible process's environment and command line, the newest files under /tmp (where the
# tests' file is), the memory of its ancestors (the verifier that holds the tests), other processes' memory.
_SEARCH = r'''
import os, time
END = time.monotonic() + 1.0
HEX = set(b"0123456789abcdef")


def match(blob):
  at = blob.find(b"SECRET-")
  while at >= 0:
    token = blob[at + 7 : at + 39]
    if len(token) == 32 and set(token) <= HEX:
      return (b"SECRET-" + token).decode()
    at = blob.find(b"SECRET-", at + 1)
  return None


def ancestors():
  pid, chain = os.getpid(), []
  while pid > 1:
    try:
      with open(f"/proc/{pid}/stat") as f:
        pid = int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
      break
    chain.append(pid)
  return chain


def memory(pid):
  try:
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
      for line in maps:
        span, perms = line.split()[:2]
        start, end = (int(x, 16) for x in span.split("-"))
        for at in range(start, end, 1 << 22) if "r" in perms else ():
          if time.monotonic() > END:
            return None
          try:
            mem.seek(at)
            found = match(mem.read(min(1 << 22, end - at)))
          except (OSError, ValueError, OverflowError):
            break
          if found:
            return found
  except OSError:
    return None


def mtime(path):
  try:
    return os.stat(path).st_mtime
  except OSError:
    return 0


def files(root):
  for dirpath, dirnames, names in os.walk(root):
    dirnames.sort(key=lambda d: -mtime(os.path.join(dirpath, d)))  # the newest first
    for n in names:
      if time.monotonic() > END:
        return None
      try:
        with open(os.path.join(dirpath, n), "rb") as f:
          found = match(f.read(1 << 20))
        if found:
          return found
      except OSError:
        pass


def find():
  found = match("".join(os.environ.values()).encode())
  pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
  for pid in pids:
    for name in ("environ", "cmdline"):
      try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
          found = found or match(f.read())
      except OSError:
        pass
  found = found or files("/tmp")
  for pid in ancestors():
    found = found or memory(pid)
  for pid in pids:
    found = found or memory(pid)
  return found or "not found"
'''


_PROBE = """
import json, os
try:
  with open({path!r}) as f:
    seen = f.read()
except OSError:
  seen = None
print(json.dumps({{"file": seen, "env": any("SECRET-" in v for v in os.environ.values()),
                  "pid": {pid!r} in os.listdir("/proc")}}))
"""


@pytest.mark.parametrize("form", ["stdin", "call"])
def test_the_expected_outputs_cannot_be_read(backend, tmp_path, form):
  """The tests' expected outputs never enter the sandbox (the parent compares them): a program's search of
  everything it can reach finds nothing under bwrap. Under the other backends the host's files (and, with
  rlimits, its processes) are visible, a stated weakness, shown here deterministically: the tests file on the
  host's disk is readable."""
  secret = f"SECRET-{secrets.token_hex(16)}"
  if form == "stdin":
    tests, fn_name, code = [{"input": "1\n", "output": secret}], None, _SEARCH + "print(find())\n"
  else:
    tests, fn_name, code = [{"args": [1], "expected": secret}], "answer", _SEARCH + "def answer(x):\n  return find()\n"
  host_file = tmp_path / "tests.json"
  host_file.write_text(json.dumps(tests))  # the problem's tests on the host's disk, as a dataset's
  probe = json.loads(run(_PROBE.format(path=str(host_file), pid=str(os.getpid())), backend).stdout)
  assert not probe["env"]  # nothing of the tests is in the program's environment, in any backend
  if backend not in NO_FILESYSTEM:
    assert probe["file"] is not None and secret in probe["file"]  # the weakness: the host's files are visible
    assert probe["pid"] == (backend == "rlimits")  # and, without a pid namespace, its processes
    return
  assert probe["file"] is None and not probe["pid"]  # neither the host's files nor its processes are there
  # The search itself (environments, /proc, /tmp, the memory of every process it sees) finds nothing.
  result = code_exec.verify_code(md(code), tests, fn_name, limits=sandbox.Limits(cpu_s=3, wall_s=4), backend=backend)
  assert result.reason == "wrong answer on test 1"


# ── extraction and comparison ──


def test_extract_code_takes_the_last_python_block():
  text = "```python\nfirst()\n```\nthen\n```py\nsecond()\n```\n```cpp\nint main() {}\n```\n"
  assert code_exec.extract_code(text) == "second()\n"
  assert code_exec.extract_code("```\nbare()\n```") == "bare()\n"
  assert code_exec.extract_code("  ```Python3 \n  indented()\n  ```") == "  indented()\n"
  assert code_exec.extract_code("no fences at all") is None
  assert code_exec.extract_code("```python\nnever_closed()\n") is None
  assert code_exec.extract_code("```python\nok()\n```\n```python\ncut at the budget") == "ok()\n"


def test_extract_code_ignores_thinking():
  visible = "```python\nvisible()\n```"
  assert code_exec.extract_code(f"<think>```python\nhidden()\n```</think>{visible}") == "visible()\n"
  assert code_exec.extract_code(f"{visible}<think>```python\nhidden()\n```</think>") == "visible()\n"
  assert code_exec.extract_code("[THINK]```python\nhidden()\n```[/THINK]no code") is None
  assert code_exec.extract_code(f"{visible}<think>still thinking ```python\nx()\n```") is None  # unclosed


def test_outputs_match():
  assert code_verdicts.outputs_match("1 2\n3  \n\n\n", "1 2\n3")
  assert code_verdicts.outputs_match("3.14159265\n", "3.1415927")
  assert code_verdicts.outputs_match("0.0000000001", "0")
  assert code_verdicts.outputs_match("1e3 x", "1000.0 x")
  assert not code_verdicts.outputs_match("3.1416", "3.14159265")  # 2e-6 relative: too far
  assert not code_verdicts.outputs_match("1 2", "1\n2")
  assert not code_verdicts.outputs_match("yes", "YES")
  assert not code_verdicts.outputs_match("", "0")


def test_values_match():
  assert code_verdicts.values_match([1, [2, 3]], ((1, (2, 3))))
  assert code_verdicts.values_match(0.30000000000000004, 0.3) and code_verdicts.values_match(2, 2.0)
  assert code_verdicts.values_match({"a": [1.0]}, {"a": [1]})
  assert not code_verdicts.values_match(True, 1) and not code_verdicts.values_match(0, False)
  assert not code_verdicts.values_match([1, 2], [2, 1]) and not code_verdicts.values_match("1", 1)


# ── verdicts ──

ADD_STDIO = [
  {"input": "1 2\n", "output": "3\n"},
  {"input": "20 22\n", "output": "42\n"},
  {"input": "-1 1", "output": "0"},
]
ADD_CALL = [{"args": [1, 2], "expected": 3}, {"args": [20, 22], "expected": 42}, {"args": [-1, 1], "expected": 0}]


@pytest.mark.parametrize("reuse", [True, False], ids=["forked", "run_per_test"])
def test_stdin_verdicts(reuse):
  verify = lambda code: code_exec.verify_code(md(code), ADD_STDIO, limits=FAST, reuse_interpreter=reuse)
  assert verify("a, b = map(int, input().split())\nprint(a + b)").reason == "passed 3/3"
  assert verify("import sys\na, b = map(int, open(0).read().split())\nprint(a + b)\nexit()").reason == "passed 3/3"
  threaded = """
    import sys, threading
    threading.stack_size(1 << 24)
    def main():
      a, b = map(int, sys.stdin.buffer.read().split())
      sys.stdout.write(f"{a + b}\\n")
    threading.Thread(target=main).start()
  """
  assert verify(threaded).reason == "passed 3/3"  # the interpreter waits for its threads
  assert verify("import os, sys\nprint(sum(map(int, input().split())))\nsys.stdout.flush()\nos._exit(0)").passed
  wrong = verify("a, b = map(int, input().split())\nprint(a + b if a < 10 else 0)")
  assert (wrong.passed, wrong.tests_passed, wrong.reason) == (False, 1, "wrong answer on test 2")
  crash = verify("a, b = map(int, input().split())\nprint({}[a])")
  assert crash.reason == "runtime error on test 1: KeyError: 1"
  assert verify("print('x' * 10**6, end='')\nwhile True:\n  print('y' * 10**6)").reason == "output limit on test 1"
  memory = verify("a = bytearray(1 << 30)")
  assert (memory.reason, memory.limit_hit) == ("memory limit on test 1", "memory")
  assert code_exec.verify_code("I cannot solve this.", ADD_STDIO).reason == "no code block"
  assert code_exec.verify_code("<think>```python\nprint(3)\n```", ADD_STDIO).reason == "no code block"
  with pytest.raises(ValueError):
    code_exec.verify_code(md("pass"), [])


def test_call_verdicts():
  verify = lambda code, name="add": code_exec.verify_code(md(code), ADD_CALL, name, limits=FAST)
  assert verify("def add(a, b):\n  print('noise', end='')\n  return a + b").reason == "passed 3/3"
  assert verify("class Solution:\n  def add(self, a: int, b: int) -> int:\n    return a + b").reason == "passed 3/3"
  assert verify("def add(a, b):\n  return a - b").reason == "wrong answer on test 1"
  assert verify("def add(a, b):\n  return a + b if a != 20 else 1 / 0").reason == (
    "runtime error on test 2: ZeroDivisionError: division by zero"
  )
  slow = verify("def add(a, b):\n  while a == -1:\n    pass\n  return a + b")
  # A busy loop meets the CPU limit, or the wall limit first when other processes hold the cores (a loaded CI).
  assert (slow.reason, slow.tests_passed) == ("time limit on test 3", 2) and slow.limit_hit in ("cpu", "wall")
  assert verify("def plus(a, b):\n  return a + b").reason.startswith("runtime error on test 1: NameError")
  assert verify("def add(a, b)\n  return a + b").reason.startswith("runtime error on test 1: SyntaxError")
  assert verify("import os\ndef add(a, b):\n  os._exit(0)").reason == (
    "runtime error on test 1: the program exited before answering"
  )
  # A forged harness line is only ever the candidate's own answer: it cannot pass a test it does not solve.
  forged = "import sys\ndef add(a, b):\n  print('\\n0' * 40 + ' 0 ok 3')\n  return 0"
  assert verify(forged).reason == "wrong answer on test 1"


def test_both_limits_firing_together_is_one_time_limit():
  # On a loaded machine the CPU and the wall timers can both fire before the harness disarms them (CI once read
  # "runtime error on test 5: _TimeLimit: cpu" for the exponential-recursion sample). The two signals are made
  # pending together here: the first must be the time limit and the second must change nothing.
  both = (
    "import signal, os\n"
    "def add(a, b):\n"
    "  if a == -1:\n"
    "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF})\n"
    "    os.kill(os.getpid(), signal.SIGALRM)\n"
    "    os.kill(os.getpid(), signal.SIGPROF)\n"
    "    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM, signal.SIGPROF})\n"
    "    while True:\n"
    "      pass\n"
    "  return a + b"
  )
  result = code_exec.verify_code(md(both), ADD_CALL, "add", limits=FAST)
  assert (result.reason, result.tests_passed, result.limit_hit) == ("time limit on test 3", 2, "wall")


def test_call_values_cross_the_sandbox_intact():
  values = ['héllo "quoted" \\ back\nnew line\u2028 😀', "", {"k": [1, 2.5, None, True]}, [[1, [2, [3]]]], 10**30]
  values += [-0.0, 1e-300, float("inf"), False, None]
  tests = [{"args": [v], "expected": v} for v in values]
  assert code_exec.verify_code(md("def echo(x):\n  return x"), tests, "echo", limits=FAST).reason == "passed 10/10"
  tests = [{"args": [list(range(30000))], "expected": [1, 3]}]  # a long argument takes the json path
  result = code_exec.verify_code(md("def f(xs):\n  return {len(xs) // 10000, 1}"), tests, "f", limits=FAST)
  assert result.reason == "passed 1/1"  # a set is compared as its sorted list
  # The prelude runs only what the code names: no typing (nor re, 25 ms) for code that names none of it.
  light = "import sys\ndef heavy() -> bool:\n  return 'typing' in sys.modules or 're' in sys.modules"
  assert code_exec.verify_code(md(light), [{"args": [], "expected": False}], "heavy", limits=FAST).passed
  typed = "def heavy() -> List[int]:\n  return [1]"
  assert code_exec.verify_code(md(typed), [{"args": [], "expected": [1]}], "heavy", limits=FAST).passed


def test_sample_problems_and_completions():
  problems = {row["id"]: row for row in map(json.loads, SAMPLES.read_text().splitlines())}
  assert len(problems) == 10
  for row in problems.values():
    assert row["question"] and len(row["tests"]) >= 3
    keys = {"args", "expected"} if row.get("fn_name") else {"input", "output"}
    assert all(set(t) == keys for t in row["tests"])
  assert {bool(row.get("fn_name")) for row in problems.values()} == {True, False}
  completions = [json.loads(line) for line in COMPLETIONS.read_text().splitlines()]
  for pid in problems:
    assert {c["expect_pass"] for c in completions if c["id"] == pid} == {True, False}
  items = [
    {"completion": c["completion"], "tests": problems[c["id"]]["tests"], "fn_name": problems[c["id"]].get("fn_name")}
    for c in completions
  ]
  with code_exec.CodePool(num_workers=2, limits=FAST) as pool:
    results = pool.verify_batch(items)
  got = [(c["id"], c["note"], r.passed, r.reason) for c, r in zip(completions, results)]
  want = [(c["id"], c["note"], c["expect_pass"], r.reason) for c, r in zip(completions, results)]
  assert got == want
  for c, r in zip(completions, results):
    assert r.reason.startswith(c["expect_reason"]), (c["id"], c["note"], r.reason)


def test_the_benchmark_runs_and_ends_with_json(capsys):
  from benchmarks import code_sandbox  # pylint: disable=g-import-not-at-top

  code_sandbox.main(["--problems", "4", "--samples", "2", "--meter_cpu", "0", "--per_test", "0"])
  figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert figures["bench"] == "code_sandbox" and figures["programs"] == 8
  assert figures["verdicts_correct"] == 1.0 and figures["programs_per_s_rlimits"] > 0
