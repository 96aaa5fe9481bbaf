"""`python -m <module> <args>` for many commands, each in a process of its own, without paying each its imports.

A command typed by a user starts a Python, imports JAX and the package (about 3 s of CPU on this machine's cores),
parses its flags and, in the launch-command tests, stops at the first check. Run one by one, 56 documented commands
spent most of their minutes importing. `ForkServer` starts one Python that imports the shared modules once (JAX, the
package, absl, ml_collections: nothing that starts a thread or a JAX backend), then forks a child per command. The
child is what `python -m` makes: its own process, with the command's working directory, environment, argv and
standard streams, running the module as `__main__` (runpy), ending with its exit status, a traceback on stderr for
an uncaught exception. A launch module is never imported by the server itself, so each child defines its flags once.

Protocol (one JSON line each way over pipes): {"argv", "cwd", "env", "stdout", "stderr", "status"} →
{"pid"}; the child writes its exit status to the file `status` as it ends. `run` waits for that file, and kills the
child at its timeout.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

_SERVER = r"""
import json, os, runpy, signal, sys, traceback
for name in {preload!r}:
  __import__(name)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the children are reaped by the kernel
print(json.dumps({{"ready": os.getpid()}}), flush=True)
for line in sys.stdin:
  request = json.loads(line)
  pid = os.fork()
  if pid:
    print(json.dumps({{"pid": pid}}), flush=True)
    continue
  status = 1
  try:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the command's own children are its own to wait for
    os.setsid()  # a process group of its own, as a shell gives a command: killed whole at a timeout
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
      out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
      os.dup2(out, fd)
      os.close(out)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    sys.stdin = open(0, closefd=False)
    sys.argv = [request["argv"][0]] + request["argv"][1:]
    sys.path[0] = request["cwd"]
    try:
      runpy.run_module(request["argv"][0], run_name="__main__", alter_sys=True)
      status = 0
    except SystemExit as e:
      code = e.code
      if code is None:
        status = 0
      elif isinstance(code, int):
        status = code
      else:
        print(code, file=sys.stderr)
        status = 1
    except BaseException:  # as python -m: the traceback on stderr, status 1
      traceback.print_exc()
      status = 1
  finally:
    try:
      sys.stdout.flush()
      sys.stderr.flush()
    finally:
      with open(request["status"] + ".tmp", "w") as f:
        f.write(str(status))
      os.replace(request["status"] + ".tmp", request["status"])
      os._exit(status)
"""


# What every launch main imports before its flags are parsed: a server for launch commands imports it once.
LAUNCH_PRELOAD = ("jax", "absl.app", "absl.flags", "ml_collections", "arena_jax", "arena_jax.cli", "arena_jax.train")

_LOCK = threading.Lock()  # one request at a time on the server's pipes


class ForkServer:
  """A server of `python -m` children (module docstring); a context manager that stops it."""

  def __init__(self, preload: tuple[str, ...], *, cwd: str | os.PathLike, env: dict[str, str] | None = None):
    self.env = dict(os.environ if env is None else env)
    self._proc = subprocess.Popen(
      [sys.executable, "-c", _SERVER.format(preload=tuple(preload))],
      cwd=cwd,
      env=self.env,
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      text=True,
    )
    ready = self._proc.stdout.readline()
    if not ready:
      raise RuntimeError(f"the fork server did not start (exit {self._proc.wait()})")

  def run(
    self, argv: list[str], *, cwd: str | os.PathLike, workdir: pathlib.Path, timeout: float, env=None
  ) -> subprocess.CompletedProcess:
    """`python -m argv…` in a child: a CompletedProcess with its stdout and stderr; returncode None when it did not
    end within `timeout` seconds (it is killed then). `workdir` holds its stream and status files. Callers may
    share the server from several threads: a request and its answer hold the pipes together."""
    workdir.mkdir(parents=True, exist_ok=True)
    files = {k: str(workdir / f"{k}.txt") for k in ("stdout", "stderr", "status")}
    request = dict(argv=list(argv), cwd=str(cwd), env=dict(self.env if env is None else env), **files)
    with _LOCK:
      self._proc.stdin.write(json.dumps(request) + "\n")
      self._proc.stdin.flush()
      pid = json.loads(self._proc.stdout.readline())["pid"]
    status_file = pathlib.Path(files["status"])
    deadline = time.monotonic() + timeout
    while not status_file.is_file() and time.monotonic() < deadline:
      time.sleep(0.05)
    if status_file.is_file():
      code = int(status_file.read_text())
    else:
      code = None
      try:
        os.killpg(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    read = lambda k: pathlib.Path(files[k]).read_text(errors="replace")  # noqa: E731
    return subprocess.CompletedProcess([sys.executable, "-m", *argv], code, read("stdout"), read("stderr"))

  def close(self) -> None:
    if self._proc.poll() is None:
      self._proc.stdin.close()
      try:
        self._proc.wait(timeout=30)
      except subprocess.TimeoutExpired:
        self._proc.kill()

  def __enter__(self) -> ForkServer:
    return self

  def __exit__(self, *exc) -> None:
    self.close()
